// bench_store — throughput and latency of the local store on real kernels.
//
// Measures, for a corpus of real compiled kernel triples (.o from `cc -c -O2`,
// MindSpore-style .json and .info):
//   * put throughput into a fresh store,
//   * get throughput (a first pass with the objects evicted from the page
//     cache, then a second, warm pass),
//   * in-process hit latency of Store::get against a plain copy of the same
//     three files, measured the same way in the same run,
//   * store::Index lookup latency with 100,000 entries (present and absent keys).
// Prints a table and, with --json FILE, writes every figure as JSON.
// See bench/README.md for how to read the numbers.

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/opcache.hpp"
#include "opcache/version.hpp"
#include "store/index.hpp"
#include "store/sha256.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// Bump when the generated sources or companions change: a cached corpus made
// by another generator version is regenerated, not reused.
constexpr int k_corpus_generator_version = 2;
constexpr const char* k_corpus_manifest = "corpus.json";
constexpr const char* k_scenario = "device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1";
constexpr int k_compile_parallelism = 2;
constexpr std::size_t k_index_batch_rows = 25000;
constexpr std::uint64_t k_seed = 20261122;

// ---------------------------------------------------------------------------
// Small helpers

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error(message);
}

template <typename T>
T must(opcache::Result<T> result, const std::string& what) {
  if (!result) {
    fail(what + ": " + result.error().message());
  }
  return std::move(result).value();
}

void must(const opcache::Status& status, const std::string& what) {
  if (!status) {
    fail(what + ": " + status.error().message());
  }
}

void progress(const std::string& message) {
  std::fprintf(stderr, "bench_store: %s\n", message.c_str());
  std::fflush(stderr);
}

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

double micros_between(SteadyClock::time_point start, SteadyClock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - start).count();
}

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

// Writes through a temp file and a rename, so an interrupted run never leaves
// a half-written corpus manifest or JSON report behind.
void write_bytes_atomic(const fs::path& path, std::string_view contents) {
  fs::path temp = path;
  temp += ".tmp";
  write_bytes(temp, contents);
  fs::rename(temp, path);
}

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

// ---------------------------------------------------------------------------
// Statistics

struct Percentiles {
  std::size_t samples = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;

  json to_json() const {
    return {{"samples", samples}, {"mean_us", mean}, {"p50_us", p50},
            {"p90_us", p90},      {"p99_us", p99},   {"max_us", max}};
  }
};

// Nearest-rank percentiles of samples in microseconds.
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

struct Throughput {
  std::size_t kernels = 0;
  std::uint64_t raw_bytes = 0;
  double seconds = 0;

  double kernels_per_second() const { return seconds > 0 ? static_cast<double>(kernels) / seconds : 0; }
  double megabytes_per_second() const { return seconds > 0 ? static_cast<double>(raw_bytes) / 1e6 / seconds : 0; }
  json to_json() const {
    return {{"kernels", kernels},
            {"raw_bytes", raw_bytes},
            {"seconds", seconds},
            {"kernels_per_second", kernels_per_second()},
            {"megabytes_per_second", megabytes_per_second()}};
  }
};

// ---------------------------------------------------------------------------
// Options

struct Options {
  std::size_t kernels = 1000;
  std::size_t hits = 5000;
  std::size_t index_entries = 100000;
  fs::path corpus = "bench-corpus";
  std::optional<fs::path> work;
  std::optional<fs::path> json_file;
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
  --help               this text
)";

std::size_t parse_count(std::string_view flag, std::string_view text, std::size_t minimum) {
  std::size_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < minimum) {
    fail(std::string(flag) + " needs a whole number >= " + std::to_string(minimum) + ", not \"" + std::string(text) +
         "\"");
  }
  return value;
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (auto equals = flag.find('='); flag.rfind("--", 0) == 0 && equals != std::string::npos) {
      inline_value = flag.substr(equals + 1);
      flag = flag.substr(0, equals);
    }
    if (flag == "--help" || flag == "-h") {
      std::fputs(k_usage, stdout);
      return std::nullopt;
    }
    auto value = [&]() -> std::string {
      if (inline_value) {
        return *inline_value;
      }
      if (i + 1 >= args.size()) {
        fail(flag + " needs a value (see --help)");
      }
      return args[++i];
    };
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
    } else {
      fail("unknown argument \"" + args[i] + "\" (see --help)");
    }
  }
  return options;
}

// ---------------------------------------------------------------------------
// Corpus: real kernels compiled by the system C compiler

// One op family of the corpus. The C body works on `data_t` (the dtype) and
// accumulates in `acc_t` (float); shapes are compile-time constants, so every
// (op, dtype, shape) compiles to a different object.
struct OpVariant {
  const char* op_type;  // MindSpore/CANN op name
  const char* body;     // C statements of the kernel, see kernel_source()
  int inputs;           // tensor inputs
  bool reduces;         // output is [M] instead of [M, N]
  bool matmul;          // inputs are [M, K] and [K, N]
};

