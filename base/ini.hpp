// INI text (inih's dialect: `[section]`, `name = value`, `;`/`#` comments),
// read through one helper so every config file reports errors the same way.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "opcache/result.hpp"

namespace opcache::base {

/// One `name = value` line of an INI text and the section it is in ("" before any).
struct IniEntry {
  std::string section;
  std::string name;
  std::string value;
};

/// Every entry of `text`, in file order. A syntax error is a `usage` error
/// "<origin>: line N is not INI syntax (key = value)".
Result<std::vector<IniEntry>> parse_ini(const std::string& text, const std::string& origin);

/// section → name → value; when a name repeats within a section, the last value wins.
using IniSections = std::map<std::string, std::map<std::string, std::string>>;

/// `parse_ini`, grouped by section.
Result<IniSections> parse_ini_sections(const std::string& text, const std::string& origin);

}  // namespace opcache::base
