// bench_store — throughput and latency of the local store on real kernels.
//
// Measures, for a corpus of real compiled kernel triples (.o from `cc -c -O2`,
// MindSpore-style .json and .info):
//   * put throughput into a fresh store,
//   * get throughput (a first pass with the objects evicted from the page
//     cache, then a second, warm pass),
//   * in-process hit latency of Store::get against a plain copy of the same
//     three files, measured the same way in the same run,
//   * store::Index lookup latency with 100,000 entries (present and absent keys),
//   * the hit of the transparent path, Store::get_or_build, on one stored
//     two-file kernel (.o and .json): the C++ side of the Python binding's
//     figure in bench/run (--get-or-build-only measures nothing else).
// Prints a table and, with --json FILE, writes every figure as JSON.
// See bench/README.md for how to read the numbers. The corpus generator and
// the helpers shared with the other benchmarks are in bench/support/.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/opcache.hpp"
#include "opcache/version.hpp"
#include "store/bundle_reader.hpp"
#include "store/index.hpp"
#include "base/byte_stream.hpp"
#include "base/file_io.hpp"
#include "base/sha256.hpp"
#include "support/bench_util.hpp"
#include "support/corpus.hpp"

namespace {

using namespace opcache::bench;

constexpr const char* k_scenario = k_corpus_scenario;
constexpr std::size_t k_index_batch_rows = 25000;
constexpr std::uint64_t k_seed = 20261122;

// ---------------------------------------------------------------------------
// Options

struct Options {
  std::size_t kernels = 1000;
  std::size_t hits = 5000;
  std::size_t index_entries = 100000;
  fs::path corpus = "bench-corpus";
  std::optional<fs::path> work;
  std::optional<fs::path> json_file;
  bool get_or_build_only = false;
};

constexpr const char* k_usage = R"(usage: bench_store [options]

Benchmarks the opcache local store on a corpus of real compiled kernels.

  --kernels N          kernels in the corpus (default 1000)
  --hits M             random hits timed for latency, and index lookups
                       timed per kind (default 5000)
  --index-entries E    rows in the index for the lookup benchmark (default 100000)
  --corpus DIR         where the generated corpus is cached and reused
                       (default ./bench-corpus)
  --work DIR           scratch directory for the store and outputs; kept at
                       the end (default: a fresh temp dir, removed at the end)
  --json FILE          also write every figure as JSON to FILE
  --get-or-build-only  measure only the get_or_build hit (M hits of the corpus's
                       first kernel); with --work, its store stays in
                       DIR/get-or-build/store for another process to hit
  --help               this text
)";

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  const bool run = parse_flags(argc, argv, k_usage, [&options](const std::string& flag, const FlagValue& value) {
    if (flag == "--kernels") {
      options.kernels = parse_count(flag, value(), 1);
    } else if (flag == "--hits") {
      options.hits = parse_count(flag, value(), 1);
    } else if (flag == "--index-entries") {
      options.index_entries = parse_count(flag, value(), 1);
    } else if (flag == "--corpus") {
      options.corpus = value();
    } else if (flag == "--work") {
      options.work = fs::path(value());
    } else if (flag == "--json") {
      options.json_file = fs::path(value());
    } else if (flag == "--get-or-build-only") {
      options.get_or_build_only = true;
    } else {
      return false;
    }
    return true;
  });
  if (!run) {
    return std::nullopt;
  }
  return options;
}

// ---------------------------------------------------------------------------
// Plain copy baseline: open/read/write with POSIX calls, no verification.

// Copies one file; `hash`, when given, also receives every byte.
void plain_copy(const fs::path& from, const fs::path& to, opcache::base::Sha256* hash = nullptr) {
  Fd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) {
    fail("cannot open " + from.string() + ": " + std::strerror(errno));
  }
  Fd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.get() < 0) {
    fail("cannot create " + to.string() + ": " + std::strerror(errno));
  }
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(in.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      fail("cannot read " + from.string() + ": " + std::strerror(errno));
    }
    if (n == 0) {
      break;
    }
    if (hash != nullptr) {
      hash->update(buffer, static_cast<std::size_t>(n));
    }
    for (ssize_t written = 0; written < n;) {
      ssize_t w = ::write(out.get(), buffer + written, static_cast<std::size_t>(n - written));
      if (w < 0 && errno != EINTR) {
        fail("cannot write " + to.string() + ": " + std::strerror(errno));
      }
      written += std::max<ssize_t>(w, 0);
    }
  }
}

// ---------------------------------------------------------------------------
// The benchmarks

struct StoreResults {
  Throughput put, get_cold, get_warm, get_replace;
  std::uint64_t bundle_bytes = 0;
  Latency hit_get, hit_copy, hit_copy_hash;  // into an output directory without the files
  Latency hit_publish;                       // the copy through temp files renamed into place
  Latency hit_verify;                        // the object read and decoded as get does, into no files
  Latency replace_get, replace_copy;         // over the same files written earlier
};

