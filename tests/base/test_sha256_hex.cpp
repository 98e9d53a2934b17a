// base/sha256: is_sha256_hex, the check of every digest a manifest names.
#include <doctest/doctest.h>

#include <string>

#include "base/sha256.hpp"

TEST_CASE("base::is_sha256_hex takes exactly 64 lowercase hex digits") {
  const std::string good = opcache::base::sha256_hex("k.h");
  REQUIRE(good.size() == 64);
  CHECK(opcache::base::is_sha256_hex(good));
  CHECK(opcache::base::is_sha256_hex(std::string(64, '0')));
  CHECK(opcache::base::is_sha256_hex(std::string(64, 'f')));
  CHECK_FALSE(opcache::base::is_sha256_hex(good.substr(1)));
  CHECK_FALSE(opcache::base::is_sha256_hex(good + "0"));
  CHECK_FALSE(opcache::base::is_sha256_hex(""));
  // One wrong byte anywhere: upper case, the letters and digits' neighbours, NUL, UTF-8.
  for (std::size_t at = 0; at < 64; ++at) {
    for (const char wrong : {'A', 'F', 'g', '/', ':', '`', ' ', '\0', '\xc3'}) {
      std::string text = good;
      text[at] = wrong;
      INFO("byte " << static_cast<int>(static_cast<unsigned char>(wrong)) << " at " << at);
      CHECK_FALSE(opcache::base::is_sha256_hex(text));
    }
  }
}