// Statements see M, N, K, TILE (tile length along N) and pointers x0, x1, y.
constexpr std::array<OpVariant, 8> k_ops{{
    {"Add", "for (int j = j0; j < j1; ++j) y[i * N + j] = (data_t)((acc_t)x0[i * N + j] + (acc_t)x1[i * N + j]);", 2,
     false, false},
    {"Axpy",
     "for (int j = j0; j < j1; ++j) y[i * N + j] = (data_t)(ALPHA * (acc_t)x0[i * N + j] + (acc_t)x1[i * N + j]);", 2,
     false, false},
    {"ReLU",
     "for (int j = j0; j < j1; ++j) { acc_t v = (acc_t)x0[i * N + j]; y[i * N + j] = (data_t)(v > 0 ? v : 0); }", 1,
     false, false},
    {"FastGelu",
     "for (int j = j0; j < j1; ++j) { acc_t v = (acc_t)x0[i * N + j]; acc_t u = 1.5957691f * (v + 0.044715f * v * v * "
     "v); acc_t a = u < 0 ? -u : u; acc_t e = 1.0f / (1.0f + a + 0.5f * a * a + 0.1666667f * a * a * a); "
     "y[i * N + j] = (data_t)(u >= 0 ? v / (1.0f + e) : v * e / (1.0f + e)); }",
     1, false, false},
    {"ReduceSum",
     "acc_t s = 0; for (int j = j0; j < j1; ++j) s += (acc_t)x0[i * N + j]; y[i] = (data_t)((acc_t)y[i] + s);", 1, true,
     false},
    {"ReduceMax",
     "acc_t m = (acc_t)y[i]; for (int j = j0; j < j1; ++j) { acc_t v = (acc_t)x0[i * N + j]; m = v > m ? v : m; } "
     "y[i] = (data_t)m;",
     1, true, false},
    {"Softmax",
     "acc_t m = (acc_t)x0[i * N]; for (int j = j0; j < j1; ++j) { acc_t v = (acc_t)x0[i * N + j]; m = v > m ? v : m; } "
     "acc_t s = 0; for (int j = j0; j < j1; ++j) { acc_t d = (acc_t)x0[i * N + j] - m; acc_t e = 1.0f + d * (1.0f + "
     "d * (0.5f + d * 0.1666667f)); e = e < 0 ? 0 : e; y[i * N + j] = (data_t)e; s += e; } "
     "for (int j = j0; j < j1; ++j) y[i * N + j] = (data_t)((acc_t)y[i * N + j] / s);",
     1, false, false},
    {"MatMul",
     "for (int j = j0; j < j1; ++j) { acc_t s = 0; for (int k = 0; k < K; ++k) s += (acc_t)x0[i * K + k] * "
     "(acc_t)x1[k * N + j]; y[i * N + j] = (data_t)s; }",
     2, false, true},
}};

struct DType {
  const char* name;    // descriptor dtype
  const char* c_type;  // C type of data_t
};
constexpr std::array<DType, 3> k_dtypes{{{"float16", "_Float16"}, {"float32", "float"}, {"int32", "int"}}};

// Everything that makes kernel `index` what it is.
struct KernelSpec {
  std::size_t index = 0;
  const OpVariant* op = nullptr;
  const DType* dtype = nullptr;
  int m = 0, n = 0, k = 0, tile = 0, unroll = 1, block_dim = 1;
};

// Injective in `index`: op and dtype cycle fastest, and the shape is an
// injective function of index / 24, so no two kernels share (op, dtype, shape).
KernelSpec kernel_spec(std::size_t index) {
  KernelSpec spec;
  spec.index = index;
  spec.op = &k_ops[index % k_ops.size()];
  spec.dtype = &k_dtypes[(index / k_ops.size()) % k_dtypes.size()];
  std::size_t shape = index / (k_ops.size() * k_dtypes.size());
  spec.m = 16 * static_cast<int>(1 + shape % 32);
  spec.n = 32 * static_cast<int>(1 + shape / 32) + 8 * static_cast<int>(shape % 3);  // still injective
  spec.k = 64 + 16 * static_cast<int>(shape % 4);
  spec.tile = std::min(spec.n, 16 << (shape % 3));
  spec.unroll = 1 << (shape % 4);
  spec.block_dim = std::min(spec.m, 2 << (shape % 5));
  return spec;
}

json tensor(const std::vector<int>& shape, const char* dtype) {
  return {{"shape", shape}, {"ori_shape", shape}, {"dtype", dtype}, {"format", "ND"}, {"ori_format", "ND"}};
}

