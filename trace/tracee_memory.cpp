#include "trace/tracee_memory.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace opcache::trace {

namespace {

// What the first read of a string takes: longer than nearly every path a
// compiler names (include directories and all).
constexpr std::uint64_t k_first_read_bytes = 256;

std::uint64_t memory_page_size() {
  static const auto size = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// Reads `size` bytes that lie within one page: the count read (0 when the
// page is not mapped), or the errno of another failure as a negative number.
long read_within_page(pid_t tid, std::uint64_t address, char* out, std::size_t size) {
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), size};
  const ssize_t got = ::process_vm_readv(tid, &local, 1, &remote, 1, 0);
  if (got < 0) {
    return errno == EFAULT ? 0 : -errno;
  }
  return got;
}

Error memory_error(pid_t tid, std::uint64_t address, long negative_errno) {
  return Error::io("cannot read the memory of process " + std::to_string(tid) + " at " + std::to_string(address) +
                   ": " + std::strerror(static_cast<int>(-negative_errno)));
}

}  // namespace

Result<std::optional<std::string>> read_tracee_string(pid_t tid, std::uint64_t address) {
  std::string text;
  char page[8192];
  // Most paths are short: the first read copies k_first_read_bytes, not the
  // rest of the page (half of it on average, which the kernel copies while
  // the caller waits for the answer); a longer path is read on to its end.
  std::uint64_t chunk = k_first_read_bytes;
  while (text.size() < k_max_path_bytes) {
    const std::uint64_t to_page_end = memory_page_size() - address % memory_page_size();
    const std::size_t want =
        std::min<std::uint64_t>({chunk, to_page_end, sizeof page, k_max_path_bytes - text.size()});
    chunk = sizeof page;
    const long got = read_within_page(tid, address, page, want);
    if (got < 0) {
      return memory_error(tid, address, got);
    }
    if (got == 0) {
      return std::optional<std::string>();
    }
    const auto* end = static_cast<const char*>(std::memchr(page, '\0', static_cast<std::size_t>(got)));
    if (end != nullptr) {
      text.append(page, static_cast<std::size_t>(end - page));
      return std::optional<std::string>(std::move(text));
    }
    text.append(page, static_cast<std::size_t>(got));
    address += static_cast<std::uint64_t>(got);
  }
  return std::optional<std::string>();
}

Result<bool> read_tracee_bytes(pid_t tid, std::uint64_t address, void* out, std::size_t size) {
  auto* cursor = static_cast<char*>(out);
  while (size > 0) {
    const std::uint64_t to_page_end = memory_page_size() - address % memory_page_size();
    const std::size_t want = std::min<std::uint64_t>(to_page_end, size);
    const long got = read_within_page(tid, address, cursor, want);
    if (got < 0) {
      return memory_error(tid, address, got);
    }
    if (got == 0) {
      return false;
    }
    cursor += got;
    address += static_cast<std::uint64_t>(got);
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace opcache::trace
