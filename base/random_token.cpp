#include "base/random_token.hpp"

#include <openssl/rand.h>

#include <cstdlib>
#include <vector>

namespace opcache::base {

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> random(bytes);
  if (RAND_bytes(random.data(), static_cast<int>(random.size())) != 1) {
    std::abort();  // OpenSSL's generator failed: no safe token can be made
  }
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes * 2);
  for (unsigned char byte : random) {
    hex += k_digits[byte >> 4];
    hex += k_digits[byte & 0xf];
  }
  return hex;
}

}  // namespace opcache::base
