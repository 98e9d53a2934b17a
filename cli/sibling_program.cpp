#include "cli/sibling_program.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace opcache::cli {

Result<std::filesystem::path> sibling_program_path(const char* program) {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return Error::io(std::string("cannot find ") + program + ": /proc/self/exe, the path of this program, " +
                     "cannot be read (" + error.message() + ")");
  }
  return self.parent_path() / program;
}

Error run_sibling_program(const char* program, int argc, char** argv) {
  auto found = sibling_program_path(program);
  if (!found) {
    return found.error();
  }
  const std::string path = found->string();
  std::vector<char*> arguments;
  arguments.push_back(const_cast<char*>(path.c_str()));
  for (int i = 1; i < argc; ++i) {
    arguments.push_back(argv[i]);
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
