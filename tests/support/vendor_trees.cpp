#include "tests/support/vendor_trees.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>

#include "base/sha256.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Objects live for the whole test process so each kernel is compiled once.
TempDir& object_pool() {
  static TempDir pool;
  return pool;
}

std::string c_identifier(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    out += std::isalnum(c) ? static_cast<char>(c) : '_';
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out.front()))) {
    out.insert(0, "k_");
  }
  return out;
}

std::string expression_for(const std::string& op_type) {
  std::string lower;
  for (unsigned char c : op_type) {
    lower += static_cast<char>(std::tolower(c));
  }
  if (lower == "square") return "x[i] * x[i]";
  if (lower == "relu") return "x[i] > 0.0f ? x[i] : 0.0f";
  if (lower == "neg") return "-x[i]";
  if (lower == "add") return "x[i] + x[i + 1]";
  if (lower == "reducesum") return "y[0] + x[i]";
  if (lower == "cast") return "(float)(short)x[i]";
  if (lower == "softmax") return "x[i] * 0.5f + 0.25f";
  return "x[i] * 3.0f + 1.0f";
}

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (auto dim : shape) {
    count *= dim;
  }
  return count;
}

std::string read_bytes(const fs::path& path) {
  std::string bytes = read_text(path);
  if (bytes.empty()) {
    throw std::runtime_error("cannot read " + path.string());
  }
  return bytes;
}

void copy_object(const CompiledObject& object, const fs::path& target) {
  fs::create_directories(target.parent_path());
  write_text(target, object.bytes);
}

// A deterministic stand-in for the 64-bit std::hash MindSpore puts in stems.
std::string hash64_decimal(const std::string& text) {
  const std::string hex = base::sha256_hex(text).substr(0, 16);
  return std::to_string(std::stoull(hex, nullptr, 16));
}

json tensor_desc(const MindSporeOp& op, const std::string& name) {
  json range = json::array();
  for (auto dim : op.shape) {
    range.push_back({dim, dim});
  }
  return {{"name", name},     {"data_type", op.dtype}, {"dtype", op.dtype},  {"format", op.format},
          {"ori_format", "NCHW"}, {"shape", op.shape},  {"ori_shape", op.shape}, {"range", range},
          {"param_type", "required"}, {"valid", true}};
}

// The hashed part of the job (what MindSpore's stem hash covers): the op list
// without any name, device or path.
json stable_op_json(const MindSporeOp& op) {
  return {{"func_name", op.func_name}, {"type", op.type},     {"shape", op.shape},
          {"dtype", op.dtype},         {"format", op.format}, {"inputs", op.inputs},
          {"attrs", op.attrs}};
}

std::string lowercase_type(const std::string& op_type) {
  std::string out;
  for (unsigned char c : op_type) {
    out += c == '-' ? '_' : static_cast<char>(std::tolower(c));
  }
  return out;
}

}  // namespace

const CompiledObject& compiled_kernel(const std::string& symbol, const std::string& op_type, std::int64_t length) {
  static std::map<std::tuple<std::string, std::string, std::int64_t>, CompiledObject> cache;
  auto key = std::make_tuple(c_identifier(symbol), op_type, length);
  if (auto found = cache.find(key); found != cache.end()) {
    return found->second;
  }
  const std::string name = std::get<0>(key) + "_" + c_identifier(op_type) + "_" + std::to_string(length) + "_" +
                           std::to_string(cache.size());
  const std::string source = "void " + std::get<0>(key) + "(const float* x, float* y) {\n" +
                             "  for (int i = 0; i < " + std::to_string(length) + "; ++i) y[i] = " +
                             expression_for(op_type) + ";\n}\n";
  CompiledObject object;
  object.path = compile_object(object_pool().path(), name, source);
  object.bytes = read_bytes(object.path);
  object.sha256 = base::sha256_hex(object.bytes);
  return cache.emplace(key, std::move(object)).first->second;
}

// ---------------------------------------------------------------------------
// MindSpore

std::string mindspore_stem(const MindSporeOp& op, int device) {
  const std::string hash = op.hash.empty() ? hash64_decimal(stable_op_json(op).dump()) : op.hash;
  return op.func_name + "_" + hash + "_" + std::to_string(device);
}