// Every file `get` wrote must equal the corpus file, byte for byte.
void check_outputs(const std::vector<Kernel>& kernels, const fs::path& out_dir) {
  for (const auto& kernel : kernels) {
    for (const auto& file : kernel.files) {
      if (read_bytes(out_dir / file.filename()) != read_bytes(file)) {
        fail("get wrote a different " + (out_dir / file.filename()).string() + " than " + file.string());
      }
    }
  }
}

Throughput get_all(opcache::Store& store, const std::vector<Kernel>& kernels, const std::vector<std::string>& keys,
                   const fs::path& out_dir, std::uint64_t raw_bytes) {
  const auto start = SteadyClock::now();
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    auto hit = must(store.get(keys[i], out_dir), "get " + kernels[i].stem);
    if (!hit) {
      fail("get " + kernels[i].stem + " missed right after it was stored");
    }
  }
  return {kernels.size(), raw_bytes, seconds_since(start)};
}

// Flushes the files of every kernel in `directory` to disk, so that later
// writes over them meet files that are on disk, as a previous run's would be.
void sync_outputs(const std::vector<Kernel>& kernels, const fs::path& directory) {
  for (const auto& kernel : kernels) {
    for (const auto& file : kernel.files) {
      Fd fd(::open((directory / file.filename()).c_str(), O_RDONLY | O_CLOEXEC));
      if (fd.get() >= 0) {
        ::fdatasync(fd.get());
      }
    }
  }
}

void remove_outputs(const Kernel& kernel, const fs::path& directory) {
  for (const auto& file : kernel.files) {
    ::unlink((directory / file.filename()).c_str());
  }
}

// The hit path and its baseline, each timed around one kernel's three files.
class HitTimer {
 public:
  HitTimer(opcache::Store& store, const std::vector<Kernel>& kernels, const std::vector<std::string>& keys,
           const std::vector<fs::path>& objects)
      : m_store(store), m_kernels(kernels), m_keys(keys), m_objects(objects) {}

  Sample get(std::size_t which, const fs::path& out_dir) {
    std::optional<opcache::Result<std::optional<opcache::GetResult>>> hit;
    Sample sample = time_once([&] { hit.emplace(m_store.get(m_keys[which], out_dir)); });
    if (!*hit || !**hit) {
      fail("hit on " + m_kernels[which].stem + " failed: " + (*hit ? std::string("miss") : hit->error().message()));
    }
    return sample;
  }

  Sample copy(std::size_t which, const fs::path& out_dir) {
    return time_once([&] {
      for (const auto& file : m_kernels[which].files) {
        plain_copy(file, out_dir / file.filename());
      }
    });
  }

  // The floor of a hit that publishes its files atomically, as get does (a
  // reader of out_dir never sees half a file): each file copied to a hidden
  // temp file, then every temp file renamed to its name.
  Sample publish(std::size_t which, const fs::path& out_dir) {
    const auto temp_of = [&](const fs::path& file) { return out_dir / ("." + file.filename().string() + ".tmp"); };
    return time_once([&] {
      const auto& files = m_kernels[which].files;
      for (const auto& file : files) {
        plain_copy(file, temp_of(file));
      }
      for (const auto& file : files) {
        const auto target = out_dir / file.filename();
        if (::rename(temp_of(file).c_str(), target.c_str()) != 0) {
          fail("cannot rename into " + target.string() + ": " + std::strerror(errno));
        }
      }
    });
  }

  // What a hit does besides writing its files, read as get reads it (its
  // object whole, the manifest scanned, the members decoded, the object's
  // digest compared) into a sink that keeps nothing. With the publish floor,
  // the two halves of a hit, measured apart.
  Sample verify(std::size_t which) {
    opcache::Status decoded;
    Sample sample = time_once([&] {
      auto bytes = opcache::base::read_file(m_objects[which]);
      if (!bytes) {
        decoded = opcache::Status(bytes.error());
        return;
      }
      opcache::base::MemorySource source(*bytes);
      opcache::store::BundleReader reader(source, {}, opcache::store::KeyCheck::trust_digest,
                                          opcache::store::ReadFor::local_hit);
      opcache::store::DiscardingSink sink;
      auto manifest = reader.read_manifest();
      decoded = manifest ? reader.read_members(sink) : opcache::Status(manifest.error());
      if (decoded && reader.finish_digest() != m_objects[which].filename().string()) {
        decoded = opcache::Error::corrupt("digest differs");
      }
    });
    if (!decoded) {
      fail("decoding " + m_objects[which].string() + " as a hit does: " + decoded.error().message());
    }
    return sample;
  }

  Sample copy_and_hash(std::size_t which, const fs::path& out_dir) {
    return time_once([&] {
      for (const auto& file : m_kernels[which].files) {
        opcache::base::Sha256 hash;
        plain_copy(file, out_dir / file.filename(), &hash);
        (void)hash.finish();
      }
    });
  }

