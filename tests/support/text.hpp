// Small text predicates the tests' assertions share.
#pragma once

#include <string>
#include <vector>

namespace opcache::test {

/// Whether `needle` occurs in `haystack` (an empty `needle` always does).
bool contains(const std::string& haystack, const std::string& needle);

/// Each of `lines` followed by a newline, for messages that list them.
std::string joined_lines(const std::vector<std::string>& lines);

}  // namespace opcache::test