// The op descriptor opcache hashes (MindSpore op-compile-info style). It also
// carries volatile fields (kernel_name, full_name, job_id) that the store
// strips before hashing, as it must for real descriptors.
json kernel_descriptor(const KernelSpec& spec) {
  const std::string prefix = "Default/network/" + std::string(spec.op->op_type) + "-op" + std::to_string(spec.index);
  json inputs = json::array();
  if (spec.op->matmul) {
    inputs.push_back(tensor({spec.m, spec.k}, spec.dtype->name));
    inputs.push_back(tensor({spec.k, spec.n}, spec.dtype->name));
  } else {
    for (int i = 0; i < spec.op->inputs; ++i) {
      inputs.push_back(tensor({spec.m, spec.n}, spec.dtype->name));
    }
  }
  std::vector<int> out_shape = spec.op->reduces ? std::vector<int>{spec.m} : std::vector<int>{spec.m, spec.n};
  json attrs = json::object();
  if (spec.op->reduces) {
    attrs["axis"] = {-1};
    attrs["keep_dims"] = false;
  }
  if (std::string_view(spec.op->op_type) == "Axpy") {
    attrs["alpha"] = 0.5;
  }
  if (spec.op->matmul) {
    attrs["transpose_a"] = false;
    attrs["transpose_b"] = false;
  }
  return {{"op_type", spec.op->op_type},
          {"inputs", inputs},
          {"outputs", {tensor(out_shape, spec.dtype->name)}},
          {"attrs", attrs},
          {"impl_mode", "high_performance"},
          {"full_name", prefix},
          {"job_id", 100000 + spec.index},
          {"kernel_name", "pending"}};
}

// MindSpore names kernels "<Op>_<hash>_<n>"; we use the descriptor's hash.
std::string kernel_stem(const KernelSpec& spec, const json& descriptor) {
  std::string digest = opcache::store::sha256_hex(descriptor.dump());
  return std::string(spec.op->op_type) + "_" + std::to_string(std::stoull(digest.substr(0, 15), nullptr, 16)) + "_0";
}

// A C translation unit shaped like a real kernel: a tiling function with a
// per-block table, one function per AI core block with its row range and
// tiling baked in (so code size grows with the block count, as specialised
// kernels do), and the kernel entry that dispatches on the block index.
std::string kernel_source(const KernelSpec& spec, const std::string& stem) {
  const int tiles = spec.n / spec.tile;
  const int tail = spec.n % spec.tile;
  auto row_begin = [&spec](int block) { return block * spec.m / spec.block_dim; };
  std::ostringstream c;
  c << "/* generated by bench_store: " << spec.op->op_type << " " << spec.dtype->name << " [" << spec.m << ", "
    << spec.n << "] */\n"
    << "typedef " << spec.dtype->c_type << " data_t;\ntypedef float acc_t;\n"
    << "#define M " << spec.m << "\n#define N " << spec.n << "\n#define K " << spec.k << "\n#define TILE " << spec.tile
    << "\n#define BLOCK_DIM " << spec.block_dim << "\n#define ALPHA 0.5f\n\n";
  c << "struct tiling { int row_begin, row_end, tile, tiles, tail; };\n"
    << "static const struct tiling k_tiling[BLOCK_DIM] = {\n";
  for (int block = 0; block < spec.block_dim; ++block) {
    c << "  {" << row_begin(block) << ", " << row_begin(block + 1) << ", " << spec.tile << ", " << tiles << ", " << tail
      << "},\n";
  }
  c << "};\n\n";
  c << "int " << stem << "__tiling(int block, struct tiling* out) {\n"
    << "  if (block < 0 || block >= BLOCK_DIM) return -1;\n  *out = k_tiling[block];\n  return 0;\n}\n\n";
  const std::string params = std::string("const data_t* restrict x0, ") +
                             (spec.op->inputs > 1 ? "const data_t* restrict x1, " : "") + "data_t* restrict y";
  const std::string args = spec.op->inputs > 1 ? "x0, x1, y" : "x0, y";
  c << "static inline void tile_body(" << params << ", int i, int j0, int j1) {\n  " << spec.op->body << "\n}\n\n";
  for (int block = 0; block < spec.block_dim; ++block) {
    c << "static void block_" << block << "(" << params << ") {\n"
      << "  for (int i = " << row_begin(block) << "; i < " << row_begin(block + 1) << "; ++i) {\n"
      << "#pragma GCC unroll " << spec.unroll << "\n"
      << "    for (int t = 0; t < " << tiles << "; ++t) tile_body(" << args << ", i, t * TILE, t * TILE + TILE);\n";
    if (tail != 0) {
      c << "    tile_body(" << args << ", i, N - " << tail << ", N);\n";
    }
    c << "  }\n}\n\n";
  }
  c << "int " << stem << "__kernel0(" << params << ", int block) {\n  switch (block) {\n";
  for (int block = 0; block < spec.block_dim; ++block) {
    c << "    case " << block << ": block_" << block << "(" << args << "); return 0;\n";
  }
  c << "    default: return -1;\n  }\n}\n";
  return c.str();
}

