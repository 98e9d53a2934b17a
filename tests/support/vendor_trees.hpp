// Fixture trees that look like what the Ascend toolchains leave on disk
// (../shared/docs/ascend-formats.md and seed 003): MindSpore rank_*/kernel_meta
// triples, a CANN op compile cache and torchair static-kernel outputs. Every
// .o is a real object compiled by the system compiler (compile_object); each
// distinct kernel is compiled once per test process and copied from there.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace opcache::test {

/// A real object file, compiled once per process. Never modify `path`: copy it.
struct CompiledObject {
  std::filesystem::path path;
  std::string bytes;
  std::string sha256;  ///< lowercase hex SHA-256 of `bytes`
};

/// A real elementwise kernel `<symbol>(const float* x, float* y)` over
/// `length` elements whose body depends on `op_type` (Square, Relu, Neg, ...).
/// Compiled on first use for each (symbol, op_type, length) and cached for the
/// rest of the process; not thread-safe. Throws when the compiler fails.
const CompiledObject& compiled_kernel(const std::string& symbol, const std::string& op_type, std::int64_t length);

// ---------------------------------------------------------------------------
// MindSpore kernel_meta

/// One operator as MindSpore's TBE job describes it.
struct MindSporeOp {
  std::string func_name;                            ///< "square": file stems start with it
  std::string type;                                 ///< "Square": the op_list type
  std::vector<std::int64_t> shape{3};               ///< of every input and the output
  std::string dtype = "float32";
  std::string format = "ND";
  int inputs = 1;                                   ///< Data ops x_0 .. x_{inputs-1}
  nlohmann::json attrs = nlohmann::json::array();   ///< [{"name","dtype","valid","value"}]
  /// The 64-bit hash in the stem; empty: derived from the fields above, so a
  /// different shape gives a different stem as it does in MindSpore.
  std::string hash;
};

/// The values that differ between two compiles of the same kernel (the
/// volatile fields of the .info) and the chip.
struct MindSporeRun {
  int first_device = 0;            ///< rank r runs on device first_device + r (deviceId, stem suffix)
  std::int64_t first_job_id = 1;   ///< job_id of the first kernel of rank 0; then one per kernel
  std::int64_t source_id_base = 0; ///< source_id = source_id_base + device
  std::string debug_dir_prefix = "./";  ///< op_debug_dir = prefix + "rank_<r>/"
  std::string full_name_scope = "Default";
  std::string py_module_path = "/usr/local/Ascend/opp/op_impl/built-in/ai_core/tbe";
  std::string soc_version = "Ascend910B1";
};

/// One kernel triple written for one rank.
struct MindSporeKernel {
  int rank = 0;
  int device = 0;
  std::string stem;     ///< func_name + "_" + hash + "_" + device
  std::string op_type;  ///< the op_list type, e.g. "Square"
  std::filesystem::path object;    ///< <stem>.o, a real compiled object
  std::filesystem::path metadata;  ///< <stem>.json: binFileName, kernelName, magic, sha256 of the .o
  std::filesystem::path info;      ///< <stem>.info: the compile job
  std::vector<std::filesystem::path> files() const { return {object, metadata, info}; }
};

/// The stem MindSpore gives `op` on `device`.
std::string mindspore_stem(const MindSporeOp& op, int device);

/// The .info document of `op` compiled as `rank` on `device` (job_content with
/// SocInfo, fusion_op_name, op_list = Data ops + the op, full_name; job_id, source_id).
nlohmann::json mindspore_info(const MindSporeOp& op, int rank, int device, std::int64_t job_id,
                              const MindSporeRun& run = {});

/// Writes `<kernel_meta>/<stem>.{o,json,info}` (creating the directory).
MindSporeKernel write_mindspore_kernel(const std::filesystem::path& kernel_meta, const MindSporeOp& op, int rank,
                                       int device, std::int64_t job_id, const MindSporeRun& run = {});

/// A multi-rank MindSpore cache: root/rank_<r>/kernel_meta/.
struct MindSporeTree {
  std::filesystem::path root;
  int ranks = 0;
  std::vector<MindSporeKernel> kernels;  ///< rank-major: kernels[rank * ops + op]

