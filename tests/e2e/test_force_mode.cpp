// End-to-end tests of the modes and the debug bypass of Store::get_or_build:
// force rebuilds and replaces an entry while other processes keep reading it
// (they see the old entry or the new one, never a miss, an error or a mix),
// force builds once per Store and once across processes started together,
// and op_debug_level, op_debug_list and mode disable bypass the cache.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/opcache.hpp"
#include "base/sha256.hpp"
#include "tests/support/children.hpp"
#include "tests/support/files.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/single_flight.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::BuildSource;
using opcache::Result;
using opcache::Store;
using opcache::StoreConfig;
using namespace opcache::test;

namespace {


// Two builds of one kernel: the same descriptor and member names, different
// bytes (version 2's .o comes from another source, its .json names that .o).
struct TwoVersions {
  KernelTriple kernel;
  std::vector<fs::path> v1;
  std::vector<fs::path> v2;
  Files v1_files;
  Files v2_files;
};

TwoVersions make_two_versions(const TempDir& dir, const std::string& op = "square", int length = 256) {
  TwoVersions versions;
  versions.kernel = opcache::test::make_kernel(dir / "v1", op, length);
  versions.v1 = versions.kernel.files();
  const auto& stem = versions.kernel.stem;
  auto object = opcache::test::compile_object(
      dir / "v2", stem,
      "void " + stem + "__kernel0(const float* x, float* y) {\n  for (int i = 0; i < " + std::to_string(length) +
          "; ++i) y[i] = x[i] * x[i] * 0.5f + 2.0f;\n}\n");
  auto meta = json::parse(read_text(versions.kernel.metadata));
  meta["sha256"] = opcache::base::sha256_hex(read_text(object));
  write_text(dir / "v2" / versions.kernel.metadata.filename(), meta.dump());
  fs::copy_file(versions.kernel.info, dir / "v2" / versions.kernel.info.filename());
  versions.v2 = {object, dir / "v2" / versions.kernel.metadata.filename(), dir / "v2" / versions.kernel.info.filename()};
  versions.v1_files = read_files(versions.v1);
  versions.v2_files = read_files(versions.v2);
  REQUIRE(versions.v1_files != versions.v2_files);
  return versions;
}

// Stores version 1 through the CLI (the parent creates no opcache object
// before it forks).
void put_with_cli(const fs::path& cache, const TwoVersions& versions, const fs::path& desc) {
  write_text(desc, versions.kernel.descriptor_json);
  std::vector<std::string> args{"--cache-dir", cache.string(), "put", "--desc", desc.string(), "--scenario",
                                k_test_scenario};
  for (const auto& file : versions.v1) {
    args.push_back(file.string());
  }
  auto result = opcache::test::run_cli(args);
  REQUIRE_MESSAGE(result.exit_code == 0, result.err);
}

// A test's cache, its build counter and two versions of one kernel.
struct ForceCase {
  fs::path cache;
  fs::path counter;
  TwoVersions versions;
};

// Stores version 1 through the CLI into dir/cache (the parent creates no
// opcache object before it forks) and creates dir/results.
ForceCase two_versions_in(const TempDir& dir) { return {dir / "cache", dir / "builds.log", make_two_versions(dir)}; }

ForceCase store_version_1(const TempDir& dir) {
  ForceCase stored = two_versions_in(dir);
  put_with_cli(stored.cache, stored.versions, dir / "desc.json");
  sleep_ms(20);  // version 1 is older than every force-mode Store opened afterwards (ms clock)
  fs::create_directories(dir / "results");
  return stored;
}

// Stores version 1 into `cache` through a Store that is closed again;
// returns its key.
std::string put_version_1(const fs::path& cache, const TwoVersions& versions) {
  auto store = Store::open(config_for(cache));
  REQUIRE(store.ok());
  auto put = store->put(versions.kernel.descriptor_json, test_scenario(), versions.v1);
  REQUIRE(put.ok());
  return put->key;
}

// What a Store opened afterwards on `cache` gets for the kernel into `out`
// (REQUIREs a hit).
Files stored_entry(const fs::path& cache, const TwoVersions& versions, const fs::path& out) {
  auto store = Store::open(config_for(cache));
  REQUIRE(store.ok());
  auto key = store->key(versions.kernel.descriptor_json, test_scenario());
  REQUIRE(key.ok());
  auto got = store->get(*key, out);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  return directory_contents(out);
}

// A build function that copies `files` into the work directory and counts itself.
opcache::BuildFunction copying_build(const std::vector<fs::path>& files, const fs::path& counter,
                                     const std::string& name) {
  return [files, counter, name](const fs::path& work) -> opcache::Status {
    append_line(counter, name + " " + std::to_string(::getpid()));
    for (const auto& file : files) {
      fs::copy_file(file, work / file.filename());
    }
    return {};
  };
}

// How many gets each reader process has finished, in memory the forked
// processes share: the forcer rebuilds only once every reader has read the
// entry as it is, so that the readers read before, between and after the
// rebuilds whatever the machine's speed, not because the forcer slept.
class ReaderProgress {
 public:
  explicit ReaderProgress(int readers) : m_readers(readers) {
    void* shared = ::mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(shared != MAP_FAILED);
    m_gets = static_cast<std::atomic<int>*>(shared);
    for (int r = 0; r < m_readers; ++r) {
      new (&m_gets[r]) std::atomic<int>(0);
    }
  }
  ~ReaderProgress() { ::munmap(m_gets, bytes()); }
  ReaderProgress(const ReaderProgress&) = delete;
  ReaderProgress& operator=(const ReaderProgress&) = delete;