// The kernel_meta .json MindSpore writes next to a compiled kernel.
json kernel_metadata(const KernelSpec& spec, const std::string& stem, const std::string& object_sha256) {
  json parameters = json::array();
  for (int i = 0; i <= spec.op->inputs; ++i) {
    parameters.push_back(0);
  }
  return {{"binFileName", stem},
          {"binFileSuffix", ".o"},
          {"blockDim", spec.block_dim},
          {"coreType", "AiCore"},
          {"intercoreSync", 0},
          {"kernelName", stem + "__kernel0"},
          {"magic", "RT_DEV_BINARY_MAGIC_ELF"},
          {"memoryStamping", json::array()},
          {"opParaSize", 0},
          {"parameters", parameters},
          {"sha256", object_sha256},
          {"workspace", {{"num", 0}, {"size", json::array()}, {"type", json::array()}}}};
}

// The .info compile job (what the compiler was asked to build).
json kernel_info(const KernelSpec& spec, const std::string& stem, const json& descriptor) {
  json op = {{"type", spec.op->op_type},
             {"func_name", stem},
             {"name", descriptor["full_name"]},
             {"input_desc", descriptor["inputs"]},
             {"output_desc", descriptor["outputs"]},
             {"attr_desc", descriptor["attrs"]},
             {"module_name", std::string("impl.") + spec.op->op_type},
             {"py_module_path", "/usr/local/Ascend/opp/op_impl/built-in/ai_core/tbe"}};
  return {{"job_content",
           {{"SocInfo",
             {{"socVersion", "Ascend910B1"},
              {"coreNum", ""},
              {"coreType", ""},
              {"deviceId", "0"},
              {"l1Fusion", "false"},
              {"l2Fusion", "false"},
              {"op_impl_mode", ""},
              {"op_debug_level", "0"}}},
            {"fusion_op_name", stem},
            {"full_name", descriptor["full_name"]},
            {"op_list", {op}}}},
          {"job_id", 100000 + spec.index},
          {"job_type", "Compile"},
          {"source_id", 0}};
}

struct Kernel {
  std::string stem;
  std::string op_type;
  std::string descriptor_json;
  std::int64_t build_ms = 0;
  std::array<fs::path, 3> files;  // .o, .json, .info
  std::array<std::uint64_t, 3> sizes{};

  std::uint64_t raw_bytes() const { return sizes[0] + sizes[1] + sizes[2]; }
  std::vector<fs::path> file_list() const { return {files.begin(), files.end()}; }
};

struct Corpus {
  std::vector<Kernel> kernels;
  std::uint64_t raw_bytes = 0;
  std::size_t generated = 0;               // kernels compiled by this run
  double generation_seconds = 0;           // this run's generation time
  double original_generation_seconds = 0;  // total recorded in the cached corpus
};

