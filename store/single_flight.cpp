#include "store/single_flight.hpp"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/file_io.hpp"
#include "store/local_store.hpp"
#include "base/lock_file.hpp"
#include "base/safe_directory.hpp"
#include "base/try.hpp"

namespace opcache::store {

SingleFlight::SingleFlight(std::filesystem::path locks_dir, std::chrono::milliseconds timeout,
                           std::chrono::milliseconds poll)
    : m_locks_dir(std::move(locks_dir)), m_timeout(timeout), m_poll(poll) {}

std::filesystem::path SingleFlight::lock_path(const std::string& key) const { return m_locks_dir / (key + ".lock"); }

std::filesystem::path SingleFlight::failure_path(const std::string& key) const {
  return m_locks_dir / (key + ".failed");
}

std::optional<SingleFlight::Failure> SingleFlight::read_failure(const std::string& key) const {
  auto text = base::read_small_file(failure_path(key));
  if (!text) {
    return std::nullopt;
  }
  auto parsed = nlohmann::json::parse(*text, nullptr, false);
  if (!parsed.is_object()) {
    return std::nullopt;
  }
  Failure failure;
  failure.pid = parsed.value("pid", 0L);
  failure.time_ms = parsed.value("time_ms", std::int64_t{0});
  failure.message = parsed.value("message", std::string());
  return failure;
}

void SingleFlight::record_failure(const std::string& key, const Error& error) const {
  nlohmann::json record = {
      {"pid", static_cast<long>(::getpid())}, {"time_ms", system_clock_ms()()}, {"message", error.message()}};
  // Best effort: without the record, waiters build themselves instead.
  (void)base::write_file_atomic(failure_path(key), record.dump());
}

Result<FlightOutcome> SingleFlight::run(const std::string& key, const std::function<Result<bool>()>& try_hit,
                                        const std::function<Status()>& build) const {
  OPCACHE_TRY_ASSIGN(bool hit, try_hit());
  if (hit) {
    return FlightOutcome::hit;
  }
  OPCACHE_TRY(base::ensure_directory_beneath(m_locks_dir.parent_path(), m_locks_dir.filename()));
  const std::int64_t wait_started_ms = system_clock_ms()();
  bool waited = false;
  OPCACHE_TRY_ASSIGN(base::LockFile lock, base::LockFile::acquire(lock_path(key), m_timeout, m_poll, &waited));

  OPCACHE_TRY_ASSIGN(hit, try_hit());
  if (hit) {
    return FlightOutcome::hit;
  }
  if (waited) {
    if (auto failure = read_failure(key); failure && failure->time_ms >= wait_started_ms) {
      return Error::build_failed("the build of " + key + " in process " + std::to_string(failure->pid) +
                                 ", which this process waited for, failed: " + failure->message);
    }
  }
  auto built = build();
  if (!built) {
    record_failure(key, built.error());
    return built.error();
  }
  ::unlink(failure_path(key).c_str());
  lock.unlink_and_release();
  return FlightOutcome::built;
}

}  // namespace opcache::store