 private:
  opcache::Store& m_store;
  const std::vector<Kernel>& m_kernels;
  const std::vector<std::string>& m_keys;
  const std::vector<fs::path>& m_objects;
};

StoreResults run_store_benchmarks(const Corpus& corpus, const opcache::Scenario& scenario, const fs::path& work,
                                  std::size_t hit_count) {
  StoreResults results;
  const auto& kernels = corpus.kernels;
  opcache::StoreConfig config;
  config.cache_dir = work / "store";
  config.volatile_fields = std::string();  // the built-in list, whatever the environment says
  auto store = must(opcache::Store::open(config), "open store in " + config.cache_dir.string());

  // Put: every kernel is new, so every put must store.
  progress("put: " + std::to_string(kernels.size()) + " kernels into a fresh store in " + config.cache_dir.string());
  std::vector<std::string> keys;
  keys.reserve(kernels.size());
  auto start = SteadyClock::now();
  for (const auto& kernel : kernels) {
    opcache::PutOptions put_options;
    put_options.build_ms = kernel.build_ms;
    auto put = must(store.put(kernel.descriptor_json, scenario, kernel.file_list(), put_options), "put " + kernel.stem);
    if (!put.stored) {
      fail("put " + kernel.stem + " found its key already stored: two corpus kernels share a key");
    }
    results.bundle_bytes += static_cast<std::uint64_t>(put.bundle_bytes);
    keys.push_back(put.key);
  }
  results.put = {kernels.size(), corpus.raw_bytes, seconds_since(start)};

  // Get, three passes: (1) objects evicted from the page cache, into a new
  // directory; (2) warm, into another new directory; (3) warm, over the files
  // of pass 2 once they are on disk.
  std::vector<fs::path> objects;
  for (const auto& key : keys) {
    auto entry = must(store.lookup(key), "lookup " + key);
    objects.push_back(config.cache_dir / "objects" / entry->digest.substr(0, 2) / entry->digest);
    evict_from_page_cache(objects.back());
  }
  progress("get: pass 1 (objects evicted from the page cache, new files) into " + (work / "get-1").string());
  results.get_cold = get_all(store, kernels, keys, work / "get-1", corpus.raw_bytes);
  check_outputs(kernels, work / "get-1");
  progress("get: pass 2 (warm, new files) into " + (work / "get-2").string());
  results.get_warm = get_all(store, kernels, keys, work / "get-2", corpus.raw_bytes);
  check_outputs(kernels, work / "get-2");
  sync_outputs(kernels, work / "get-2");
  progress("get: pass 3 (warm, replacing the files of pass 2)");
  results.get_replace = get_all(store, kernels, keys, work / "get-2", corpus.raw_bytes);
  check_outputs(kernels, work / "get-2");

  // Hit latency: the same random kernel fetched by get and by a plain copy of
  // its three files, back to back and in alternating order so that drift and
  // noise on the machine land on both alike; after a short unmeasured warm-up.
  // Outputs are removed (untimed) after each fetch, so every fetch writes new
  // files, as into a fresh kernel_meta directory.
  HitTimer timer(store, kernels, keys, objects);
  const fs::path get_dir = work / "hit-get";
  const fs::path copy_dir = work / "hit-copy";
  const fs::path copy_hash_dir = work / "hit-copy-sha256";
  const fs::path publish_dir = work / "hit-copy-publish";
  fs::create_directories(get_dir);
  fs::create_directories(publish_dir);
  fs::create_directories(copy_dir);
  fs::create_directories(copy_hash_dir);
  std::mt19937_64 random(k_seed);
  std::uniform_int_distribution<std::size_t> pick(0, kernels.size() - 1);
  const std::size_t warmup = std::min<std::size_t>(100, hit_count);
  progress("hit latency: " + std::to_string(hit_count) + " random hits (+" + std::to_string(warmup) +
           " warm-up), get vs plain copy, new files");
  std::vector<Sample> get_samples, copy_samples, copy_hash_samples, publish_samples, verify_samples;
  for (std::size_t i = 0; i < warmup + hit_count; ++i) {
    const std::size_t which = pick(random);
    Sample g, c, h, a, v;
    if (i % 2 == 0) {
      g = timer.get(which, get_dir);
      c = timer.copy(which, copy_dir);
      h = timer.copy_and_hash(which, copy_hash_dir);
      a = timer.publish(which, publish_dir);
      v = timer.verify(which);
    } else {
      v = timer.verify(which);
      a = timer.publish(which, publish_dir);
      h = timer.copy_and_hash(which, copy_hash_dir);
      c = timer.copy(which, copy_dir);
      g = timer.get(which, get_dir);
    }
    for (const auto& dir : {get_dir, copy_dir, copy_hash_dir, publish_dir}) {
      remove_outputs(kernels[which], dir);
    }
    if (i >= warmup) {
      get_samples.push_back(g);
      copy_samples.push_back(c);
      copy_hash_samples.push_back(h);
      publish_samples.push_back(a);
      verify_samples.push_back(v);
      if ((i - warmup + 1) % 1000 == 0) {
        progress("  " + std::to_string(i - warmup + 1) + "/" + std::to_string(hit_count) + " hits");
      }
    }
  }
  results.hit_get = summarize(get_samples);
  results.hit_copy = summarize(copy_samples);
  results.hit_copy_hash = summarize(copy_hash_samples);
  results.hit_publish = summarize(publish_samples);
  results.hit_verify = summarize(verify_samples);

  // The same over existing files (a second fetch into the same directory):
  // every kernel's files are written first and flushed, untimed.
  const std::size_t replace_count = std::min<std::size_t>(1000, hit_count);
  progress("hit latency: " + std::to_string(replace_count) + " random hits replacing existing files");
  const fs::path copy_replace_dir = work / "hit-copy-replace";
  fs::create_directories(copy_replace_dir);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    for (const auto& file : kernels[i].files) {
      plain_copy(file, copy_replace_dir / file.filename());
    }
  }
  sync_outputs(kernels, copy_replace_dir);
  sync_outputs(kernels, work / "get-2");
  get_samples.clear();
  copy_samples.clear();
  for (std::size_t i = 0; i < replace_count; ++i) {
    const std::size_t which = pick(random);
    if (i % 2 == 0) {
      get_samples.push_back(timer.get(which, work / "get-2"));
      copy_samples.push_back(timer.copy(which, copy_replace_dir));
    } else {
      copy_samples.push_back(timer.copy(which, copy_replace_dir));
      get_samples.push_back(timer.get(which, work / "get-2"));
    }
  }
  results.replace_get = summarize(get_samples);
  results.replace_copy = summarize(copy_samples);
  return results;
}