json mindspore_info(const MindSporeOp& op, int rank, int device, std::int64_t job_id, const MindSporeRun& run) {
  json op_list = json::array();
  json inputs = json::array();
  for (int i = 0; i < op.inputs; ++i) {
    const std::string name = "x_" + std::to_string(i);
    json data_output = tensor_desc(op, name);
    data_output.erase("name");
    op_list.push_back({{"name", name}, {"type", "Data"}, {"output_desc", json::array({data_output})}});
    inputs.push_back(tensor_desc(op, name));
  }
  op_list.push_back({{"build_type", "accurately_build"},
                     {"func_name", op.func_name},
                     {"module_name", "impl." + op.func_name},
                     {"name", op.type + "-op" + std::to_string(job_id)},
                     {"input_desc", inputs},
                     {"output_desc", json::array({tensor_desc(op, "y")})},
                     {"attrs", op.attrs},
                     {"pattern", "Opaque"},
                     {"py_module_path", run.py_module_path},
                     {"type", op.type},
                     {"int64mode", false},
                     {"unknown_shape", false}});
  json soc_info = {{"autoTilingMode", "NO_TUNE"},
                   {"coreNum", ""},
                   {"deviceId", std::to_string(device)},
                   {"l1Fusion", "false"},
                   {"l2Fusion", "false"},
                   {"l2Mode", "2"},
                   {"op_debug_dir", run.debug_dir_prefix + "rank_" + std::to_string(rank) + "/"},
                   {"op_debug_level", "0"},
                   {"op_impl_mode", ""},
                   {"op_impl_mode_list", json::array()},
                   {"socVersion", run.soc_version}};
  return {{"job_content",
           {{"SocInfo", soc_info},
            {"full_name", run.full_name_scope + "/" + op.type + "-op" + std::to_string(job_id)},
            {"fusion_op_name", mindspore_stem(op, device)},
            {"op_list", op_list},
            {"scope_id", -1}}},
          {"job_id", job_id},
          {"job_type", "Compile"},
          {"source_id", run.source_id_base + device}};
}

MindSporeKernel write_mindspore_kernel(const fs::path& kernel_meta, const MindSporeOp& op, int rank, int device,
                                       std::int64_t job_id, const MindSporeRun& run) {
  MindSporeKernel kernel;
  kernel.rank = rank;
  kernel.device = device;
  kernel.stem = mindspore_stem(op, device);
  kernel.op_type = op.type;
  kernel.object = kernel_meta / (kernel.stem + ".o");
  kernel.metadata = kernel_meta / (kernel.stem + ".json");
  kernel.info = kernel_meta / (kernel.stem + ".info");

  // The same code on every device: the symbol leaves the device id out.
  const std::string hash = op.hash.empty() ? hash64_decimal(stable_op_json(op).dump()) : op.hash;
  const auto& object = compiled_kernel(op.func_name + "_" + hash + "__kernel0", op.type, element_count(op.shape));
  copy_object(object, kernel.object);

  json metadata = {{"batchBindOnly", 1},
                   {"binFileName", kernel.stem},
                   {"binFileSuffix", ".o"},
                   {"blockDim", 1},
                   {"build_result", ""},
                   {"coreType", "AiCore"},
                   {"kernelName", kernel.stem + "__kernel0"},
                   {"magic", "RT_DEV_BINARY_MAGIC_ELF"},
                   {"opParaSize", 0},
                   {"parameters", {0, 0}},
                   {"sha256", object.sha256},
                   {"workspace", {{"num", 0}, {"size", json::array()}, {"type", json::array()}}}};
  write_text(kernel.metadata, metadata.dump());
  write_text(kernel.info, mindspore_info(op, rank, device, job_id, run).dump());
  return kernel;
}

fs::path MindSporeTree::kernel_meta(int rank) const {
  return root / ("rank_" + std::to_string(rank)) / "kernel_meta";
}

const MindSporeKernel& MindSporeTree::at(int rank, std::size_t op) const {
  const std::size_t per_rank = kernels.size() / static_cast<std::size_t>(ranks);
  return kernels.at(static_cast<std::size_t>(rank) * per_rank + op);
}

