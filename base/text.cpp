#include "base/text.hpp"

namespace opcache::base {

namespace {

constexpr std::string_view k_ascii_space = " \t\r\n\v\f";

}  // namespace

std::string_view trim_space(std::string_view text) noexcept {
  const auto first = text.find_first_not_of(k_ascii_space);
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(k_ascii_space);
  return text.substr(first, last - first + 1);
}

std::vector<std::string_view> split_on(std::string_view text, char separator) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    const auto end = text.find(separator, start);
    fields.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) {
      return fields;
    }
    start = end + 1;
  }
}

}  // namespace opcache::base