// ---------------------------------------------------------------------------
// get_or_build hit: the transparent path on one stored kernel.

// The figure's kernel and where it was measured. The store stays in
// `store_dir` (with --work) so that another process, the Python binding's
// bench (bench/lib/python_hit.py), hits the same entry.
struct GetOrBuildResults {
  const Kernel* kernel = nullptr;
  std::vector<fs::path> sources;  // the corpus files the build copies: the .o and the .json
  std::string key;
  fs::path store_dir;
  fs::path out_dir;
  std::size_t warmup = 0;
  Latency hit;
};

// Each output of a get_or_build call must be the corpus file of the same name.
void check_get_or_build_outputs(const GetOrBuildResults& results, const opcache::BuildResult& outcome) {
  if (outcome.files.size() != results.sources.size()) {
    fail("get_or_build " + results.kernel->stem + " returned " + std::to_string(outcome.files.size()) +
         " files; the kernel has " + std::to_string(results.sources.size()));
  }
  for (const auto& source : results.sources) {
    if (read_bytes(results.out_dir / source.filename()) != read_bytes(source)) {
      fail("get_or_build wrote a different " + (results.out_dir / source.filename()).string() + " than " +
           source.string());
    }
  }
}

// Stores `kernel`'s .o and .json with a first get_or_build call (a miss: the
// build copies them from the corpus) into a fresh store in `directory`/store,
// then times `hit_count` calls (after an unmeasured warm-up) of the same
// get_or_build, all into the same out_dir, `directory`/out, whose kernel files
// are removed (untimed) after every call, so that each hit writes new files.
// Fails when a timed call is not a hit, runs the build function, or writes
// other bytes than the corpus's.
GetOrBuildResults run_get_or_build_hits(const Kernel& kernel, const opcache::Scenario& scenario,
                                        const fs::path& directory, std::size_t hit_count) {
  GetOrBuildResults results;
  results.kernel = &kernel;
  results.sources = {kernel.files[0], kernel.files[1]};
  results.store_dir = directory / "store";
  results.out_dir = directory / "out";
  opcache::StoreConfig config;
  config.cache_dir = results.store_dir;
  config.volatile_fields = std::string();  // the built-in list, whatever the environment says
  auto store = must(opcache::Store::open(config), "open store in " + config.cache_dir.string());

  std::size_t builds = 0;
  const opcache::BuildFunction build = [&](const fs::path& work_dir) -> opcache::Status {
    ++builds;
    for (const auto& source : results.sources) {
      plain_copy(source, work_dir / source.filename());
    }
    return {};
  };
  auto remove_kernel_files = [&] {
    for (const auto& source : results.sources) {
      ::unlink((results.out_dir / source.filename()).c_str());
    }
  };
  const std::string what = "get_or_build " + kernel.stem;
  auto first = must(store.get_or_build(kernel.descriptor_json, scenario, results.out_dir, build), what);
  if (first.source != opcache::BuildSource::built || builds != 1) {
    fail(what + " in a fresh store " + results.store_dir.string() + " did not build the kernel once");
  }
  check_get_or_build_outputs(results, first);
  remove_kernel_files();
  results.key = first.key;

  results.warmup = std::min<std::size_t>(100, hit_count);
  progress("get_or_build hit: " + std::to_string(hit_count) + " hits (+" + std::to_string(results.warmup) +
           " warm-up) of " + kernel.stem + " (.o and .json) into " + results.out_dir.string() + ", new files");
  std::vector<Sample> samples;
  samples.reserve(hit_count);
  for (std::size_t i = 0; i < results.warmup + hit_count; ++i) {
    std::optional<opcache::Result<opcache::BuildResult>> outcome;
    const Sample sample = time_once(
        [&] { outcome.emplace(store.get_or_build(kernel.descriptor_json, scenario, results.out_dir, build)); });
    const auto hit = must(std::move(*outcome), what);
    if (hit.source != opcache::BuildSource::hit || builds != 1) {
      fail(what + " call " + std::to_string(i + 1) + " was not a hit (or ran the build function)");
    }
    if (i == 0 || i + 1 == results.warmup + hit_count) {
      check_get_or_build_outputs(results, hit);
    }
    remove_kernel_files();
    if (i >= results.warmup) {
      samples.push_back(sample);
    }
  }
  results.hit = summarize(samples);
  return results;
}