  /// Reader `r` has finished a get.
  void finished_get(int r) { ++m_gets[r]; }

  /// Waits until every reader has finished `count` more gets than it had
  /// when this was called: the last of them began after the call, so it read
  /// the entry as it was then. A minute only catches a reader that is stuck.
  bool wait_for_gets(int count) {
    std::vector<int> from;
    for (int r = 0; r < m_readers; ++r) {
      from.push_back(m_gets[r].load());
    }
    return poll_until(
        [&] {
          for (int r = 0; r < m_readers; ++r) {
            if (m_gets[r].load() < from[static_cast<std::size_t>(r)] + count) {
              return false;
            }
          }
          return true;
        },
        std::chrono::minutes(1));
  }

 private:
  std::size_t bytes() const { return sizeof(std::atomic<int>) * static_cast<std::size_t>(m_readers); }

  int m_readers;
  std::atomic<int>* m_gets = nullptr;
};

}  // namespace

TEST_CASE("e2e::force mode rebuilds while 4 reader processes see only the old or the new entry, never a miss") {
  hermetic_environment();
  TempDir dir;
  const auto [cache, counter, versions] = store_version_1(dir);
  const fs::path stop = dir / "stop";
  constexpr int k_readers = 4;
  constexpr int k_rounds = 5;  // builds version 2, 1, 2, 1, 2
  ReaderProgress progress(k_readers);

  ChildGuard guard;
  std::vector<pid_t> readers;
  for (int r = 0; r < k_readers; ++r) {
    readers.push_back(fork_child(guard, [&, r]() -> int {
      auto store = Store::open(config_for(cache));
      if (!store) {
        return 10;
      }
      auto key = store->key(versions.kernel.descriptor_json, test_scenario());
      if (!key) {
        return 11;
      }
      int gets = 0, v1 = 0, v2 = 0, misses = 0, errors = 0, mixed = 0;
      std::string first_problem;
      const auto give_up = Clock::now() + std::chrono::minutes(4);  // never outlive the test
      std::error_code ec;
      while (!fs::exists(stop, ec) && Clock::now() < give_up) {
        auto out = dir / "reads" / (std::to_string(r) + "-" + std::to_string(gets));
        ++gets;
        // Reader 0 compiles through get_or_build (mode enable): it must always
        // hit, never build; the others read with get.
        Result<std::optional<opcache::GetResult>> got = std::optional<opcache::GetResult>();
        if (r == 0) {
          auto built = store->get_or_build(versions.kernel.descriptor_json, test_scenario(), out,
                                           [&](const fs::path&) {
                                             return opcache::Status(opcache::Error::build_failed("reader 0 had to build"));
                                           });
          if (!built) {
            got = built.error();
          } else if (built->source == BuildSource::hit) {
            got = std::optional<opcache::GetResult>(opcache::GetResult{});
          }
        } else {
          got = store->get(*key, out);
        }
        if (!got) {
          ++errors;
          first_problem = first_problem.empty() ? got.error().message() : first_problem;
        } else if (!*got) {
          ++misses;
          first_problem = first_problem.empty() ? "miss at get " + std::to_string(gets) : first_problem;
        } else {
          auto files = directory_contents(out);
          if (files == versions.v1_files) {
            ++v1;
          } else if (files == versions.v2_files) {
            ++v2;
          } else {
            ++mixed;
            first_problem = first_problem.empty() ? "mixed files at get " + std::to_string(gets) : first_problem;
          }
        }
        fs::remove_all(out, ec);
        progress.finished_get(r);
      }
      write_text(dir / "results" / ("reader-" + std::to_string(r)),
                 std::to_string(gets) + " " + std::to_string(v1) + " " + std::to_string(v2) + " " +
                     std::to_string(misses) + " " + std::to_string(errors) + " " + std::to_string(mixed) + " " +
                     first_problem);
      return misses + errors + mixed == 0 ? 0 : 1;
    }));
  }

  pid_t forcer = fork_child(guard, [&]() -> int {
    std::string report;
    int failures = 0;
    // Every reader reads the entry as it is before, between and after the
    // rebuilds: two gets each, the second begun once the round was over.
    auto readers_read = [&](const std::string& when) {
      if (progress.wait_for_gets(2)) {
        return true;
      }
      report += "the readers did not read " + when + " within a minute\n";
      return false;
    };
    bool readers_kept_up = true;
    for (int round = 0; round < k_rounds; ++round) {
      readers_kept_up = readers_read("before round " + std::to_string(round));
      if (!readers_kept_up) {
        ++failures;
        break;
      }
      // A new force-mode Store each round: the entry stored before it opened is rebuilt.
      auto store = Store::open(config_for(cache, "force"));
      if (!store) {
        return 10;
      }
      const bool build_v2 = round % 2 == 0;
      auto out = dir / ("force-" + std::to_string(round));
      auto result = store->get_or_build(versions.kernel.descriptor_json, test_scenario(), out,
                                        copying_build(build_v2 ? versions.v2 : versions.v1, counter,
                                                      "round" + std::to_string(round)));
      if (!result) {
        report += "round " + std::to_string(round) + " error " + result.error().message() + "\n";
        ++failures;
        continue;
      }
      bool exact = directory_contents(out) == (build_v2 ? versions.v2_files : versions.v1_files);
      report += "round " + std::to_string(round) + " " + source_name(result->source) + (exact ? " exact" : " WRONG") +
                "\n";
      failures += (result->source == BuildSource::built && exact) ? 0 : 1;
      sleep_ms(2);  // the next Store opens in a later millisecond than this entry was stored
    }
    failures += readers_kept_up && !readers_read("after the last round") ? 1 : 0;
    write_text(dir / "results" / "forcer", report);
    return failures == 0 ? 0 : 1;
  });

  const auto start = Clock::now();
  int forcer_exit = guard.wait(forcer);
  write_text(stop, "stop");
  std::vector<int> reader_exits;
  for (pid_t reader : readers) {
    reader_exits.push_back(guard.wait(reader));
  }
  MESSAGE("force rounds and readers took ", std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count(),
          " ms");

  INFO("forcer: ", read_text(dir / "results" / "forcer"));
  CHECK(forcer_exit == 0);
  CHECK(count_lines(counter) == static_cast<std::size_t>(k_rounds));
  int total_v1 = 0, total_v2 = 0;
  for (int r = 0; r < k_readers; ++r) {
    auto line = read_text(dir / "results" / ("reader-" + std::to_string(r)));
    INFO("reader ", r, " (gets v1 v2 misses errors mixed first-problem): ", line);
    CHECK(reader_exits[r] == 0);
    std::istringstream fields(line);
    int gets = 0, v1 = 0, v2 = 0, misses = -1, errors = -1, mixed = -1;
    fields >> gets >> v1 >> v2 >> misses >> errors >> mixed;
    CHECK(gets > 10);
    CHECK(misses == 0);
    CHECK(errors == 0);
    CHECK(mixed == 0);
    CHECK(v1 + v2 == gets);
    total_v1 += v1;
    total_v2 += v2;
  }
  MESSAGE("readers saw version 1 ", total_v1, " times and version 2 ", total_v2, " times");
  CHECK(total_v1 > 0);
  CHECK(total_v2 > 0);

  // The entry holds the last forced version.
  CHECK(stored_entry(cache, versions, dir / "final") == versions.v2_files);
  auto store = Store::open(config_for(cache));
  REQUIRE(store.ok());
  auto report = store->verify(false);
  REQUIRE(report.ok());
  CHECK(report->entries_checked == 1);
  CHECK(report->problems.empty());
}