// Owns a posix_spawn_file_actions_t.
class SpawnActions {
 public:
  SpawnActions() { posix_spawn_file_actions_init(&m_actions); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  ~SpawnActions() { posix_spawn_file_actions_destroy(&m_actions); }
  posix_spawn_file_actions_t* get() { return &m_actions; }

 private:
  posix_spawn_file_actions_t m_actions{};
};

// Starts `cc -c -O2` with output and errors going to `log`.
pid_t spawn_compiler(const fs::path& source, const fs::path& object, const fs::path& log) {
  SpawnActions actions;
  posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(actions.get(), STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> args = {"cc", "-c", "-O2", "-fPIC", "-o", object.string(), source.string()};
  std::vector<char*> argv;
  for (auto& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "cc", actions.get(), nullptr, argv.data(), environ);
  if (rc != 0) {
    fail("cannot start the C compiler `cc` (" + std::string(std::strerror(rc)) +
         "); install gcc or put a `cc` on PATH");
  }
  return pid;
}

json kernel_to_json(const Kernel& kernel) {
  return {{"stem", kernel.stem},
          {"op_type", kernel.op_type},
          {"descriptor", json::parse(kernel.descriptor_json)},
          {"build_ms", kernel.build_ms},
          {"sizes", kernel.sizes}};
}

Kernel kernel_from_json(const json& value, const fs::path& kernel_dir) {
  Kernel kernel;
  kernel.stem = value.at("stem").get<std::string>();
  kernel.op_type = value.at("op_type").get<std::string>();
  kernel.descriptor_json = value.at("descriptor").dump();
  kernel.build_ms = value.at("build_ms").get<std::int64_t>();
  kernel.sizes = value.at("sizes").get<std::array<std::uint64_t, 3>>();
  kernel.files = {kernel_dir / (kernel.stem + ".o"), kernel_dir / (kernel.stem + ".json"),
                  kernel_dir / (kernel.stem + ".info")};
  return kernel;
}

bool kernel_files_intact(const Kernel& kernel) {
  for (std::size_t i = 0; i < kernel.files.size(); ++i) {
    std::error_code ec;
    if (fs::file_size(kernel.files[i], ec) != kernel.sizes[i] || ec) {
      return false;
    }
  }
  return true;
}

// Loads the cached corpus (if made by this generator) and compiles whatever
// is missing, `k_compile_parallelism` compilers at a time. Kernel i is always
// the same kernel, so a cached corpus can be extended.
Corpus load_or_generate_corpus(const fs::path& directory, std::size_t count, const std::string& scenario_json) {
  const fs::path kernel_dir = directory / "kernels";
  const fs::path scratch = directory / "scratch";
  fs::create_directories(kernel_dir);

  Corpus corpus;
  corpus.kernels.resize(count);
  std::vector<bool> present(count, false);
  json manifest;
  if (fs::exists(directory / k_corpus_manifest)) {
    try {
      manifest = json::parse(read_bytes(directory / k_corpus_manifest));
      if (manifest.value("generator", 0) != k_corpus_generator_version) {
        progress("corpus in " + directory.string() + " was made by another generator version; regenerating");
        manifest = json();
      } else {
        corpus.original_generation_seconds = manifest.value("generation_seconds", 0.0);
        const auto& cached = manifest.at("kernels");
        for (std::size_t i = 0; i < count && i < cached.size(); ++i) {
          Kernel kernel = kernel_from_json(cached[i], kernel_dir);
          if (kernel_files_intact(kernel)) {
            corpus.kernels[i] = std::move(kernel);
            present[i] = true;
          }
        }
      }
    } catch (const json::exception& error) {
      progress("corpus manifest unreadable (" + std::string(error.what()) + "); regenerating");
      manifest = json();
      std::fill(present.begin(), present.end(), false);
      corpus.original_generation_seconds = 0;
    }
  }
  if (!manifest.is_object()) {
    // Files of another generator version (or of an unknown one) are not ours to keep.
    fs::remove_all(kernel_dir);
    fs::create_directories(kernel_dir);
  }

  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < count; ++i) {
    if (!present[i]) {
      missing.push_back(i);
    }
  }
  const auto start = SteadyClock::now();
  if (!missing.empty()) {
    progress("compiling " + std::to_string(missing.size()) + " kernels with cc -c -O2, " +
             std::to_string(k_compile_parallelism) + " at a time, into " + kernel_dir.string());
    fs::create_directories(scratch);
    struct Job {
      std::size_t index;
      KernelSpec spec;
      json descriptor;
      std::string stem;
      fs::path source, log;
      SteadyClock::time_point started;
    };
    std::map<pid_t, Job> running;
    std::size_t next = 0;
    std::size_t done = 0;
    auto finish = [&](pid_t pid, int status) {
      auto it = running.find(pid);
      if (it == running.end()) {
        return;  // not one of ours
      }
      Job job = std::move(it->second);
      running.erase(it);
      const fs::path object = kernel_dir / (job.stem + ".o");
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fail("cc failed on " + job.source.string() + ":\n" + read_bytes(job.log));
      }
      Kernel kernel;
      kernel.stem = job.stem;
      kernel.op_type = job.spec.op->op_type;
      kernel.build_ms = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - job.started).count();
      job.descriptor["kernel_name"] = job.stem;
      kernel.descriptor_json = job.descriptor.dump();
      kernel.files = {object, kernel_dir / (job.stem + ".json"), kernel_dir / (job.stem + ".info")};
      const std::string object_bytes = read_bytes(object);
      write_bytes(kernel.files[1],
                  kernel_metadata(job.spec, job.stem, opcache::store::sha256_hex(object_bytes)).dump(4));
      write_bytes(kernel.files[2], kernel_info(job.spec, job.stem, job.descriptor).dump());
      for (std::size_t f = 0; f < kernel.files.size(); ++f) {
        kernel.sizes[f] = fs::file_size(kernel.files[f]);
      }
      fs::remove(job.source);
      fs::remove(job.log);
      corpus.kernels[job.index] = std::move(kernel);
      if (++done % 100 == 0 || done == missing.size()) {
        progress("  compiled " + std::to_string(done) + "/" + std::to_string(missing.size()) + " kernels (" +
                 format("%.1f", seconds_since(start)) + " s)");
      }
    };
    while (next < missing.size() || !running.empty()) {
      while (next < missing.size() && running.size() < static_cast<std::size_t>(k_compile_parallelism)) {
        Job job;
        job.index = missing[next++];
        job.spec = kernel_spec(job.index);
        job.descriptor = kernel_descriptor(job.spec);
        job.stem = kernel_stem(job.spec, job.descriptor);
        job.source = scratch / (job.stem + ".c");
        job.log = scratch / (job.stem + ".log");
        write_bytes(job.source, kernel_source(job.spec, job.stem));
        job.started = SteadyClock::now();
        pid_t pid = spawn_compiler(job.source, kernel_dir / (job.stem + ".o"), job.log);
        running.emplace(pid, std::move(job));
      }
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, 0);
      if (pid < 0) {
        if (errno == EINTR) {
          continue;
        }
        fail(std::string("waitpid: ") + std::strerror(errno));
      }
      finish(pid, status);
    }
    fs::remove_all(scratch);
    corpus.generated = missing.size();
  }
  corpus.generation_seconds = missing.empty() ? 0.0 : seconds_since(start);

  std::unordered_set<std::string> stems;
  for (const auto& kernel : corpus.kernels) {
    if (!stems.insert(kernel.stem).second) {
      fail("corpus has two kernels named " + kernel.stem + "; the generator is not injective");
    }
    corpus.raw_bytes += kernel.raw_bytes();
  }

  if (corpus.generated > 0) {
    // Keep cached kernels beyond `count` (a larger earlier corpus) listed.
    json kernels = json::array();
    for (const auto& kernel : corpus.kernels) {
      kernels.push_back(kernel_to_json(kernel));
    }
    if (manifest.is_object()) {
      const auto& cached = manifest["kernels"];
      for (std::size_t i = count; i < cached.size(); ++i) {
        kernels.push_back(cached[i]);
      }
    }
    corpus.original_generation_seconds += corpus.generation_seconds;
    json out = {{"generator", k_corpus_generator_version},
                {"scenario", json::parse(scenario_json)},
                {"generation_seconds", corpus.original_generation_seconds},
                {"kernels", kernels}};
    write_bytes_atomic(directory / k_corpus_manifest, out.dump(1));
  }
  return corpus;
}