// The figure as JSON: what was measured, where, and the percentiles; the
// flat `p50_us`/`p99_us` are the wall-clock ones.
json get_or_build_json(const GetOrBuildResults& results) {
  json sources = json::array();
  std::uint64_t raw_bytes = 0;
  for (const auto& source : results.sources) {
    sources.push_back(source.string());
    raw_bytes += fs::file_size(source);
  }
  json figure = results.hit.to_json();
  figure.update({{"what", "Store::get_or_build hits of one stored kernel (.o and .json), in one process, all into "
                          "out_dir, whose kernel files are removed (untimed) after every call"},
                 {"kernel", results.kernel->stem},
                 {"descriptor_json", results.kernel->descriptor_json},
                 {"scenario", k_scenario},
                 {"key", results.key},
                 {"sources", std::move(sources)},
                 {"raw_bytes", raw_bytes},
                 {"store_dir", results.store_dir.string()},
                 {"out_dir", results.out_dir.string()},
                 {"hits", results.hit.wall.samples},
                 {"warmup", results.warmup},
                 {"builds_during_hits", 0},
                 {"p50_us", results.hit.wall.p50},
                 {"p99_us", results.hit.wall.p99}});
  return figure;
}

// The table's lines for the figure.
std::string render_get_or_build(const GetOrBuildResults& results) {
  std::ostringstream out;
  out << row("get_or_build hit, us: new files", {"p50", "p90", "p99", "max", "mean", "cpu p50", "cpu p99"});
  out << latency_row("Store::get_or_build (" + std::to_string(results.hit.wall.samples) + " hits)", results.hit);
  out << "  (" << results.kernel->stem << ": .o and .json; store " << results.store_dir.string() << ")\n";
  return out.str();
}

struct IndexResults {
  std::size_t entries = 0;
  double build_seconds = 0;
  std::uint64_t db_bytes = 0;   // index.db
  std::uint64_t wal_bytes = 0;  // index.db-wal, as left by the build
  Percentiles present, absent;
};