TEST_CASE("e2e::force mode a second get_or_build from the same Store is a hit, a new Store rebuilds") {
  hermetic_environment();
  TempDir dir;
  const auto [cache, counter, versions] = two_versions_in(dir);
  auto scenario = test_scenario();
  put_version_1(cache, versions);
  sleep_ms(20);

  auto forced = Store::open(config_for(cache, "force"));
  REQUIRE(forced.ok());
  auto first = forced->get_or_build(versions.kernel.descriptor_json, scenario, dir / "out1",
                                    copying_build(versions.v2, counter, "first"));
  REQUIRE_MESSAGE(first.ok(), (first.ok() ? "" : first.error().message()));
  CHECK(first->source == BuildSource::built);
  CHECK(directory_contents(dir / "out1") == versions.v2_files);

  auto second = forced->get_or_build(versions.kernel.descriptor_json, scenario, dir / "out2",
                                     copying_build(versions.v1, counter, "second"));
  REQUIRE(second.ok());
  CHECK(second->source == BuildSource::hit);
  CHECK(directory_contents(dir / "out2") == versions.v2_files);
  CHECK(count_lines(counter) == 1);

  // The replaced entry is what plain readers get now.
  auto plain = Store::open(config_for(cache));
  REQUIRE(plain.ok());
  auto got = plain->get(first->key, dir / "out3");
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK(directory_contents(dir / "out3") == versions.v2_files);

  // A Store opened later in force mode rebuilds again.
  sleep_ms(5);
  auto later = Store::open(config_for(cache, "force"));
  REQUIRE(later.ok());
  auto third = later->get_or_build(versions.kernel.descriptor_json, scenario, dir / "out4",
                                   copying_build(versions.v1, counter, "third"));
  REQUIRE(third.ok());
  CHECK(third->source == BuildSource::built);
  CHECK(directory_contents(dir / "out4") == versions.v1_files);
  CHECK(count_lines(counter) == 2);
}