// ---------------------------------------------------------------------------
// Plain copy baseline: open/read/write with POSIX calls, no verification.

class Fd {
 public:
  explicit Fd(int fd) : m_fd(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (m_fd >= 0) {
      ::close(m_fd);
    }
  }
  int get() const { return m_fd; }

 private:
  int m_fd;
};

// Copies one file; `hash`, when given, also receives every byte.
void plain_copy(const fs::path& from, const fs::path& to, opcache::store::Sha256* hash = nullptr) {
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

// Asks the kernel to drop the cached pages of `path` (clean pages only; no
// root needed and nothing else on the machine is affected).
void evict_from_page_cache(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() >= 0) {
    ::fdatasync(fd.get());
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  }
}

// ---------------------------------------------------------------------------
// Machine description

// The mount that holds `path`, as "<type> (<options>)" from /proc/self/mounts:
// the options matter (a `discard` mount, say, makes freeing blocks slow).
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

// ---------------------------------------------------------------------------
// The benchmarks

// Wall and thread-CPU time of one operation, in microseconds.
struct Sample {
  double wall_us = 0;
  double cpu_us = 0;
};

double thread_cpu_us() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

// The CPU clock is read outside the wall-clock window, so its own cost is not
// in the wall time.
template <typename F>
Sample time_once(F&& operation) {
  const double cpu0 = thread_cpu_us();
  const auto t0 = SteadyClock::now();
  operation();
  const auto t1 = SteadyClock::now();
  return {micros_between(t0, t1), thread_cpu_us() - cpu0};
}

struct Latency {
  Percentiles wall;
  Percentiles cpu;

  json to_json() const { return {{"wall", wall.to_json()}, {"thread_cpu", cpu.to_json()}}; }
};

Latency summarize(const std::vector<Sample>& samples) {
  std::vector<double> wall, cpu;
  for (const auto& sample : samples) {
    wall.push_back(sample.wall_us);
    cpu.push_back(sample.cpu_us);
  }
  return {percentiles(std::move(wall)), percentiles(std::move(cpu))};
}

struct StoreResults {
  Throughput put, get_cold, get_warm, get_replace;
  std::uint64_t bundle_bytes = 0;
  Latency hit_get, hit_copy, hit_copy_hash;  // into an output directory without the files
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
  HitTimer(opcache::Store& store, const std::vector<Kernel>& kernels, const std::vector<std::string>& keys)
      : m_store(store), m_kernels(kernels), m_keys(keys) {}

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

  Sample copy_and_hash(std::size_t which, const fs::path& out_dir) {
    return time_once([&] {
      for (const auto& file : m_kernels[which].files) {
        opcache::store::Sha256 hash;
        plain_copy(file, out_dir / file.filename(), &hash);
        (void)hash.finish();
      }
    });
  }

