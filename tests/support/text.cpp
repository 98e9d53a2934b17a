#include "tests/support/text.hpp"

namespace opcache::test {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string joined_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) {
    out += line + "\n";
  }
  return out;
}

}  // namespace opcache::test
