// The benchmark corpus generator; see corpus.hpp.
#include "support/corpus.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "base/sha256.hpp"
#include "base/subprocess.hpp"
#include "support/bench_util.hpp"

namespace opcache::bench {

namespace {

// Bump when the generated sources or companions change: a cached corpus made
// by another generator version is regenerated, not reused.
constexpr int k_corpus_generator_version = 2;
constexpr const char* k_corpus_manifest = "corpus.json";

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
constexpr std::array<OpVariant, k_corpus_op_types> k_ops{{
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
constexpr std::array<DType, k_corpus_dtypes> k_dtypes{
    {{"float16", "_Float16"}, {"float32", "float"}, {"int32", "int"}}};

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
  std::string digest = opcache::base::sha256_hex(descriptor.dump());
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

// Compiles kernel `index` (sources in `scratch`, the object and its
// companions into `kernel_dir`) with `cc -c -O2`; fail()s with the compiler's
// messages when it fails.
Kernel compile_kernel(std::size_t index, const fs::path& scratch, const fs::path& kernel_dir) {
  const KernelSpec spec = kernel_spec(index);
  json descriptor = kernel_descriptor(spec);
  const std::string stem = kernel_stem(spec, descriptor);
  const fs::path source = scratch / (stem + ".c");
  const fs::path object = kernel_dir / (stem + ".o");
  write_bytes(source, kernel_source(spec, stem));
  const auto started = SteadyClock::now();
  auto output = base::run_program({"cc", "-c", "-O2", "-fPIC", "-o", object.string(), source.string()});
  if (!output) {
    fail("cannot start the C compiler `cc` (" + output.error().message() + "); install gcc or put a `cc` on PATH");
  }
  if (output->exit_code != 0) {
    fail("cc failed on " + source.string() + ":\n" + output->out + output->err);
  }
  Kernel kernel;
  kernel.stem = stem;
  kernel.op_type = spec.op->op_type;
  kernel.build_ms = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - started).count();
  descriptor["kernel_name"] = stem;
  kernel.descriptor_json = descriptor.dump();
  kernel.files = {object, kernel_dir / (stem + ".json"), kernel_dir / (stem + ".info")};
  const std::string object_bytes = read_bytes(object);
  write_bytes(kernel.files[1], kernel_metadata(spec, stem, opcache::base::sha256_hex(object_bytes)).dump(4));
  write_bytes(kernel.files[2], kernel_info(spec, stem, descriptor).dump());
  for (std::size_t f = 0; f < kernel.files.size(); ++f) {
    kernel.sizes[f] = fs::file_size(kernel.files[f]);
  }
  fs::remove(source);
  return kernel;
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

}  // namespace

std::string_view corpus_op_type(std::size_t index) {
  return k_ops[index % k_ops.size()].op_type;
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
    // Worker threads take the next missing index; each runs one compiler at a time.
    std::atomic<std::size_t> next{0};
    std::size_t done = 0;
    std::mutex mutex;
    std::optional<std::string> first_failure;
    auto work = [&] {
      for (std::size_t i = next++; i < missing.size(); i = next++) {
        try {
          Kernel kernel = compile_kernel(missing[i], scratch, kernel_dir);
          std::lock_guard lock(mutex);
          corpus.kernels[missing[i]] = std::move(kernel);
          if (++done % 100 == 0 || done == missing.size()) {
            progress("  compiled " + std::to_string(done) + "/" + std::to_string(missing.size()) + " kernels (" +
                     format("%.1f", seconds_since(start)) + " s)");
          }
        } catch (const std::exception& error) {
          std::lock_guard lock(mutex);
          first_failure = first_failure.value_or(error.what());
          next = missing.size();
        }
      }
    };
    std::vector<std::thread> workers;
    for (int t = 0; t < k_compile_parallelism; ++t) {
      workers.emplace_back(work);
    }
    for (auto& worker : workers) {
      worker.join();
    }
    if (first_failure) {
      fail(*first_failure);
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

opcache::Entry corpus_shaped_entry(std::size_t index, std::string key, std::string digest,
                                   const std::string& scenario_json) {
  opcache::Entry entry;
  entry.key = std::move(key);
  entry.digest = std::move(digest);
  entry.op_type = std::string(corpus_op_type(index));
  entry.device_mode = "single";
  entry.phase = "train";
  entry.toolchain = "8.0.RC2";
  entry.soc = "Ascend910B1";
  entry.scenario = scenario_json;
  return entry;
}

}  // namespace opcache::bench
