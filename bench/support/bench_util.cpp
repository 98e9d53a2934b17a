// Helpers shared by the benchmark programs; see bench_util.hpp.
#include "support/bench_util.hpp"

#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

namespace opcache::bench {

namespace {

std::string& program_name_storage() {
  static std::string name = "bench";
  return name;
}

}  // namespace

// ---------------------------------------------------------------------------
// Errors and progress

void fail(const std::string& message) {
  throw std::runtime_error(message);
}

void must(const opcache::Status& status, const std::string& what) {
  if (!status) {
    fail(what + ": " + status.error().message());
  }
}

void set_program_name(std::string name) {
  program_name_storage() = std::move(name);
}

const std::string& program_name() {
  return program_name_storage();
}

void progress(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program_name().c_str(), message.c_str());
  std::fflush(stderr);
}

// ---------------------------------------------------------------------------
// Files

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail("cannot read " + path.string());
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

void write_bytes(const fs::path& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!out) {
    fail("cannot write " + path.string());
  }
}

void write_bytes_atomic(const fs::path& path, std::string_view contents) {
  fs::path temp = path;
  temp += ".tmp";
  write_bytes(temp, contents);
  fs::rename(temp, path);
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (m_fd >= 0) {
      ::close(m_fd);
    }
    m_fd = std::exchange(other.m_fd, -1);
  }
  return *this;
}

Fd::~Fd() {
  if (m_fd >= 0) {
    ::close(m_fd);
  }
}

void evict_from_page_cache(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() >= 0) {
    ::fdatasync(fd.get());
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  }
}

// ---------------------------------------------------------------------------
// Time and statistics

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

double micros_between(SteadyClock::time_point start, SteadyClock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - start).count();
}

double thread_cpu_us() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

json Percentiles::to_json() const {
  return {{"samples", samples}, {"mean_us", mean}, {"p50_us", p50}, {"p90_us", p90}, {"p99_us", p99}, {"max_us", max}};
}

Percentiles percentiles(std::vector<double> samples) {
  Percentiles result;
  if (samples.empty()) {
    return result;
  }
  std::sort(samples.begin(), samples.end());
  auto rank = [&samples](double q) {
    auto index = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size())));
    return samples[std::clamp<std::size_t>(index, 1, samples.size()) - 1];
  };
  result.samples = samples.size();
  double sum = 0;
  for (double sample : samples) {
    sum += sample;
  }
  result.mean = sum / static_cast<double>(samples.size());
  result.p50 = rank(0.50);
  result.p90 = rank(0.90);
  result.p99 = rank(0.99);
  result.max = samples.back();
  return result;
}

json Latency::to_json() const {
  return {{"wall", wall.to_json()}, {"thread_cpu", cpu.to_json()}};
}

Latency summarize(const std::vector<Sample>& samples) {
  std::vector<double> wall, cpu;
  wall.reserve(samples.size());
  cpu.reserve(samples.size());
  for (const auto& sample : samples) {
    wall.push_back(sample.wall_us);
    cpu.push_back(sample.cpu_us);
  }
  return {percentiles(std::move(wall)), percentiles(std::move(cpu))};
}

json RatioInterval::to_json() const {
  return {{"ratio", ratio}, {"ci95_low", low}, {"ci95_high", high}};
}

namespace {

// The nearest-rank quantile of `values` (reordered in place).
double quantile_of(std::vector<double>& values, double q) {
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  auto nth = values.begin() + static_cast<std::ptrdiff_t>(std::clamp<std::size_t>(rank, 1, values.size()) - 1);
  std::nth_element(values.begin(), nth, values.end());
  return *nth;
}

}  // namespace

RatioInterval paired_ratio_interval(const std::vector<double>& a, const std::vector<double>& b, double quantile,
                                    std::size_t resamples, std::uint64_t seed) {
  if (a.empty() || a.size() != b.size()) {
    fail("paired_ratio_interval needs two non-empty sample sets of the same size");
  }
  RatioInterval result;
  std::vector<double> x = a, y = b;
  result.ratio = quantile_of(x, quantile) / quantile_of(y, quantile);
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::size_t> pick(0, a.size() - 1);
  std::vector<double> ratios;
  ratios.reserve(resamples);
  for (std::size_t r = 0; r < resamples; ++r) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::size_t j = pick(random);
      x[i] = a[j];
      y[i] = b[j];
    }
    ratios.push_back(quantile_of(x, quantile) / quantile_of(y, quantile));
  }
  result.low = quantile_of(ratios, 0.025);
  result.high = quantile_of(ratios, 0.975);
  return result;
}

std::vector<double> wall_times(const std::vector<Sample>& samples) {
  std::vector<double> wall;
  wall.reserve(samples.size());
  for (const auto& sample : samples) {
    wall.push_back(sample.wall_us);
  }
  return wall;
}

double Throughput::kernels_per_second() const {
  return seconds > 0 ? static_cast<double>(kernels) / seconds : 0;
}

double Throughput::megabytes_per_second() const {
  return seconds > 0 ? static_cast<double>(raw_bytes) / 1e6 / seconds : 0;
}

json Throughput::to_json() const {
  return {{"kernels", kernels},
          {"raw_bytes", raw_bytes},
          {"seconds", seconds},
          {"kernels_per_second", kernels_per_second()},
          {"megabytes_per_second", megabytes_per_second()}};
}

