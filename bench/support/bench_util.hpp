// Helpers shared by the benchmark programs (bench/bench_*.cpp): error
// handling, progress messages, file I/O, timing and percentiles, table rows,
// a description of the machine, and the scratch directory.
//
// Benchmarks are programs at the edge, so failures are exceptions here: every
// helper that can fail throws std::runtime_error with a message that names
// what failed, and main() prints it. Nothing here is thread-safe unless said.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::bench {

namespace fs = std::filesystem;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// Errors and progress

/// Throws std::runtime_error(message). Benchmarks catch it in main().
[[noreturn]] void fail(const std::string& message);

/// The value of `result`, or fail("<what>: <error message>").
template <typename T>
T must(opcache::Result<T> result, const std::string& what) {
  if (!result) {
    fail(what + ": " + result.error().message());
  }
  return std::move(result).value();
}

/// Returns if `status` is a success, else fail("<what>: <error message>").
void must(const opcache::Status& status, const std::string& what);

/// Sets the name that prefixes progress messages (default "bench"). Call once
/// at the start of main(), before any other thread runs.
void set_program_name(std::string name);

/// The name set by set_program_name().
const std::string& program_name();

/// Prints "<program>: <message>" on stderr and flushes it. Progress goes to
/// stderr so that stdout holds only the table.
void progress(const std::string& message);

// ---------------------------------------------------------------------------
// Files

/// The whole contents of `path`; fails when it cannot be read.
std::string read_bytes(const fs::path& path);

/// Creates or truncates `path` and writes `contents`; fails on any error.
void write_bytes(const fs::path& path, std::string_view contents);

/// Writes `contents` to "<path>.tmp" and renames it over `path`, so that an
/// interrupted run never leaves a half-written manifest or report behind.
void write_bytes_atomic(const fs::path& path, std::string_view contents);

/// Owns a file descriptor (closed on destruction); -1 means none. Move-only.
class Fd {
 public:
  explicit Fd(int fd) noexcept : m_fd(fd) {}
  Fd(Fd&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const noexcept { return m_fd; }

 private:
  int m_fd;
};

/// Flushes `path` and asks the kernel to drop its cached pages
/// (posix_fadvise DONTNEED: no root needed, nothing else on the machine is
/// affected). Best effort: a missing file is ignored. Does nothing on tmpfs.
void evict_from_page_cache(const fs::path& path);

// ---------------------------------------------------------------------------
// Time and statistics

/// Seconds of steady-clock time since `start`.
double seconds_since(SteadyClock::time_point start);

/// Microseconds from `start` to `end`.
double micros_between(SteadyClock::time_point start, SteadyClock::time_point end);

/// CPU time consumed by the calling thread, in microseconds.
double thread_cpu_us();

/// Nearest-rank percentiles of a set of samples in microseconds; all zero
/// (and samples == 0) for an empty set.
struct Percentiles {
  std::size_t samples = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;

  /// {"samples", "mean_us", "p50_us", "p90_us", "p99_us", "max_us"}.
  json to_json() const;
};

/// The nearest-rank percentiles of `samples` (taken by value: it is sorted).
Percentiles percentiles(std::vector<double> samples);

/// Wall-clock and thread-CPU time of one operation, in microseconds.
struct Sample {
  double wall_us = 0;
  double cpu_us = 0;
};

/// Runs `operation` once and returns its wall and thread-CPU time. The CPU
/// clock is read outside the wall-clock window, so its own cost is not in the
/// wall time. Exceptions from `operation` propagate.
template <typename F>
Sample time_once(F&& operation) {
  const double cpu0 = thread_cpu_us();
  const auto t0 = SteadyClock::now();
  operation();
  const auto t1 = SteadyClock::now();
  return {micros_between(t0, t1), thread_cpu_us() - cpu0};
}

/// Percentiles of wall-clock and of thread-CPU time over a set of samples.
struct Latency {
  Percentiles wall;
  Percentiles cpu;

  /// {"wall": Percentiles, "thread_cpu": Percentiles}.
  json to_json() const;
};

/// The percentiles of the wall and CPU times of `samples`.
Latency summarize(const std::vector<Sample>& samples);

/// A ratio of two quantiles and its bootstrap confidence interval.
struct RatioInterval {
  double ratio = 0;  ///< quantile(a) / quantile(b) over all samples
  double low = 0;    ///< 2.5th percentile of the resampled ratios
  double high = 0;   ///< 97.5th percentile of the resampled ratios