MindSporeTree write_mindspore_tree(const fs::path& root, int ranks, const std::vector<MindSporeOp>& ops,
                                   const MindSporeRun& run) {
  MindSporeTree tree;
  tree.root = root;
  tree.ranks = ranks;
  std::int64_t job_id = run.first_job_id;
  for (int rank = 0; rank < ranks; ++rank) {
    for (const auto& op : ops) {
      tree.kernels.push_back(
          write_mindspore_kernel(tree.kernel_meta(rank), op, rank, run.first_device + rank, job_id++, run));
    }
  }
  return tree;
}

std::vector<MindSporeOp> sample_mindspore_ops() {
  std::vector<MindSporeOp> ops(5);
  ops[0].func_name = "square";
  ops[0].type = "Square";
  ops[0].shape = {3};
  ops[0].hash = "12484080525657478220";  // the real example's stem

  ops[1].func_name = "relu";
  ops[1].type = "ReLU";
  ops[1].shape = {16, 16};
  ops[1].dtype = "float16";

  ops[2].func_name = "neg";
  ops[2].type = "Neg";
  ops[2].shape = {1024};

  ops[3].func_name = "add";
  ops[3].type = "Add";
  ops[3].shape = {8, 128};
  ops[3].inputs = 2;

  ops[4].func_name = "reduce_sum_d";
  ops[4].type = "ReduceSumD";
  ops[4].shape = {32, 64};
  ops[4].format = "NCHW";
  ops[4].attrs = json::array({{{"name", "axis"}, {"dtype", "listInt"}, {"valid", true}, {"value", {1}}},
                              {{"name", "keep_dims"}, {"dtype", "bool"}, {"valid", true}, {"value", false}}});
  return ops;
}

// ---------------------------------------------------------------------------
// CANN

CannKernel write_cann_kernel(const fs::path& soc_dir, const CannOp& op, const std::string& soc) {
  // The name hashes the op JSON with the volatile fields already stripped.
  json op_json = {{"op_type", op.op_type},
                  {"socVersion", soc},
                  {"inputs", {{{"shape", op.shape}, {"dtype", op.dtype}, {"format", "ND"}}}},
                  {"outputs", {{{"shape", op.shape}, {"dtype", op.dtype}, {"format", "ND"}}}}};
  CannKernel kernel;
  kernel.op_type = lowercase_type(op.op_type);
  kernel.name = "te_" + kernel.op_type + "_" + base::sha256_hex(op_json.dump());
  kernel.object = soc_dir / (kernel.name + ".o");
  kernel.metadata = soc_dir / (kernel.name + ".json");
  const auto& object = compiled_kernel(kernel.name + "__kernel0", op.op_type, element_count(op.shape));
  copy_object(object, kernel.object);
  json metadata = {{"binFileName", kernel.name},
                   {"binFileSuffix", ".o"},
                   {"blockDim", 8},
                   {"coreType", "AiCore"},
                   {"kernelName", kernel.name + "__kernel0"},
                   {"magic", "RT_DEV_BINARY_MAGIC_ELF"},
                   {"opParaSize", 0},
                   {"parameters", json::array()},
                   {"sha256", object.sha256}};
  write_text(kernel.metadata, metadata.dump());  // last: the commit marker
  return kernel;
}

CannCache write_cann_cache(const fs::path& root, const std::string& soc, const std::vector<CannOp>& ops,
                           const std::string& adk_version, const std::string& ops_version) {
  CannCache cache;
  cache.root = root;
  cache.soc = soc;
  cache.ini = root / "op_cache.ini";
  write_text(cache.ini, "[op_compiler_cache]\nmax_op_cache_size=500\nremain_cache_size_ratio=50\n\n[version]\n"
                        "adk_version=" + adk_version + "\nops_version=" + ops_version + "\n");
  for (const auto& op : ops) {
    cache.kernels.push_back(write_cann_kernel(cache.soc_dir(), op, soc));
  }
  return cache;
}

std::vector<CannOp> sample_cann_ops() {
  return {{"MatMulV2", {16, 16}, "float16"}, {"Add", {4, 256}, "float32"}, {"Cast", {1024}, "float16"}};
}