 private:
  opcache::Store& m_store;
  const std::vector<Kernel>& m_kernels;
  const std::vector<std::string>& m_keys;
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
  for (const auto& key : keys) {
    auto entry = must(store.lookup(key), "lookup " + key);
    evict_from_page_cache(config.cache_dir / "objects" / entry->digest.substr(0, 2) / entry->digest);
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
  HitTimer timer(store, kernels, keys);
  const fs::path get_dir = work / "hit-get";
  const fs::path copy_dir = work / "hit-copy";
  const fs::path copy_hash_dir = work / "hit-copy-sha256";
  fs::create_directories(get_dir);
  fs::create_directories(copy_dir);
  fs::create_directories(copy_hash_dir);
  std::mt19937_64 random(k_seed);
  std::uniform_int_distribution<std::size_t> pick(0, kernels.size() - 1);
  const std::size_t warmup = std::min<std::size_t>(100, hit_count);
  progress("hit latency: " + std::to_string(hit_count) + " random hits (+" + std::to_string(warmup) +
           " warm-up), get vs plain copy, new files");
  std::vector<Sample> get_samples, copy_samples, copy_hash_samples;
  for (std::size_t i = 0; i < warmup + hit_count; ++i) {
    const std::size_t which = pick(random);
    Sample g, c, h;
    if (i % 2 == 0) {
      g = timer.get(which, get_dir);
      c = timer.copy(which, copy_dir);
      h = timer.copy_and_hash(which, copy_hash_dir);
    } else {
      h = timer.copy_and_hash(which, copy_hash_dir);
      c = timer.copy(which, copy_dir);
      g = timer.get(which, get_dir);
    }
    remove_outputs(kernels[which], get_dir);
    remove_outputs(kernels[which], copy_dir);
    remove_outputs(kernels[which], copy_hash_dir);
    if (i >= warmup) {
      get_samples.push_back(g);
      copy_samples.push_back(c);
      copy_hash_samples.push_back(h);
      if ((i - warmup + 1) % 1000 == 0) {
        progress("  " + std::to_string(i - warmup + 1) + "/" + std::to_string(hit_count) + " hits");
      }
    }
  }
  results.hit_get = summarize(get_samples);
  results.hit_copy = summarize(copy_samples);
  results.hit_copy_hash = summarize(copy_hash_samples);

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
  using opcache::store::sha256_hex;
  IndexResults results;
  results.entries = entries;
  fs::create_directories(directory);
  const fs::path path = directory / "index.db";
  std::vector<std::string> keys(entries);
  for (std::size_t i = 0; i < entries; ++i) {
    keys[i] = sha256_hex("bench-index-key-" + std::to_string(i));
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
        opcache::Entry entry;
        entry.key = keys[i];
        entry.digest = sha256_hex("bench-index-object-" + std::to_string(i));
        entry.raw_size = static_cast<std::int64_t>(4000 + random() % 60000);
        entry.bundle_size = entry.raw_size / 3;
        entry.op_type = k_ops[i % k_ops.size()].op_type;
        entry.device_mode = "single";
        entry.phase = "train";
        entry.toolchain = "8.0.RC2";
        entry.soc = "Ascend910B1";
        entry.scenario = scenario_json;
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

    const std::string absent = sha256_hex("bench-index-absent-" + std::to_string(i));
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

std::string row(const std::string& label, const std::vector<std::string>& cells, int label_width = 38,
                int cell_width = 11) {
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

// Wall-clock percentiles, then the median and p99 of thread CPU time.
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

std::string render_table(const json& report, const Corpus& corpus, const StoreResults& store,
                         const IndexResults& index) {
  std::ostringstream out;
  const auto& machine = report["machine"];
  out << "opcache " << opcache::k_version_string << " store benchmark, " << report["date"].get<std::string>() << "\n"
      << "machine: " << machine["nproc"].get<long>() << " CPUs (" << machine["cpu_model"].get<std::string>() << "), "
      << machine["kernel"].get<std::string>() << " " << machine["arch"].get<std::string>() << "; work dir on "
      << machine["work_file_system"].get<std::string>() << "\n"
      << "load average (1 min): " << format("%.2f", report["load_average_1m"]["start"].get<double>())
      << " at the start, " << format("%.2f", report["load_average_1m"]["end"].get<double>()) << " at the end\n";
  const auto& kernel_report = report["corpus"];
  out << "corpus: " << corpus.kernels.size() << " real kernels (" << k_ops.size() << " op types x " << k_dtypes.size()
      << " dtypes x shapes), " << 3 * corpus.kernels.size() << " files, "
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
      << format("%.1f", static_cast<double>(index.wal_bytes) / 1e6) << " MB)\n";
  return out.str();
}

// Removes the directory on destruction when asked to (the default temp work dir).
class ScratchDirectory {
 public:
  ScratchDirectory(fs::path path, bool remove) : m_path(std::move(path)), m_remove(remove) {}
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ~ScratchDirectory() {
    if (m_remove) {
      std::error_code ec;
      fs::remove_all(m_path, ec);
    }
  }
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
  bool m_remove;
};

ScratchDirectory make_work_directory(const std::optional<fs::path>& requested) {
  if (requested) {
    // Only the subdirectories this program creates are cleared, so a rerun
    // with the same --work starts from a fresh store.
    for (const char* name :
         {"store", "get-1", "get-2", "hit-get", "hit-copy", "hit-copy-sha256", "hit-copy-replace", "index"}) {
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

double load_average_1m() {
  double load[1] = {0};
  return ::getloadavg(load, 1) == 1 ? load[0] : -1;
}

int run(const Options& options) {
  const std::string date = utc_now_rfc3339();
  const double load_at_start = load_average_1m();
  auto scenario = must(opcache::parse_scenario(k_scenario), "scenario");
  const std::string scenario_json = opcache::scenario_canonical_json(scenario);

  const fs::path corpus_dir = fs::absolute(options.corpus);
  Corpus corpus = load_or_generate_corpus(corpus_dir, options.kernels, scenario_json);
  if (corpus.generated == 0) {
    progress("corpus: reused " + std::to_string(corpus.kernels.size()) + " kernels from " + corpus_dir.string() +
             " (generation took " + format("%.1f", corpus.original_generation_seconds) + " s when it was made)");
  } else {
    progress("corpus: generated " + std::to_string(corpus.generated) + " kernels in " +
             format("%.1f", corpus.generation_seconds) + " s");
  }
  if (options.kernels < 1000) {
    progress("note: fewer than 1,000 kernels; the issue's requirement asks for at least 1,000");
  }

  ScratchDirectory work = make_work_directory(options.work);
  progress("work directory: " + work.path().string());
  StoreResults store = run_store_benchmarks(corpus, scenario, work.path(), options.hits);
  IndexResults index = run_index_benchmark(work.path() / "index", options.index_entries, options.hits, scenario_json);

  std::uint64_t object_bytes = 0, metadata_bytes = 0, info_bytes = 0;
  for (const auto& kernel : corpus.kernels) {
    object_bytes += kernel.sizes[0];
    metadata_bytes += kernel.sizes[1];
    info_bytes += kernel.sizes[2];
  }
  const double n = static_cast<double>(corpus.kernels.size());
  json report = {
      {"benchmark", "store"},
      {"opcache_version", opcache::k_version_string},
      {"date", date},
      {"machine", machine_json(work.path())},
      {"load_average_1m", {{"start", load_at_start}, {"end", load_average_1m()}}},
      {"options",
       {{"kernels", options.kernels},
        {"hits", options.hits},
        {"index_entries", options.index_entries},
        {"work_directory", work.path().string()},
        {"work_directory_kept", options.work.has_value()}}},
      {"corpus",
       {{"directory", corpus_dir.string()},
        {"kernels", corpus.kernels.size()},
        {"files", 3 * corpus.kernels.size()},
        {"raw_bytes", corpus.raw_bytes},
        {"mean_object_bytes", static_cast<double>(object_bytes) / n},
        {"mean_metadata_bytes", static_cast<double>(metadata_bytes) / n},
        {"mean_info_bytes", static_cast<double>(info_bytes) / n},
        {"op_types", k_ops.size()},
        {"generated_now", corpus.generated},
        {"generation_seconds", corpus.generation_seconds},
        {"recorded_generation_seconds", corpus.original_generation_seconds},
        {"compile_parallelism", k_compile_parallelism},
        {"scenario", json::parse(scenario_json)}}},
      {"store",
       {{"bundle_bytes", store.bundle_bytes},
        {"put", store.put.to_json()},
        {"get_cold_new_files", store.get_cold.to_json()},
        {"get_warm_new_files", store.get_warm.to_json()},
        {"get_warm_replacing_files", store.get_replace.to_json()},
        {"hit_latency_new_files",
         {{"get", store.hit_get.to_json()},
          {"plain_copy", store.hit_copy.to_json()},
          {"plain_copy_sha256", store.hit_copy_hash.to_json()},
          {"ratio_p50", store.hit_get.wall.p50 / store.hit_copy.wall.p50},
          {"ratio_p99", store.hit_get.wall.p99 / store.hit_copy.wall.p99}}},
        {"hit_latency_replacing_files",
         {{"get", store.replace_get.to_json()},
          {"plain_copy", store.replace_copy.to_json()},
          {"ratio_p50", store.replace_get.wall.p50 / store.replace_copy.wall.p50},
          {"ratio_p99", store.replace_get.wall.p99 / store.replace_copy.wall.p99}}}}},
      {"index",
       {{"entries", index.entries},
        {"build_seconds", index.build_seconds},
        {"db_bytes", index.db_bytes},
        {"wal_bytes", index.wal_bytes},
        {"lookup_present", index.present.to_json()},
        {"lookup_absent", index.absent.to_json()}}},
  };

  std::fputs(("\n" + render_table(report, corpus, store, index)).c_str(), stdout);
  std::fflush(stdout);
  if (options.json_file) {
    if (options.json_file->has_parent_path()) {
      fs::create_directories(options.json_file->parent_path());
    }
    write_bytes_atomic(*options.json_file, report.dump(2) + "\n");
    progress("wrote " + options.json_file->string());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto options = parse_options(argc, argv);
    return options ? run(*options) : 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_store: error: %s\n", error.what());
    return 1;
  }
}
