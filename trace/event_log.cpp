#include "trace/event_log.hpp"

#include "trace/tracee_paths.hpp"

namespace opcache::trace {

std::string EventLog::key_of(std::string_view path, Access access) {
  std::string key(path);
  key.push_back('\0');  // no path holds a NUL
  key.push_back(static_cast<char>('0' + static_cast<int>(access)));
  return key;
}

void EventLog::add(const std::string& path, Access access, std::optional<FileIdentity> identity) {
  if (is_pseudo_file_path(path) || path == m_ignored || !m_recorded.insert(key_of(path, access)).second) {
    return;
  }
  m_events.push_back(PathEvent{path, access, identity});
  if (m_observer) {
    m_observer(m_events.back());
  }
}

bool EventLog::contains(const std::string& path, Access access) const {
  return m_recorded.count(key_of(path, access)) != 0;
}

void EventLog::set_blind(std::string reason) {
  if (!m_blind) {
    m_blind = std::move(reason);
  }
}

void EventLog::move_into(TraceOutcome& outcome) {
  outcome.events = std::move(m_events);
  outcome.blind = std::move(m_blind);
  m_events.clear();
  m_recorded.clear();
  m_blind.reset();
}

}  // namespace opcache::trace
