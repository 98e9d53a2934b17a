// What the tracer and its preload library (trace/preload/trace_preload.cpp)
// agree on. The library makes a traced program's read-only look-ups itself
// (open without writing, stat, access), through one page of code mapped at
// a fixed address that the seccomp filter lets through without a
// notification, and sends the tracer one record per look-up that matters
// over an inherited datagram socket. Everything else the program does is
// still notified. Both sides come from the same build: the version in the
// environment variable makes a library of another build stay out of the way.
#pragma once

#include <fcntl.h>

#include <cstdint>

namespace opcache::trace::preload {

/// Where the library maps its page of code (MAP_FIXED_NOREPLACE): a system
/// call whose instruction pointer is in [k_trampoline_address,
/// k_trampoline_address + k_trampoline_size) is not notified. Far below
/// where Linux places mappings on x86_64 (just under 0x7fff'ffff'f000),
/// far above a program's own image and heap.
inline constexpr std::uint64_t k_trampoline_address = 0x5f0f'0000'0000ULL;
inline constexpr std::uint64_t k_trampoline_size = 4096;

/// Where in the page the code's `syscall` instruction ends: the instruction
/// pointer the filter sees for a call made there. The filter lets through
/// only the calls the library makes, from that one place.
inline constexpr std::uint64_t k_trampoline_return_offset = 20;

/// The open flags a call through the page never has: it only reads (the
/// library keeps the others notified, and the filter refuses them there).
inline constexpr std::uint32_t k_unnotified_open_refused_flags = O_ACCMODE | O_CREAT | O_TRUNC | O_PATH | __O_TMPFILE;

/// The environment variable that tells the library where to send its
/// records: "<version>:<descriptor>:<inode of the socket>". Without it, or
/// with another version, the library does nothing of its own.
inline constexpr const char* k_channel_variable = "OPCACHE_TRACE_CHANNEL";
inline constexpr std::uint32_t k_channel_version = 1;

/// The descriptor number the channel has in the traced tree: above those
/// programs open in a row, below the usual limit of 1024. (The child moves
/// it there itself: growing the descriptor table of the tracer, a process
/// of several threads, waits for an RCU grace period, ~15 ms.)
inline constexpr int k_channel_descriptor = 700;

/// What a record says of its path.
enum class RecordAccess : std::uint32_t {
  read = 1,    ///< opened read-only while it existed (not a directory)
  absent = 2,  ///< looked up (open, stat, access) and not found: ENOENT or ENOTDIR
};

/// One datagram: this header, then `path_size` bytes of an absolute path
/// (not normal: "." and ".." as the program wrote them; no NUL).
struct Record {
  std::uint32_t version = k_channel_version;
  RecordAccess access = RecordAccess::read;
  std::uint32_t has_identity = 0;  ///< 1 for a regular file read: the fields below are set
  std::uint32_t path_size = 0;
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
};

/// The longest path a record carries; a longer look-up is left to the
/// notifications.
inline constexpr std::uint32_t k_max_record_path = 4000;

}  // namespace opcache::trace::preload
