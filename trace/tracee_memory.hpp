// Reading a stopped tracee's memory: the path a system call names (a
// NUL-terminated string) and the small structures it points to, with
// process_vm_readv(2), one page at a time so that a string ending just before
// an unmapped page is still read.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "opcache/result.hpp"

namespace opcache::trace {

/// The longest path the kernel accepts (PATH_MAX, NUL included).
inline constexpr std::size_t k_max_path_bytes = 4096;

/// The NUL-terminated string at `address` in thread `tid`'s memory.
/// std::nullopt when the kernel will refuse it too, so that the call names
/// nothing: the address is not mapped (EFAULT) or no NUL comes within
/// k_max_path_bytes (ENAMETOOLONG). `io` when the memory cannot be read for
/// another reason (the tracee is gone, permission).
Result<std::optional<std::string>> read_tracee_string(pid_t tid, std::uint64_t address);

/// Exactly `size` bytes at `address` in thread `tid`'s memory into `out`.
/// False when they are not all mapped (the kernel refuses the call with
/// EFAULT); `io` for any other failure.
Result<bool> read_tracee_bytes(pid_t tid, std::uint64_t address, void* out, std::size_t size);

}  // namespace opcache::trace
