// Digests the files a traced command reads while it still runs. The tracer
// reports each file as the command first opens or runs it; a thread of this
// process digests it meanwhile (on a core the compiler leaves idle), into
// the DigestCache that observe_build asks afterwards. So the inputs of a
// miss, the compiler's tens of megabytes included, are digested during the
// compile instead of after it. observe_build still checks every file's
// identity after the run: a file digested early and changed later is seen.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>

#include "base/file_digest.hpp"
#include "base/mutex.hpp"
#include "trace/process_tracer.hpp"

namespace opcache::store {

/// One command's worth of early digests. offer() may be called from one
/// thread (the tracer's) while another calls finish(); the worker thread is
/// started by the first file offered.
class DigestPrefetch {
 public:
  /// Digests into `cache`; the programs run (executed, not opened) only
  /// when `programs_digested` (observe_build's ProgramInputs::digested).
  DigestPrefetch(base::DigestCache cache, bool programs_digested);
  DigestPrefetch(const DigestPrefetch&) = delete;
  DigestPrefetch& operator=(const DigestPrefetch&) = delete;
  /// finish().
  ~DigestPrefetch();

  /// Queues the file of `event` when it is an input observe_build will
  /// digest: a regular file read or run before the tree wrote it. Cheap;
  /// never blocks on digesting.
  void offer(const trace::PathEvent& event);

  /// Digests what is still queued and stops the worker; later offers are
  /// ignored. Digest errors are left for observe_build to meet again.
  void finish();

 private:
  void work();

  /// The next path to digest, or std::nullopt once finishing and drained.
  std::optional<std::string> next() EXCLUDES(m_mutex);

  base::DigestCache m_cache;
  bool m_programs_digested;
  base::Mutex m_mutex;
  base::CondVar m_wake;
  std::deque<std::string> m_queue GUARDED_BY(m_mutex);
  bool m_finishing GUARDED_BY(m_mutex) = false;
  std::unordered_set<std::string> m_written;  ///< tracer thread only
  std::thread m_worker;                       ///< tracer thread only, until finish()
};

}  // namespace opcache::store
