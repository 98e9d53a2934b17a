#include "cli/sibling_program.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace opcache::cli {

std::filesystem::path sibling_program_path(const char* program) {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return (error ? std::filesystem::path(".") : self.parent_path()) / program;
}

Error run_sibling_program(const char* program, char** argv) {
  const std::string path = sibling_program_path(program).string();
  std::vector<char*> arguments;
  arguments.push_back(const_cast<char*>(path.c_str()));
  for (char** argument = argv + 1; *argument != nullptr; ++argument) {
    arguments.push_back(*argument);
  }
  arguments.push_back(nullptr);
  ::execv(path.c_str(), arguments.data());
  const int error = errno;
  if (error == ENOENT) {
    return Error::usage(path + " is missing: this command runs that program, which is built with the "
                        "opcache_serve target (scripts/build.sh builds it; scripts/demo.sh does not) and "
                        "installed with opcache");
  }
  return Error::io("cannot run " + path + ": " + std::strerror(error));
}

}  // namespace opcache::cli
