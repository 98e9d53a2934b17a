#include "base/ini.hpp"

#include <ini.h>

namespace opcache::base {

Result<std::vector<IniEntry>> parse_ini(const std::string& text, const std::string& origin) {
  std::vector<IniEntry> entries;
  auto handler = [](void* user, const char* section, const char* name, const char* value) -> int {
    static_cast<std::vector<IniEntry>*>(user)->push_back(IniEntry{section, name, value});
    return 1;
  };
  if (int line = ini_parse_string(text.c_str(), handler, &entries); line != 0) {
    return Error::usage(origin + ": line " + std::to_string(line) + " is not INI syntax (key = value)");
  }
  return entries;
}

Result<IniSections> parse_ini_sections(const std::string& text, const std::string& origin) {
  auto entries = parse_ini(text, origin);
  if (!entries) {
    return entries.error();
  }
  IniSections sections;
  for (auto& entry : *entries) {
    sections[entry.section][entry.name] = std::move(entry.value);
  }
  return sections;
}

}  // namespace opcache::base
