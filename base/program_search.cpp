#include "base/program_search.hpp"

#include <sys/stat.h>
#include <unistd.h>

namespace opcache::base {

namespace fs = std::filesystem;

namespace {

bool is_executable_file(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::optional<fs::path> find_program(const std::string& name, std::string_view path_list, EmptyPathEntry empty_entry) {
  if (name.empty()) {
    return std::nullopt;
  }
  if (name.find('/') != std::string::npos) {
    return is_executable_file(name) ? std::optional<fs::path>(name) : std::nullopt;
  }
  while (true) {
    const auto colon = path_list.find(':');
    const std::string_view directory = path_list.substr(0, colon);
    if (!directory.empty() || empty_entry == EmptyPathEntry::current_directory) {
      const fs::path candidate = (directory.empty() ? fs::path(".") : fs::path(directory)) / name;
      if (is_executable_file(candidate)) {
        return candidate;
      }
    }
    if (colon == std::string_view::npos) {
      return std::nullopt;
    }
    path_list.remove_prefix(colon + 1);
  }
}

}  // namespace opcache::base
