// The tracer's side of the preload library (trace/preload/): finding the
// library, the datagram socket its copies in a traced tree send their
// records on, the environment that makes a traced program load it, and the
// records turned into events. Used only with TraceMechanism::user_notification
// on x86_64, where the seccomp filter lets the library's page of code through
// (SeccompFilter's `unnotified_page`); elsewhere, and wherever the library
// stays out (a static program, a cleared LD_PRELOAD, a closed socket), every
// call is notified as before.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/file_io.hpp"
#include "trace/process_tracer.hpp"

namespace opcache::trace {

/// The preload library this process would give a traced command:
/// OPCACHE_TRACE_PRELOAD when set ("off": none; else a path, used when it
/// exists), else libopcache-trace-preload.so beside the program or library
/// this code is linked into, or where `cmake --install` puts it relative to
/// that (lib/<multiarch>/opcache/). std::nullopt when there is none, or on
/// another architecture than x86_64. Computed once; thread-safe.
const std::optional<std::string>& preload_library();

/// One traced command's channel. Not copyable.
class PreloadChannel {
 public:
  /// A channel for a command to be started with `library` preloaded;
  /// std::nullopt when the socket cannot be made (the command then runs
  /// fully notified).
  static std::optional<PreloadChannel> open(const std::string& library);

  PreloadChannel(PreloadChannel&&) = default;
  PreloadChannel& operator=(PreloadChannel&&) = default;

  /// The descriptor of the sending end, O_CLOEXEC: the child duplicates
  /// it to child_descriptor_number(), which its execve keeps open.
  int child_descriptor() const noexcept { return m_send.get(); }

  /// The number the environment gives the channel in the child.
  static int child_descriptor_number() noexcept;

  /// This process's environment with the library appended to LD_PRELOAD
  /// (after any library the user preloads, which keeps precedence) and
  /// preload_abi.hpp's channel variable set: for the child's execve.
  const std::vector<std::string>& child_environment() const noexcept { return m_environment; }

  /// Closes this process's copy of the sending end, once the child has
  /// its own (it is started).
  void close_child_end() noexcept { m_send.reset(); }

  /// Hands every record waiting now to `add`, as an event: path absolute
  /// and normal, looked up as the tracer's classifier does (".." after the
  /// symlinks before it). A record that cannot be decoded (none should)
  /// is reported through `blind`.
  void receive_waiting(const std::function<void(PathEvent)>& add,
                       const std::function<void(std::string)>& blind) const;

 private:
  PreloadChannel(base::FileDescriptor receive, base::FileDescriptor send, std::vector<std::string> environment)
      : m_receive(std::move(receive)), m_send(std::move(send)), m_environment(std::move(environment)) {}

  base::FileDescriptor m_receive;
  base::FileDescriptor m_send;
  std::vector<std::string> m_environment;
};

}  // namespace opcache::trace
