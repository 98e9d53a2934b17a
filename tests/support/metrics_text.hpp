// Reading the /metrics text of `opcache serve` in tests.
#pragma once

#include <regex>
#include <string>

namespace opcache::test {

/// `text` (a /metrics exposition) without the `replica` label every series
/// carries since revision 9 (docs/protocol.md "GET /metrics"): each sample
/// as it reads with no replica named (`name{route="entry"} 1`,
/// `opcache_entry_waits 0`), for tests of one server that compare samples
/// by their text. Tests of the label itself read the text as it is.
inline std::string without_replica_label(const std::string& text) {
  static const std::regex only(R"(\{replica="(?:[^"\\]|\\.)*"\})");
  static const std::regex last(R"(,replica="(?:[^"\\]|\\.)*"\})");
  return std::regex_replace(std::regex_replace(text, only, ""), last, "}");
}

}  // namespace opcache::test
