#include "tests/support/text.hpp"

namespace opcache::test {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace opcache::test