  /// {"ratio", "ci95_low", "ci95_high"}.
  json to_json() const;
};

/// quantile(a) / quantile(b) (nearest rank, `quantile` in (0, 1]) with a 95 %
/// percentile-bootstrap interval from `resamples` paired resamples: a[i] and
/// b[i] must have been measured together (back to back), so that drift that
/// hit both stays paired. Deterministic for a given `seed`. Fails when a and b
/// differ in size or are empty.
RatioInterval paired_ratio_interval(const std::vector<double>& a, const std::vector<double>& b, double quantile,
                                    std::size_t resamples = 1000, std::uint64_t seed = 1);

/// The wall-clock times of `samples`, in order.
std::vector<double> wall_times(const std::vector<Sample>& samples);

/// Kernels (and their raw bytes) processed in some seconds. Rates are 0 when
/// no time was measured. MB are 10^6 bytes.
struct Throughput {
  std::size_t kernels = 0;
  std::uint64_t raw_bytes = 0;
  double seconds = 0;

  double kernels_per_second() const;
  double megabytes_per_second() const;
  /// {"kernels", "raw_bytes", "seconds", "kernels_per_second", "megabytes_per_second"}.
  json to_json() const;
};

// ---------------------------------------------------------------------------
// Text

/// `value` formatted by the printf `pattern` (one double conversion).
std::string format(const char* pattern, double value);

/// The current UTC time as "YYYY-MM-DDTHH:MM:SSZ".
std::string utc_now_rfc3339();

/// A whole number >= `minimum` parsed from a flag's value; fails with a
/// message naming `flag` otherwise.
std::size_t parse_count(std::string_view flag, std::string_view text, std::size_t minimum);

/// Gives one flag's value ("--flag VALUE" or "--flag=VALUE"); fails when none is left.
using FlagValue = std::function<std::string()>;

/// Walks the command line: calls `handle(flag, value)` for each flag, which
/// returns false for a flag it does not know (then this fails naming the
/// argument). `--help` / `-h` prints `usage` and returns false (do not run);
/// otherwise returns true.
bool parse_flags(int argc, char** argv, const char* usage,
                 const std::function<bool(const std::string& flag, const FlagValue& value)>& handle);

/// One table line: two spaces, `label` left-aligned in `label_width`, then each
/// cell right-aligned in `cell_width`, and a newline.
std::string row(const std::string& label, const std::vector<std::string>& cells, int label_width = 38,
                int cell_width = 11);

/// A row of kernels/s, MB/s and seconds.
std::string throughput_row(const std::string& label, const Throughput& t);

/// A row of p50, p90, p99, max and mean.
std::string latency_row(const std::string& label, const Percentiles& p);

/// A row of wall-clock p50, p90, p99, max and mean, then the median and p99
/// of thread CPU time.
std::string latency_row(const std::string& label, const Latency& l);

/// A row of the ratios a / b of the wall p50, p90 and p99 (then two empty
/// cells) and of the CPU p50 and p99, shaped like latency_row(Latency).
std::string ratio_row(const std::string& label, const Latency& a, const Latency& b);

// ---------------------------------------------------------------------------
// Machine

/// The mount that holds `path`, as "<type> (<options>)" from
/// /proc/self/mounts, or "unknown". The options matter (a `discard` mount,
/// say, makes freeing blocks slow).
std::string file_system_of(const fs::path& path);

/// The CPU model from /proc/cpuinfo, or "unknown".
std::string cpu_model();

/// The machine as JSON: nproc, cpu_model, kernel, kernel_version, arch, and
/// work_file_system (file_system_of(work)).
json machine_json(const fs::path& work);

/// The 1-minute load average, or -1 when it cannot be read.
double load_average_1m();

// ---------------------------------------------------------------------------
// Scratch space

/// A directory that is removed (recursively, ignoring errors) on destruction
/// when it was created by make_work_directory, and kept when the user named
/// it. Move-only.
class ScratchDirectory {
 public:
  ScratchDirectory(fs::path path, bool remove) : m_path(std::move(path)), m_remove(remove) {}
  ScratchDirectory(ScratchDirectory&& other) noexcept
      : m_path(std::move(other.m_path)), m_remove(std::exchange(other.m_remove, false)) {}
  ScratchDirectory& operator=(ScratchDirectory&&) = delete;
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ~ScratchDirectory();
  const fs::path& path() const { return m_path; }
  bool kept() const { return !m_remove; }

 private:
  fs::path m_path;
  bool m_remove;
};

/// The work directory of a run. With `requested` (--work DIR): that
/// directory, created if needed and kept at the end; of its contents only
/// the subdirectories named in `owned_subdirectories` (the ones the benchmark
/// creates) are removed first, so a rerun starts fresh without touching
/// anything else. Without: a new "$TMPDIR/opcache-bench-XXXXXX" (TMPDIR
/// defaults to /tmp), removed at the end. Fails when it cannot be created.
ScratchDirectory make_work_directory(const std::optional<fs::path>& requested,
                                     std::initializer_list<const char*> owned_subdirectories);

}  // namespace opcache::bench