TEST_CASE("e2e::force mode 4 processes started together build the key once") {
  hermetic_environment();
  TempDir dir;
  const auto [cache, counter, versions] = store_version_1(dir);
  const fs::path go = dir / "go";
  constexpr int k_processes = 4;

  ChildGuard guard;
  std::vector<pid_t> children;
  for (int p = 0; p < k_processes; ++p) {
    children.push_back(fork_child(guard, [&, p]() -> int {
      auto store = Store::open(config_for(cache, "force"));
      if (!store) {
        return 10;
      }
      write_text(dir / ("ready-" + std::to_string(p)), "ready");
      if (!wait_for_file(go, std::chrono::seconds(30))) {
        return 11;
      }
      auto out = dir / ("out-" + std::to_string(p));
      auto build = copying_build(versions.v2, counter, "p" + std::to_string(p));
      auto slow_build = [&](const fs::path& work) {
        sleep_ms(50);  // the others arrive while this one builds
        return build(work);
      };
      auto result = store->get_or_build(versions.kernel.descriptor_json, test_scenario(), out, slow_build);
      write_text(dir / "results" / std::to_string(p),
                 result ? source_name(result->source) : "error " + result.error().message());
      return result ? 0 : 12;
    }));
  }
  for (int p = 0; p < k_processes; ++p) {
    REQUIRE(wait_for_file(dir / ("ready-" + std::to_string(p)), std::chrono::seconds(20)));
  }
  write_text(go, "go");
  std::map<std::string, int> sources;
  for (int p = 0; p < k_processes; ++p) {
    auto code = guard.wait(children[p]);
    auto source = read_text(dir / "results" / std::to_string(p));
    INFO("process ", p, ": ", source);
    CHECK(code == 0);
    ++sources[source];
    CHECK(directory_contents(dir / ("out-" + std::to_string(p))) == versions.v2_files);
  }
  CHECK(count_lines(counter) == 1);
  CHECK(sources["built"] == 1);
  CHECK(sources["hit"] == k_processes - 1);
  CHECK(stored_entry(cache, versions, dir / "final") == versions.v2_files);
}

