#include "trace/preload_channel.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "trace/preload/preload_abi.hpp"
#include "trace/tracee_paths.hpp"

extern char** environ;

// Where `cmake --install` puts the library, relative to the programs and to
// the libraries (CMakeLists.txt sets both; these are the build tree's).
#ifndef OPCACHE_PRELOAD_DIR_FROM_BIN
#define OPCACHE_PRELOAD_DIR_FROM_BIN "."
#endif
#ifndef OPCACHE_PRELOAD_DIR_FROM_LIB
#define OPCACHE_PRELOAD_DIR_FROM_LIB "."
#endif

namespace opcache::trace {

namespace {

namespace fs = std::filesystem;

constexpr const char* k_library_variable = "OPCACHE_TRACE_PRELOAD";
constexpr const char* k_library_name = "libopcache-trace-preload.so";

// The file this code is linked into: the shared library, or the program.
fs::path this_module() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&preload_library), &info) != 0 && info.dli_fname != nullptr &&
      std::strchr(info.dli_fname, '/') != nullptr) {
    std::error_code error;
    auto real = fs::canonical(info.dli_fname, error);
    if (!error) {
      return real;
    }
  }
  std::error_code error;
  return fs::read_symlink("/proc/self/exe", error);
}

// `path`, absolute, when it is a file LD_PRELOAD can name: the loader splits
// the list at spaces and colons and expands `$` tokens.
std::optional<std::string> existing(const fs::path& path) {
  std::error_code error;
  if (!fs::is_regular_file(path, error)) {
    return std::nullopt;
  }
  auto absolute = fs::absolute(path, error).lexically_normal().string();
  if (error || absolute.find_first_of(" \t\n:$") != std::string::npos) {
    return std::nullopt;
  }
  return absolute;
}

std::optional<std::string> find_preload_library() {
#if defined(__x86_64__)
  if (const char* forced = std::getenv(k_library_variable)) {
    if (std::string_view(forced) == "off" || *forced == '\0') {
      return std::nullopt;
    }
    return existing(forced);
  }
  const fs::path directory = this_module().parent_path();
  if (directory.empty()) {
    return std::nullopt;
  }
  for (const char* relative : {".", OPCACHE_PRELOAD_DIR_FROM_BIN, OPCACHE_PRELOAD_DIR_FROM_LIB}) {
    if (auto found = existing(directory / relative / k_library_name)) {
      return found;
    }
  }
#endif
  return std::nullopt;
}

// This process's environment, with `library` appended to LD_PRELOAD and the
// channel variable naming descriptor `fd` (socket inode `inode`); and
// AddressSanitizer told not to insist on coming first among the loaded
// libraries, which a program built with gcc -fsanitize=address would do
// when the preload library comes before its runtime (they interpose
// different functions).
std::vector<std::string> child_environment_of(const std::string& library, int fd, std::uint64_t inode) {
  const std::string preload_prefix = "LD_PRELOAD=";
  const std::string channel_prefix = std::string(preload::k_channel_variable) + "=";
  const std::string asan_prefix = "ASAN_OPTIONS=";
  const std::string asan_option = "verify_asan_link_order=0";
  std::vector<std::string> environment;
  std::string preload = preload_prefix + library;
  std::string asan_options = asan_prefix + asan_option;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view variable(*entry);
    if (variable.starts_with(channel_prefix)) {
      continue;
    }
    if (variable.starts_with(asan_prefix)) {
      const auto given = variable.substr(asan_prefix.size());
      asan_options = given.empty() ? asan_options : std::string(variable) + ":" + asan_option;
      continue;
    }
    if (variable.starts_with(preload_prefix)) {
      const auto given = variable.substr(preload_prefix.size());
      if (!given.empty()) {
        preload = preload_prefix + std::string(given) + ":" + library;
      }
      continue;
    }
    environment.emplace_back(variable);
  }
  environment.push_back(preload);
  environment.push_back(asan_options);
  environment.push_back(channel_prefix + std::to_string(preload::k_channel_version) + ":" + std::to_string(fd) + ":" +
                        std::to_string(inode));
  return environment;
}

}  // namespace

const std::optional<std::string>& preload_library() {
  static const std::optional<std::string> library = find_preload_library();
  return library;
}

int PreloadChannel::child_descriptor_number() noexcept {
  return preload::k_channel_descriptor;
}

std::optional<PreloadChannel> PreloadChannel::open(const std::string& library) {
  if (::fcntl(preload::k_channel_descriptor, F_GETFD) != -1) {
    return std::nullopt;  // open here: the command may expect it, and would lose it to the channel
  }
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ends) != 0) {
    return std::nullopt;
  }
  base::FileDescriptor receive(ends[0]);
  base::FileDescriptor send(ends[1]);
  struct stat info {};
  if (::fstat(send.get(), &info) != 0 ||
      ::fcntl(receive.get(), F_SETFL, ::fcntl(receive.get(), F_GETFL) | O_NONBLOCK) != 0) {
    return std::nullopt;
  }
  auto environment =
      child_environment_of(library, preload::k_channel_descriptor, static_cast<std::uint64_t>(info.st_ino));
  return PreloadChannel(std::move(receive), std::move(send), std::move(environment));
}

void PreloadChannel::receive_waiting(const std::function<void(PathEvent)>& add,
                                     const std::function<void(std::string)>& blind) const {
  struct {
    preload::Record header;
    char path[preload::k_max_record_path + 1];
  } datagram;
  while (true) {
    const ssize_t received = ::recv(m_receive.get(), &datagram, sizeof datagram, 0);
    if (received < 0) {
      if (errno == EINTR || errno == ECONNRESET) {  // ECONNRESET: the last sender is gone, reported once
        continue;
      }
      return;  // EAGAIN: none waiting
    }
    const auto size = static_cast<std::size_t>(received);
    const auto access = datagram.header.access;
    if (size < sizeof(preload::Record) || datagram.header.version != preload::k_channel_version ||
        size != sizeof(preload::Record) + datagram.header.path_size || datagram.header.path_size == 0 ||
        datagram.path[0] != '/' || (access != preload::RecordAccess::read && access != preload::RecordAccess::absent)) {
      blind("the tracer's preload library sent a record it cannot decode");
      continue;
    }
    auto path = resolve_tracee_path(::getpid(), AT_FDCWD, std::string(datagram.path, datagram.header.path_size));
    if (!path || !*path || is_pseudo_file_path(**path)) {
      continue;  // absolute, outside /proc: resolved without the sender's /proc entries
    }
    PathEvent event;
    event.path = std::move(**path);
    event.access = access == preload::RecordAccess::absent ? Access::absent : Access::read;
    if (datagram.header.has_identity != 0) {
      event.identity = FileIdentity{datagram.header.device, datagram.header.inode, datagram.header.size,
                                    datagram.header.mtime_ns, datagram.header.ctime_ns};
    }
    add(std::move(event));
  }
}

}  // namespace opcache::trace
