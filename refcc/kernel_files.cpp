#include "refcc/kernel_files.hpp"

#include <cstdint>
#include <cstdlib>
#include <fstream>

#include "refcc/op_registry.hpp"
#include "base/file_io.hpp"
#include "base/json_parse.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json tensor_desc(const TensorDesc& tensor, const std::string& name) {
  json range = json::array();
  for (auto d : tensor.shape) {
    range.push_back({d, d});
  }
  json desc = {{"data_type", dtype_name(tensor.dtype)},
               {"format", tensor.format},
               {"ori_format", tensor.ori_format.value_or(tensor.format)},
               {"shape", tensor.shape},
               {"ori_shape", tensor.ori_shape.value_or(tensor.shape)},
               {"range", range},
               {"param_type", "required"}};
  if (!name.empty()) {
    desc["name"] = name;
  }
  return desc;
}

// Replaces `target` with `contents` through a temp file and a rename. No
// fsync: kernel_meta is a derived copy; the durable copy is in the cache.
Status replace_file(const fs::path& target, const std::string& contents) {
  const fs::path temp =
      target.parent_path() / ("." + target.filename().string() + "." + base::random_token() + ".tmp");
  std::error_code ec;
  {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    file.close();
    if (!file) {
      fs::remove(temp, ec);
      return Error::io("cannot write " + temp.string() + " (is the output directory writable and the disk not full?)");
    }
  }
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove(temp, ec);
    return Error::io("cannot publish " + target.string() + ": " + ec.message());
  }
  return {};
}

}  // namespace

std::string KernelNames::stem(int device_id) const {
  return neutral_stem + "_" + std::to_string(device_id);
}

KernelNames kernel_names(std::string_view func_name, std::string_view key) {
  KernelNames names;
  names.func_name = std::string(func_name);
  names.hash = std::to_string(std::strtoull(std::string(key.substr(0, 16)).c_str(), nullptr, 16));
  names.neutral_stem = names.func_name + "_" + names.hash;
  names.symbol = names.neutral_stem + "__kernel0";
  return names;
}

json kernel_metadata(const KernelNames& names, const PreparedOp& prepared, const std::string& object_sha256) {
  const std::size_t arguments = prepared.op.inputs.size() + prepared.op.outputs->size();
  return {{"batchBindOnly", 1},
          {"binFileName", names.neutral_stem},
          {"binFileSuffix", ".o"},
          {"blockDim", 1},
          {"build_result", ""},
          {"kernelName", names.symbol},
          {"magic", "RT_DEV_BINARY_MAGIC_ELF"},
          {"opParaSize", 0},
          {"parameters", json(std::vector<int>(arguments, 0))},
          {"sha256", object_sha256},
          {"workspace", {{"num", 0}, {"size", json::array()}, {"type", json::array()}}}};
}

json scenario_json(const Scenario& scenario) {
  return json::parse(scenario_canonical_json(scenario));
}

json compile_job(const KernelNames& names, const PreparedOp& prepared, const Scenario& scenario) {
  const OpDescriptor& op = prepared.op;
  json op_list = json::array();
  json input_desc = json::array();
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    const std::string name = "x_" + std::to_string(i);
    json data = {{"name", name}, {"type", "Data"}, {"output_desc", json::array({tensor_desc(op.inputs[i], "")})}};
    op_list.push_back(data);
    input_desc.push_back(tensor_desc(op.inputs[i], name));
  }
  json output_desc = json::array();
  for (std::size_t i = 0; i < op.outputs->size(); ++i) {
    output_desc.push_back(tensor_desc((*op.outputs)[i], "y_" + std::to_string(i)));
  }
  json attr_desc = json::array();
  for (const auto& [name, value] : op.attrs.items()) {
    attr_desc.push_back({{"name", name}, {"valid", true}, {"value", value}});
  }
  op_list.push_back({{"build_type", "accurately_build"},
                     {"func_name", names.func_name},
                     {"module_name", "refcc." + names.func_name},
                     {"input_desc", input_desc},
                     {"output_desc", output_desc},
                     {"attr_desc", attr_desc},
                     {"pattern", "Opaque"},
                     {"type", op.op_type},
                     {"unknown_shape", false}});
  json soc = {{"autoTilingMode", "NO_TUNE"}, {"coreNum", ""},      {"l1Fusion", "false"},       {"l2Mode", "2"},
              {"op_debug_level", "0"},       {"op_impl_mode", ""}, {"socVersion", scenario.soc}};
  json content = {{"SocInfo", soc},
                  {"full_name", "Default/" + op.op_type},
                  {"fusion_op_name", names.neutral_stem},
                  {"op_list", op_list},
                  {"scope_id", -1},
                  {"refcc_descriptor", prepared.descriptor},
                  {"refcc_scenario", scenario_json(scenario)}};
  return {{"job_content", content}, {"job_id", 1}, {"job_type", "Compile"}};
}

Status write_neutral_metadata(const fs::path& dir, const KernelNames& names, const PreparedOp& prepared,
                              const Scenario& scenario) {
  OPCACHE_TRY_ASSIGN(auto object, base::read_file(dir / (names.neutral_stem + ".o")));
  const json metadata = kernel_metadata(names, prepared, base::sha256_hex(object));
  OPCACHE_TRY(replace_file(dir / (names.neutral_stem + ".info"), compile_job(names, prepared, scenario).dump()));
  return replace_file(dir / (names.neutral_stem + ".json"), metadata.dump());
}

Result<std::vector<fs::path>> publish_kernel(const fs::path& stage, const fs::path& out_dir, const KernelNames& names,
                                             int device_id) {
  const std::string stem = names.stem(device_id);
  const fs::path object_in = stage / (names.neutral_stem + ".o");
  OPCACHE_TRY_ASSIGN(auto object, base::read_file(object_in));
  OPCACHE_TRY_ASSIGN(json metadata, base::load_json_file(stage / (names.neutral_stem + ".json")));
  OPCACHE_TRY_ASSIGN(json job, base::load_json_file(stage / (names.neutral_stem + ".info")));
  if (!metadata.is_object() || metadata.value("sha256", "") != base::sha256_hex(object)) {
    return Error::corrupt("kernel " + names.neutral_stem + ": the sha256 in its .json does not match its .o");
  }
  if (!job.is_object() || !job.contains("job_content") || !job["job_content"].is_object()) {
    return Error::corrupt("kernel " + names.neutral_stem + ": its .info has no job_content");
  }
  metadata["binFileName"] = stem;
  job["job_content"]["fusion_op_name"] = stem;
  job["job_content"]["SocInfo"]["deviceId"] = std::to_string(device_id);
  job["source_id"] = device_id;

  const fs::path object_out = out_dir / (stem + ".o");
  const fs::path metadata_out = out_dir / (stem + ".json");
  const fs::path info_out = out_dir / (stem + ".info");
  std::error_code ec;
  fs::rename(object_in, object_out, ec);
  if (ec) {
    return Error::io("cannot move " + object_in.string() + " to " + object_out.string() + ": " + ec.message());
  }
  OPCACHE_TRY(replace_file(info_out, job.dump()));
  OPCACHE_TRY(replace_file(metadata_out, metadata.dump()));
  return std::vector<fs::path>{object_out, metadata_out, info_out};
}

}  // namespace opcache::refcc