// ---------------------------------------------------------------------------
// Text

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

std::string utc_now_rfc3339() {
  std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return buffer;
}

std::size_t parse_count(std::string_view flag, std::string_view text, std::size_t minimum) {
  std::size_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < minimum) {
    fail(std::string(flag) + " needs a whole number >= " + std::to_string(minimum) + ", not \"" + std::string(text) +
         "\"");
  }
  return value;
}

bool parse_flags(int argc, char** argv, const char* usage,
                 const std::function<bool(const std::string& flag, const FlagValue& value)>& handle) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (auto equals = flag.find('='); flag.rfind("--", 0) == 0 && equals != std::string::npos) {
      inline_value = flag.substr(equals + 1);
      flag = flag.substr(0, equals);
    }
    if (flag == "--help" || flag == "-h") {
      std::fputs(usage, stdout);
      return false;
    }
    const FlagValue value = [&]() -> std::string {
      if (inline_value) {
        return *inline_value;
      }
      if (i + 1 >= args.size()) {
        fail(flag + " needs a value (see --help)");
      }
      return args[++i];
    };
    if (!handle(flag, value)) {
      fail("unknown argument \"" + args[i] + "\" (see --help)");
    }
  }
  return true;
}

std::string row(const std::string& label, const std::vector<std::string>& cells, int label_width, int cell_width) {
  char buffer[64];
  std::string line;
  std::snprintf(buffer, sizeof buffer, "  %-*s", label_width, label.c_str());
  line += buffer;
  for (const auto& cell : cells) {
    std::snprintf(buffer, sizeof buffer, "%*s", cell_width, cell.c_str());
    line += buffer;
  }
  return line + "\n";
}

std::string throughput_row(const std::string& label, const Throughput& t) {
  return row(label, {format("%.1f", t.kernels_per_second()), format("%.2f", t.megabytes_per_second()),
                     format("%.3f", t.seconds)});
}

std::string latency_row(const std::string& label, const Percentiles& p) {
  return row(label, {format("%.1f", p.p50), format("%.1f", p.p90), format("%.1f", p.p99), format("%.1f", p.max),
                     format("%.1f", p.mean)});
}

std::string latency_row(const std::string& label, const Latency& l) {
  return row(label, {format("%.1f", l.wall.p50), format("%.1f", l.wall.p90), format("%.1f", l.wall.p99),
                     format("%.1f", l.wall.max), format("%.1f", l.wall.mean), format("%.1f", l.cpu.p50),
                     format("%.1f", l.cpu.p99)});
}

std::string ratio_row(const std::string& label, const Latency& a, const Latency& b) {
  return row(label, {format("%.2fx", a.wall.p50 / b.wall.p50), format("%.2fx", a.wall.p90 / b.wall.p90),
                     format("%.2fx", a.wall.p99 / b.wall.p99), "", "", format("%.2fx", a.cpu.p50 / b.cpu.p50),
                     format("%.2fx", a.cpu.p99 / b.cpu.p99)});
}

// ---------------------------------------------------------------------------
// Machine

std::string file_system_of(const fs::path& path) {
  std::ifstream mounts("/proc/self/mounts");
  const std::string target = fs::weakly_canonical(path).string();
  std::string device, mount_point, type, mount_options, best = "unknown";
  std::size_t best_length = 0;
  while (mounts >> device >> mount_point >> type >> mount_options) {
    std::string rest;
    std::getline(mounts, rest);
    const bool below = target.rfind(mount_point, 0) == 0 &&
                       (mount_point == "/" || target.size() == mount_point.size() || target[mount_point.size()] == '/');
    if (below && mount_point.size() >= best_length) {
      best_length = mount_point.size();
      best = type + " (" + mount_options + ")";
    }
  }
  return best;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

json machine_json(const fs::path& work) {
  struct utsname names {};
  ::uname(&names);
  return {{"nproc", ::sysconf(_SC_NPROCESSORS_ONLN)},
          {"cpu_model", cpu_model()},
          {"kernel", std::string(names.sysname) + " " + names.release},
          {"kernel_version", names.version},
          {"arch", names.machine},
          {"work_file_system", file_system_of(work)}};
}

double load_average_1m() {
  double load[1] = {0};
  return ::getloadavg(load, 1) == 1 ? load[0] : -1;
}

// ---------------------------------------------------------------------------
// Scratch space

ScratchDirectory::~ScratchDirectory() {
  if (m_remove) {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
}

ScratchDirectory make_work_directory(const std::optional<fs::path>& requested,
                                     std::initializer_list<const char*> owned_subdirectories) {
  if (requested) {
    for (const char* name : owned_subdirectories) {
      fs::remove_all(*requested / name);
    }
    fs::create_directories(*requested);
    return ScratchDirectory(fs::absolute(*requested), false);
  }
  const char* tmpdir = std::getenv("TMPDIR");
  std::string pattern = (tmpdir && *tmpdir ? fs::path(tmpdir) : fs::path("/tmp")) / "opcache-bench-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    fail("cannot create a temp directory " + pattern + ": " + std::strerror(errno));
  }
  return ScratchDirectory(fs::path(pattern), true);
}

}  // namespace opcache::bench
