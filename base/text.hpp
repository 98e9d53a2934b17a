// Small operations on text that several parsers share.
#pragma once

#include <string_view>
#include <vector>

namespace opcache::base {

/// `text` without the ASCII white space (space, tab, CR, LF, VT, FF) at
/// either end. Locale-independent.
std::string_view trim_space(std::string_view text) noexcept;

/// The fields of `text` between occurrences of `separator`, empty ones
/// included: "a,,b" gives "a", "", "b"; "" gives one empty field. The views
/// point into `text`.
std::vector<std::string_view> split_on(std::string_view text, char separator);

}  // namespace opcache::base
