#include "tests/support/signing_keys.hpp"

#include <doctest/doctest.h>

#include <utility>

namespace opcache::test {

base::Ed25519PrivateKey new_signing_key() {
  auto key = base::Ed25519PrivateKey::generate();
  REQUIRE(key.ok());
  return std::move(*key);
}

}  // namespace opcache::test