// store::Index with `entries` synthetic rows (keys are SHA-256 like real
// keys), then `lookups` random lookups of present keys and as many of absent
// keys, on a freshly opened connection.
IndexResults run_index_benchmark(const fs::path& directory, std::size_t entries, std::size_t lookups,
                                 const std::string& scenario_json) {
  using opcache::store::Index;
  using opcache::base::sha256_hex;
  IndexResults results;
  results.entries = entries;
  fs::create_directories(directory);
  const fs::path path = directory / "index.db";
  std::vector<std::string> keys(entries);
  for (std::size_t i = 0; i < entries; ++i) {
    keys[i] = opcache::base::sha256_hex("bench-index-key-" + std::to_string(i));
  }

  progress("index: inserting " + std::to_string(entries) + " rows into " + path.string());
  {
    auto index = must(Index::open(path, 60000), "open index " + path.string());
    std::mt19937_64 random(k_seed + 1);
    const std::int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const auto start = SteadyClock::now();
    for (std::size_t batch = 0; batch < entries; batch += k_index_batch_rows) {
      auto transaction = must(index.begin(), "begin");
      for (std::size_t i = batch; i < std::min(entries, batch + k_index_batch_rows); ++i) {
        opcache::Entry entry = corpus_shaped_entry(
            i, keys[i], opcache::base::sha256_hex("bench-index-object-" + std::to_string(i)), scenario_json);
        entry.raw_size = static_cast<std::int64_t>(4000 + random() % 60000);
        entry.bundle_size = entry.raw_size / 3;
        entry.created_ms = now_ms - static_cast<std::int64_t>(random() % 86400000);
        entry.last_access_ms = entry.created_ms;
        entry.build_ms = static_cast<std::int64_t>(200 + random() % 5000);
        must(index.upsert(entry), "upsert");
      }
      must(transaction.commit(), "commit");
      progress("  " + std::to_string(std::min(entries, batch + k_index_batch_rows)) + "/" + std::to_string(entries) +
               " rows");
    }
    results.build_seconds = seconds_since(start);
  }
  std::error_code ec;
  results.db_bytes = fs::file_size(path, ec);
  results.wal_bytes = fs::file_size(path.string() + "-wal", ec);
  results.wal_bytes = ec ? 0 : results.wal_bytes;

  // A fresh connection, as a new process would have; an unmeasured warm-up.
  auto index = must(Index::open(path, 60000), "reopen index " + path.string());
  std::mt19937_64 random(k_seed + 2);
  std::uniform_int_distribution<std::size_t> pick(0, entries - 1);
  const std::size_t warmup = std::min<std::size_t>(1000, lookups);
  for (std::size_t i = 0; i < warmup; ++i) {
    (void)must(index.lookup(keys[pick(random)]), "lookup");
  }
  progress("index: " + std::to_string(lookups) + " lookups of present keys, " + std::to_string(lookups) +
           " of absent keys");
  std::vector<double> present_us, absent_us;
  present_us.reserve(lookups);
  absent_us.reserve(lookups);
  for (std::size_t i = 0; i < lookups; ++i) {
    const std::string& key = keys[pick(random)];
    auto t0 = SteadyClock::now();
    auto found = must(index.lookup(key), "lookup");
    auto t1 = SteadyClock::now();
    if (!found || found->key != key) {
      fail("index lookup of a present key " + key + " found nothing");
    }
    present_us.push_back(micros_between(t0, t1));

    const std::string absent = opcache::base::sha256_hex("bench-index-absent-" + std::to_string(i));
    t0 = SteadyClock::now();
    auto missing = must(index.lookup(absent), "lookup");
    t1 = SteadyClock::now();
    if (missing) {
      fail("index lookup of an absent key " + absent + " found a row");
    }
    absent_us.push_back(micros_between(t0, t1));
  }
  results.present = percentiles(std::move(present_us));
  results.absent = percentiles(std::move(absent_us));
  return results;
}

// ---------------------------------------------------------------------------
// Report

// The table's first lines: the program, the date, the machine and the load.
std::string render_header(const json& report) {
  std::ostringstream out;
  const auto& machine = report["machine"];
  out << "opcache " << opcache::k_version_string << " store benchmark, " << report["date"].get<std::string>() << "\n"
      << "machine: " << machine["nproc"].get<long>() << " CPUs (" << machine["cpu_model"].get<std::string>() << "), "
      << machine["kernel"].get<std::string>() << " " << machine["arch"].get<std::string>() << "; work dir on "
      << machine["work_file_system"].get<std::string>() << "\n"
      << "load average (1 min): " << format("%.2f", report["load_average_1m"]["start"].get<double>())
      << " at the start, " << format("%.2f", report["load_average_1m"]["end"].get<double>()) << " at the end\n";
  return out.str();
}