TEST_CASE("e2e::get_or_build with op_debug_level 1 bypasses the cache and stores nothing") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  const fs::path counter = dir / "builds.log";
  auto versions = make_two_versions(dir);
  StoreConfig config = config_for(cache);
  config.op_debug_level = 1;
  auto store = Store::open(config);
  REQUIRE(store.ok());
  for (int run = 1; run <= 2; ++run) {
    auto out = dir / ("out" + std::to_string(run));
    auto result = store->get_or_build(versions.kernel.descriptor_json, test_scenario(), out,
                                      copying_build(versions.v1, counter, "run"));
    REQUIRE_MESSAGE(result.ok(), (result.ok() ? "" : result.error().message()));
    CHECK(result->source == BuildSource::bypassed);
    CHECK(result->note.find("op_debug_level") != std::string::npos);
    CHECK(directory_contents(out) == versions.v1_files);
    CHECK(count_lines(counter) == static_cast<std::size_t>(run));
    auto present = store->contains(result->key);
    REQUIRE(present.ok());
    CHECK_FALSE(*present);
  }
  auto stats = store->stats();
  REQUIRE(stats.ok());
  CHECK(stats->totals.entries == 0);
}

TEST_CASE("e2e::get_or_build with op_debug_list bypasses the listed op types only") {
  hermetic_environment();
  TempDir dir;
  const fs::path cache = dir / "cache";
  const fs::path counter = dir / "builds.log";
  auto listed = make_two_versions(dir, "relu", 64);
  TempDir other_dir;
  auto other = make_two_versions(other_dir, "neg", 64);
  StoreConfig config = config_for(cache);
  config.op_debug_list = "MatMul,relu";
  auto store = Store::open(config);
  REQUIRE(store.ok());

  for (int run = 1; run <= 2; ++run) {
    auto result = store->get_or_build(listed.kernel.descriptor_json, test_scenario(), dir / ("l" + std::to_string(run)),
                                      copying_build(listed.v1, counter, "relu"));
    REQUIRE(result.ok());
    CHECK(result->source == BuildSource::bypassed);
    CHECK(result->note.find("relu") != std::string::npos);
    auto present = store->contains(result->key);
    REQUIRE(present.ok());
    CHECK_FALSE(*present);
  }
  for (auto expected : {BuildSource::built, BuildSource::hit}) {
    auto out = dir / (std::string("n-") + source_name(expected));
    auto result = store->get_or_build(other.kernel.descriptor_json, test_scenario(), out,
                                      copying_build(other.v1, counter, "neg"));
    REQUIRE(result.ok());
    CHECK(result->source == expected);
    CHECK(directory_contents(out) == other.v1_files);
  }
  auto per_name = builds_per_name(counter);
  CHECK(per_name["relu"] == 2);
  CHECK(per_name["neg"] == 1);
}

TEST_CASE("e2e::get_or_build with mode disable bypasses and never reads a stored entry") {
  hermetic_environment();
  TempDir dir;
  const auto [cache, counter, versions] = two_versions_in(dir);
  auto scenario = test_scenario();
  const std::string key = put_version_1(cache, versions);
  auto disabled = Store::open(config_for(cache, "disable"));
  REQUIRE(disabled.ok());
  auto before = disabled->stats();
  REQUIRE(before.ok());
  auto result = disabled->get_or_build(versions.kernel.descriptor_json, scenario, dir / "out",
                                       copying_build(versions.v2, counter, "disabled"));
  REQUIRE(result.ok());
  CHECK(result->source == BuildSource::bypassed);
  CHECK(result->key == key);
  CHECK(result->note.find("disable") != std::string::npos);
  CHECK(count_lines(counter) == 1);
  CHECK(directory_contents(dir / "out") == versions.v2_files);  // built, not the stored version 1

  // The stored entry is untouched and was not even read (no hit counted).
  auto after = disabled->stats();
  REQUIRE(after.ok());
  CHECK(after->counters["hits"] == before->counters["hits"]);
  auto got = disabled->get(key, dir / "stored");
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK(directory_contents(dir / "stored") == versions.v1_files);
}