  std::filesystem::path kernel_meta(int rank) const;
  /// The kernel of op number `op` (in the order given) on `rank`.
  const MindSporeKernel& at(int rank, std::size_t op) const;
};

/// Writes rank_0 .. rank_{ranks-1}/kernel_meta/ under `root`, every op on
/// every rank: identical objects and jobs except for the volatile fields.
MindSporeTree write_mindspore_tree(const std::filesystem::path& root, int ranks, const std::vector<MindSporeOp>& ops,
                                   const MindSporeRun& run = {});

/// Five operators of a small network (Square, Relu, Neg, Add, ReduceSum),
/// with different shapes, dtypes and attributes.
std::vector<MindSporeOp> sample_mindspore_ops();

// ---------------------------------------------------------------------------
// CANN op compile cache

/// One operator compiled by CANN.
struct CannOp {
  std::string op_type;                 ///< "MatMulV2"
  std::vector<std::int64_t> shape{16, 16};
  std::string dtype = "float16";
};

/// One te_<optype>_<sha256>.{o,json} pair.
struct CannKernel {
  std::string name;       ///< "te_matmulv2_<64 hex>"
  std::string op_type;    ///< as in the name: lowercase, '-' -> '_'
  std::filesystem::path object;
  std::filesystem::path metadata;
  std::vector<std::filesystem::path> files() const { return {object, metadata}; }
};

/// A CANN `--op_compiler_cache_dir`: op_cache.ini and kernel_cache/<soc>/ pairs.
struct CannCache {
  std::filesystem::path root;
  std::string soc;
  std::filesystem::path ini;  ///< root/op_cache.ini
  std::vector<CannKernel> kernels;
  std::filesystem::path soc_dir() const { return root / "kernel_cache" / soc; }
};

/// Writes one pair into `soc_dir` (created): the .o first, the .json (with
/// the .o's sha256) last, as CANN does.
CannKernel write_cann_kernel(const std::filesystem::path& soc_dir, const CannOp& op, const std::string& soc);

/// Writes root/op_cache.ini (adk_version, ops_version, aging settings) and
/// every op under root/kernel_cache/<soc>/.
CannCache write_cann_cache(const std::filesystem::path& root, const std::string& soc, const std::vector<CannOp>& ops,
                           const std::string& adk_version = "8.0.RC2", const std::string& ops_version = "8.0.RC2");

/// Three operators (MatMulV2, Add, Cast).
std::vector<CannOp> sample_cann_ops();

// ---------------------------------------------------------------------------
// torchair static kernels

/// One per-operator statistics file (e.g. MatMulV2_float_ND_1_2048_0.json).
struct TorchairStat {
  std::string file_name;
  nlohmann::json content;
};

/// Statistics of a small model: MatMulV2, Add, Softmax.
std::vector<TorchairStat> sample_torchair_stats();

/// One aclnn_static_shape_kernel_outputs/<timestamp>_<pid>_outputs directory.
struct TorchairOutputs {
  std::filesystem::path dir;        ///< .../<timestamp>_<pid>_outputs
  std::filesystem::path stats_dir;  ///< dir/<pid>
  std::filesystem::path debug_dir;  ///< dir/<pid>_debug (every operator of the model)
  std::filesystem::path run;        ///< dir/static_kernel_<datetime>.run
  std::vector<std::filesystem::path> stats;  ///< stats_dir/*.json, sorted
};

/// Writes `<build_dir>/aclnn_static_shape_kernel_outputs/<timestamp>_<pid>_outputs/`
/// with `stats` in <pid>/ (and again, plus an extra operator, in <pid>_debug/)
/// and a static_kernel_<datetime>.run package: a makeself-style shell header
/// followed by a tar.gz of real compiled objects, one per statistics file.
TorchairOutputs write_torchair_outputs(const std::filesystem::path& build_dir, const std::string& timestamp, int pid,
                                       const std::string& datetime, const std::vector<TorchairStat>& stats);

}  // namespace opcache::test
