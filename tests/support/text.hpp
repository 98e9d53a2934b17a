// Small text predicates the tests' assertions share.
#pragma once

#include <string>

namespace opcache::test {

/// Whether `needle` occurs in `haystack` (an empty `needle` always does).
bool contains(const std::string& haystack, const std::string& needle);

}  // namespace opcache::test