std::string render_table(const json& report, const Corpus& corpus, const StoreResults& store,
                         const IndexResults& index, const GetOrBuildResults& get_or_build) {
  std::ostringstream out;
  out << render_header(report);
  const auto& kernel_report = report["corpus"];
  out << "corpus: " << corpus.kernels.size() << " real kernels (" << k_corpus_op_types << " op types x "
      << k_corpus_dtypes << " dtypes x shapes), " << 3 * corpus.kernels.size() << " files, "
      << format("%.2f", static_cast<double>(corpus.raw_bytes) / 1e6) << " MB raw; mean .o "
      << format("%.0f", kernel_report["mean_object_bytes"].get<double>()) << " B, .json "
      << format("%.0f", kernel_report["mean_metadata_bytes"].get<double>()) << " B, .info "
      << format("%.0f", kernel_report["mean_info_bytes"].get<double>()) << " B\n";
  if (corpus.generated == corpus.kernels.size()) {
    out << "        generated now in " << format("%.1f", corpus.generation_seconds) << " s (cc -c -O2, "
        << k_compile_parallelism << " at a time)\n";
  } else if (corpus.generated > 0) {
    out << "        " << corpus.generated << " generated now in " << format("%.1f", corpus.generation_seconds)
        << " s, the rest reused from " << kernel_report["directory"].get<std::string>() << "\n";
  } else {
    out << "        reused from " << kernel_report["directory"].get<std::string>() << " (generation took "
        << format("%.1f", corpus.original_generation_seconds) << " s when it was made)\n";
  }
  out << "store: " << format("%.2f", static_cast<double>(store.bundle_bytes) / 1e6) << " MB of bundles ("
      << format("%.2f", static_cast<double>(corpus.raw_bytes) / static_cast<double>(store.bundle_bytes))
      << "x compression); MB = 10^6 bytes of raw kernel files\n\n";

  out << row("Throughput", {"kernels/s", "MB/s", "seconds"});
  out << throughput_row("put (fresh store)", store.put);
  out << throughput_row("get 1: cold objects, new files", store.get_cold);
  out << throughput_row("get 2: warm, new files", store.get_warm);
  out << throughput_row("get 3: warm, replacing files", store.get_replace);
  out << "\n";

  out << row("Hit latency, us: new files", {"p50", "p90", "p99", "max", "mean", "cpu p50", "cpu p99"});
  out << latency_row("opcache get (" + std::to_string(store.hit_get.wall.samples) + " hits)", store.hit_get);
  out << latency_row("plain copy of the 3 files", store.hit_copy);
  out << ratio_row("ratio get / plain copy", store.hit_get, store.hit_copy);
  out << latency_row("(reference) copy + SHA-256", store.hit_copy_hash);
  out << latency_row("(floor) copy to temp files + rename", store.hit_publish);
  out << ratio_row("ratio floor / plain copy", store.hit_publish, store.hit_copy);
  out << latency_row("(bound) object read + decoded as get does", store.hit_verify);
  out << "\n";
  out << row("Hit latency, us: replacing files", {"p50", "p90", "p99", "max", "mean", "cpu p50", "cpu p99"});
  out << latency_row("opcache get (" + std::to_string(store.replace_get.wall.samples) + " hits)", store.replace_get);
  out << latency_row("plain copy (O_TRUNC) of the 3 files", store.replace_copy);
  out << ratio_row("ratio get / plain copy", store.replace_get, store.replace_copy);
  out << "\n";

  out << row("Index lookup, us (" + std::to_string(index.entries) + " entries)", {"p50", "p90", "p99", "max", "mean"});
  out << latency_row("present key (" + std::to_string(index.present.samples) + " lookups)", index.present);
  out << latency_row("absent key (" + std::to_string(index.absent.samples) + " lookups)", index.absent);
  out << "  (index built in " << format("%.2f", index.build_seconds) << " s, "
      << format("%.0f", static_cast<double>(index.entries) / index.build_seconds) << " rows/s, "
      << "index.db " << format("%.1f", static_cast<double>(index.db_bytes) / 1e6) << " MB, WAL "
      << format("%.1f", static_cast<double>(index.wal_bytes) / 1e6) << " MB)\n\n";
  out << render_get_or_build(get_or_build);
  return out.str();
}

// The fields of every JSON report: the program, the date, the machine, the load and the options.
json report_header(const Options& options, const std::string& date, double load_at_start, const fs::path& work) {
  return {{"benchmark", "store"},
          {"opcache_version", opcache::k_version_string},
          {"date", date},
          {"machine", machine_json(work)},
          {"load_average_1m", {{"start", load_at_start}, {"end", load_average_1m()}}},
          {"options",
           {{"kernels", options.kernels},
            {"hits", options.hits},
            {"index_entries", options.index_entries},
            {"get_or_build_only", options.get_or_build_only},
            {"work_directory", work.string()},
            {"work_directory_kept", options.work.has_value()}}}};
}

json corpus_json(const Corpus& corpus, const fs::path& corpus_dir, const std::string& scenario_json) {
  std::uint64_t object_bytes = 0, metadata_bytes = 0, info_bytes = 0;
  for (const auto& kernel : corpus.kernels) {
    object_bytes += kernel.sizes[0];
    metadata_bytes += kernel.sizes[1];
    info_bytes += kernel.sizes[2];
  }
  const double n = static_cast<double>(corpus.kernels.size());
  return {{"directory", corpus_dir.string()},
          {"kernels", corpus.kernels.size()},
          {"files", 3 * corpus.kernels.size()},
          {"raw_bytes", corpus.raw_bytes},
          {"mean_object_bytes", static_cast<double>(object_bytes) / n},
          {"mean_metadata_bytes", static_cast<double>(metadata_bytes) / n},
          {"mean_info_bytes", static_cast<double>(info_bytes) / n},
          {"op_types", k_corpus_op_types},
          {"generated_now", corpus.generated},
          {"generation_seconds", corpus.generation_seconds},
          {"recorded_generation_seconds", corpus.original_generation_seconds},
          {"compile_parallelism", k_compile_parallelism},
          {"scenario", json::parse(scenario_json)}};
}

