// The record of one traced command: each (path, access) pair once, in the
// order the tree first did it, and the first reason the tracer could not see
// everything.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "trace/process_tracer.hpp"

namespace opcache::trace {

/// Events in first-occurrence order, without repeats, and the blind reason.
/// Not thread-safe (one per traced command, used by its tracing thread).
class EventLog {
 public:
  /// A log that also hands each new event to `observer` (when set), on the
  /// tracing thread, as it is recorded.
  explicit EventLog(std::function<void(const PathEvent&)> observer = {}) : m_observer(std::move(observer)) {}

  /// Records `access` to `path` (absolute and normal) unless that pair is
  /// recorded already, `path` is under /proc, /sys or /dev, or it is the
  /// path ignore() named. The identity
  /// of the first record of a pair is the one kept.
  void add(const std::string& path, Access access, std::optional<FileIdentity> identity = std::nullopt);

  /// Leaves `path` (absolute, normal) out of the record: the tracer's own
  /// preload library, which the loader reads into each program it gives it.
  void ignore(std::string path) { m_ignored = std::move(path); }

  /// Whether `access` to `path` is recorded.
  bool contains(const std::string& path, Access access) const;

  /// Marks the record incomplete because of `reason` (one line); the first
  /// reason given is the one kept.
  void set_blind(std::string reason);

  /// Whether set_blind was called.
  bool blind() const noexcept { return m_blind.has_value(); }

  /// Moves the events and the blind reason into `outcome`, leaving this empty.
  void move_into(TraceOutcome& outcome);

 private:
  static std::string key_of(std::string_view path, Access access);

  std::function<void(const PathEvent&)> m_observer;
  std::vector<PathEvent> m_events;
  std::unordered_set<std::string> m_recorded;  ///< key_of each event
  std::optional<std::string> m_blind;
  std::string m_ignored;
};

}  // namespace opcache::trace
