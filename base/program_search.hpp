// Finding the program a command name runs, as execvp(3) searches PATH.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace opcache::base {

/// How an empty entry of a PATH list is read.
enum class EmptyPathEntry {
  current_directory,  ///< as execvp(3) and the shell read it (what a wrapped command would run)
  skipped,            ///< never search the current directory (tools opcache runs itself)
};

/// The program `name` runs: `name` itself when it contains a '/' and is an
/// executable regular file, else the first executable regular file of that
/// name in the directories of `path_list` ("a:b:c"); std::nullopt when none.
std::optional<std::filesystem::path> find_program(const std::string& name, std::string_view path_list,
                                                  EmptyPathEntry empty_entry);

}  // namespace opcache::base