json store_json(const StoreResults& store) {
  return {{"bundle_bytes", store.bundle_bytes},
          {"put", store.put.to_json()},
          {"get_cold_new_files", store.get_cold.to_json()},
          {"get_warm_new_files", store.get_warm.to_json()},
          {"get_warm_replacing_files", store.get_replace.to_json()},
          // The in-process hit against a plain copy, flat, for bench/run.
          {"hit_p50_us", store.hit_get.wall.p50},
          {"copy_p50_us", store.hit_copy.wall.p50},
          {"hit_p99_us", store.hit_get.wall.p99},
          {"copy_p99_us", store.hit_copy.wall.p99},
          {"hit_latency_new_files",
           {{"get", store.hit_get.to_json()},
            {"plain_copy", store.hit_copy.to_json()},
            {"plain_copy_sha256", store.hit_copy_hash.to_json()},
            {"plain_copy_publish", store.hit_publish.to_json()},
            {"object_verified_in_memory", store.hit_verify.to_json()},
            {"ratio_p50", store.hit_get.wall.p50 / store.hit_copy.wall.p50},
            {"ratio_p99", store.hit_get.wall.p99 / store.hit_copy.wall.p99}}},
          {"hit_latency_replacing_files",
           {{"get", store.replace_get.to_json()},
            {"plain_copy", store.replace_copy.to_json()},
            {"ratio_p50", store.replace_get.wall.p50 / store.replace_copy.wall.p50},
            {"ratio_p99", store.replace_get.wall.p99 / store.replace_copy.wall.p99}}}};
}

json index_json(const IndexResults& index) {
  return {{"entries", index.entries},
          {"build_seconds", index.build_seconds},
          {"db_bytes", index.db_bytes},
          {"wal_bytes", index.wal_bytes},
          {"lookup_present", index.present.to_json()},
          {"lookup_absent", index.absent.to_json()}};
}

// Prints the table and, with --json, writes the report.
void publish(const Options& options, const json& report, const std::string& table) {
  std::fputs(("\n" + table).c_str(), stdout);
  std::fflush(stdout);
  if (options.json_file) {
    if (options.json_file->has_parent_path()) {
      fs::create_directories(options.json_file->parent_path());
    }
    write_bytes_atomic(*options.json_file, report.dump(2) + "\n");
    progress("wrote " + options.json_file->string());
  }
}

int run(const Options& options) {
  const std::string date = utc_now_rfc3339();
  const double load_at_start = load_average_1m();
  auto scenario = must(opcache::parse_scenario(k_scenario), "scenario");
  const std::string scenario_json = opcache::scenario_canonical_json(scenario);

  // --get-or-build-only needs the first kernel alone.
  const fs::path corpus_dir = fs::absolute(options.corpus);
  Corpus corpus = load_or_generate_corpus(corpus_dir, options.get_or_build_only ? 1 : options.kernels, scenario_json);
  if (corpus.generated == 0) {
    progress("corpus: reused " + std::to_string(corpus.kernels.size()) + " kernels from " + corpus_dir.string() +
             " (generation took " + format("%.1f", corpus.original_generation_seconds) + " s when it was made)");
  } else {
    progress("corpus: generated " + std::to_string(corpus.generated) + " kernels in " +
             format("%.1f", corpus.generation_seconds) + " s");
  }
  if (options.kernels < 1000 && !options.get_or_build_only) {
    progress("note: fewer than 1,000 kernels; the issue's requirement asks for at least 1,000");
  }

  // With --work, only the subdirectories this program creates are cleared,
  // so a rerun with the same --work starts from a fresh store.
  ScratchDirectory work =
      make_work_directory(options.work, {"store", "get-1", "get-2", "hit-get", "hit-copy", "hit-copy-sha256",
                                         "hit-copy-replace", "index", "get-or-build"});
  progress("work directory: " + work.path().string());
  if (options.get_or_build_only) {
    GetOrBuildResults get_or_build =
        run_get_or_build_hits(corpus.kernels.front(), scenario, work.path() / "get-or-build", options.hits);
    json report = report_header(options, date, load_at_start, work.path());
    report["get_or_build_hit"] = get_or_build_json(get_or_build);
    publish(options, report, render_header(report) + "\n" + render_get_or_build(get_or_build));
    return 0;
  }
  StoreResults store = run_store_benchmarks(corpus, scenario, work.path(), options.hits);
  IndexResults index = run_index_benchmark(work.path() / "index", options.index_entries, options.hits, scenario_json);
  GetOrBuildResults get_or_build =
      run_get_or_build_hits(corpus.kernels.front(), scenario, work.path() / "get-or-build", options.hits);

  json report = report_header(options, date, load_at_start, work.path());
  report["corpus"] = corpus_json(corpus, corpus_dir, scenario_json);
  report["store"] = store_json(store);
  // The in-process hit against a plain copy of the same files (new files),
  // flat at the top for bench/run; the same figures are under "store".
  report["hit_p50_us"] = store.hit_get.wall.p50;
  report["copy_p50_us"] = store.hit_copy.wall.p50;
  report["hit_p99_us"] = store.hit_get.wall.p99;
  report["copy_p99_us"] = store.hit_copy.wall.p99;
  report["publish_p50_us"] = store.hit_publish.wall.p50;
  report["index"] = index_json(index);
  // The C++ side of the Python binding's hit figure (bench/run, python_hit).
  report["get_or_build_hit"] = get_or_build_json(get_or_build);
  publish(options, report, render_table(report, corpus, store, index, get_or_build));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  set_program_name("bench_store");
  try {
    auto options = parse_options(argc, argv);
    return options ? run(*options) : 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_store: error: %s\n", error.what());
    return 1;
  }
}
