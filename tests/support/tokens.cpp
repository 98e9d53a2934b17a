#include "tests/support/tokens.hpp"

#include "base/sha256.hpp"

namespace opcache::test {

std::string token_line(const std::string& token, const std::string& name, const std::string& scopes) {
  return base::sha256_hex(token) + " " + name + " " + scopes + "\n";
}

}  // namespace opcache::test
