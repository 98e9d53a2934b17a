#include "base/program_search.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace opcache::base {

namespace fs = std::filesystem;

namespace {

bool is_executable_file(const char* path) {
  struct stat info {};
  return ::stat(path, &info) == 0 && S_ISREG(info.st_mode) && ::access(path, X_OK) == 0;
}

// `directory` / `name` as fs::path's operator/ spells it, as plain text:
// PATH is searched on every exec, and most of its entries lack the program.
void join_into(std::string& out, std::string_view directory, const std::string& name) {
  out.assign(directory);
  if (!out.empty() && out.back() != '/') {
    out.push_back('/');
  }
  out.append(name);
}

}  // namespace

std::optional<fs::path> find_program(const std::string& name, std::string_view path_list, EmptyPathEntry empty_entry) {
  if (name.empty()) {
    return std::nullopt;
  }
  if (name.find('/') != std::string::npos) {
    return is_executable_file(name.c_str()) ? std::optional<fs::path>(name) : std::nullopt;
  }
  std::string candidate;
  while (true) {
    const auto colon = path_list.find(':');
    const std::string_view directory = path_list.substr(0, colon);
    if (!directory.empty() || empty_entry == EmptyPathEntry::current_directory) {
      join_into(candidate, directory.empty() ? std::string_view(".") : directory, name);
      if (is_executable_file(candidate.c_str())) {
        return fs::path(candidate);
      }
    }
    if (colon == std::string_view::npos) {
      return std::nullopt;
    }
    path_list.remove_prefix(colon + 1);
  }
}

}  // namespace opcache::base