// ---------------------------------------------------------------------------
// torchair

std::vector<TorchairStat> sample_torchair_stats() {
  auto tensor = [](std::vector<std::int64_t> shape, const std::string& dtype) {
    return json{{"shape", shape}, {"dtype", dtype}, {"format", "ND"}};
  };
  return {
      {"MatMulV2_float_ND_1_2048_0.json",
       {{"op_type", "MatMulV2"},
        {"inputs", {tensor({1, 2048}, "float"), tensor({2048, 2048}, "float")}},
        {"outputs", {tensor({1, 2048}, "float")}},
        {"attrs", {{"transpose_x1", false}, {"transpose_x2", false}, {"offset_x", 0}}},
        {"count", 24}}},
      {"Add_float_ND_1_2048_0.json",
       {{"op_type", "Add"},
        {"inputs", {tensor({1, 2048}, "float"), tensor({1, 2048}, "float")}},
        {"outputs", {tensor({1, 2048}, "float")}},
        {"attrs", json::object()},
        {"count", 48}}},
      {"SoftmaxV2_float_ND_1_32_0.json",
       {{"op_type", "SoftmaxV2"},
        {"inputs", {tensor({1, 32}, "float")}},
        {"outputs", {tensor({1, 32}, "float")}},
        {"attrs", {{"axes", {-1}}}},
        {"count", 12}}},
  };
}

TorchairOutputs write_torchair_outputs(const fs::path& build_dir, const std::string& timestamp, int pid,
                                       const std::string& datetime, const std::vector<TorchairStat>& stats) {
  TorchairOutputs outputs;
  const std::string pid_text = std::to_string(pid);
  outputs.dir = build_dir / "aclnn_static_shape_kernel_outputs" / (timestamp + "_" + pid_text + "_outputs");
  outputs.stats_dir = outputs.dir / pid_text;
  outputs.debug_dir = outputs.dir / (pid_text + "_debug");
  outputs.run = outputs.dir / ("static_kernel_" + datetime + ".run");
  fs::create_directories(outputs.stats_dir);
  fs::create_directories(outputs.debug_dir);

  // The package: one real object per compiled operator, tarred and gzipped
  // behind a self-extracting shell header.
  const fs::path staging = object_pool().path() / ("run_" + pid_text + "_" + datetime);
  fs::create_directories(staging);
  std::vector<std::string> tar_args{"tar", "-czf", (staging / "payload.tar.gz").string(), "-C", staging.string()};
  for (const auto& stat : stats) {
    outputs.stats.push_back(outputs.stats_dir / stat.file_name);
    write_text(outputs.stats.back(), stat.content.dump(2));
    write_text(outputs.debug_dir / stat.file_name, stat.content.dump(2));
    const std::string op_type = stat.content.value("op_type", std::string("Unknown"));
    const std::string base = fs::path(stat.file_name).stem().string();
    const auto& object = compiled_kernel(base + "__kernel0", op_type, 2048);
    copy_object(object, staging / "op_impl" / (base + ".o"));
  }
  tar_args.push_back("op_impl");
  write_text(outputs.debug_dir / "Cast_float16_ND_1_2048_0.json",
             json{{"op_type", "Cast"}, {"inputs", {{{"shape", {1, 2048}}, {"dtype", "float16"}}}}}.dump(2));
  auto tar = run_process(tar_args);
  if (tar.exit_code != 0) {
    throw std::runtime_error("tar failed: " + tar.err);
  }
  const std::string header =
      "#!/bin/sh\n"
      "# static kernel package built " + datetime + " (makeself-style: shell header, then tar.gz)\n"
      "ARCHIVE=$(awk '/^__ARCHIVE_BELOW__/ {print NR + 1; exit 0; }' \"$0\")\n"
      "tail -n +$ARCHIVE \"$0\" | tar -xz -C \"${1:-.}\"\n"
      "exit 0\n"
      "__ARCHIVE_BELOW__\n";
  write_text(outputs.run, header + read_bytes(staging / "payload.tar.gz"));
  fs::permissions(outputs.run, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
  std::sort(outputs.stats.begin(), outputs.stats.end());
  return outputs;
}

}  // namespace opcache::test
