#include "refcc/op_descriptor.hpp"

#include <set>

#include "base/json_parse.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

namespace {

using json = nlohmann::json;

const std::set<std::string, std::less<>> k_formats = {"ND", "NCHW", "NHWC"};

Status check_members(const json& value, const std::string& origin, const std::set<std::string, std::less<>>& allowed,
                     const char* what) {
  for (const auto& [name, member] : value.items()) {
    if (allowed.count(name) == 0) {
      std::string list;
      for (const auto& a : allowed) {
        list += (list.empty() ? "" : ", ") + a;
      }
      return Error::usage(origin + ": unknown " + what + " member \"" + name + "\" (allowed: " + list + ")");
    }
  }
  return {};
}

Result<Shape> parse_shape(const json& value, const std::string& origin, bool static_only) {
  if (!value.is_array()) {
    return Error::usage(origin + " must be an array of integers");
  }
  if (value.size() > k_max_rank) {
    return Error::usage(origin + " has rank " + std::to_string(value.size()) +
                        "; refcc supports rank <= " + std::to_string(k_max_rank));
  }
  Shape shape;
  for (const auto& dim : value) {
    if (!dim.is_number_integer()) {
      return Error::usage(origin + " must contain integers only, got " + dim.dump());
    }
    const auto d = dim.get<std::int64_t>();
    if (static_only && d < 1) {
      return Error::usage(origin + " " + value.dump() + " has dimension " + std::to_string(d) +
                          "; refcc compiles static shapes only (every dimension >= 1)");
    }
    shape.push_back(d);
  }
  if (static_only) {
    std::int64_t count = 1;
    for (auto d : shape) {
      if (d > k_max_elements / count) {
        return Error::usage(origin + " " + value.dump() + " has more than 2^40 elements");
      }
      count *= d;
    }
  }
  return shape;
}

Result<TensorDesc> parse_tensor(const json& value, const std::string& origin) {
  if (!value.is_object()) {
    return Error::usage(origin + " must be an object with shape and dtype");
  }
  OPCACHE_TRY(check_members(value, origin, {"shape", "dtype", "format", "ori_shape", "ori_format", "name"}, "tensor"));
  TensorDesc tensor;
  if (!value.contains("shape")) {
    return Error::usage(origin + " has no \"shape\"");
  }
  OPCACHE_TRY_ASSIGN(tensor.shape, parse_shape(value["shape"], origin + ".shape", true));
  if (!value.contains("dtype") || !value["dtype"].is_string()) {
    return Error::usage(origin + " needs a string \"dtype\" (float32, float16 or int32)");
  }
  auto dtype = parse_dtype(value["dtype"].get<std::string>());
  if (!dtype) {
    return Error::usage(origin + ".dtype \"" + value["dtype"].get<std::string>() +
                        "\" is not supported (supported: float32, float16, int32)");
  }
  tensor.dtype = *dtype;
  if (value.contains("format")) {
    if (!value["format"].is_string() || k_formats.count(value["format"].get<std::string>()) == 0) {
      return Error::usage(origin + ".format " + value["format"].dump() +
                          " is not supported (refcc implements the layouts ND, NCHW, NHWC)");
    }
    tensor.format = value["format"].get<std::string>();
    if (tensor.format != "ND" && tensor.shape.size() != 4) {
      return Error::usage(origin + ".format " + tensor.format + " needs a rank-4 shape, got " +
                          shape_text(tensor.shape) + " (use ND)");
    }
  }
  if (value.contains("ori_shape")) {
    OPCACHE_TRY_ASSIGN(tensor.ori_shape, parse_shape(value["ori_shape"], origin + ".ori_shape", false));
  }
  if (value.contains("ori_format")) {
    if (!value["ori_format"].is_string()) {
      return Error::usage(origin + ".ori_format must be a string");
    }
    tensor.ori_format = value["ori_format"].get<std::string>();
  }
  if (value.contains("name") && !value["name"].is_string()) {
    return Error::usage(origin + ".name must be a string");
  }
  return tensor;
}

Result<std::vector<TensorDesc>> parse_tensors(const json& value, const std::string& origin) {
  if (!value.is_array()) {
    return Error::usage(origin + " must be an array of tensors");
  }
  std::vector<TensorDesc> tensors;
  for (std::size_t i = 0; i < value.size(); ++i) {
    OPCACHE_TRY_ASSIGN(auto tensor, parse_tensor(value[i], origin + "[" + std::to_string(i) + "]"));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

}  // namespace

const char* dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::float32:
      return "float32";
    case DType::float16:
      return "float16";
    case DType::int32:
      return "int32";
  }
  return "?";
}

int dtype_size(DType dtype) noexcept {
  return dtype == DType::float16 ? 2 : 4;
}

bool is_float(DType dtype) noexcept {
  return dtype != DType::int32;
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "float32") {
    return DType::float32;
  }
  if (name == "float16") {
    return DType::float16;
  }
  if (name == "int32") {
    return DType::int32;
  }
  return std::nullopt;
}

Result<OpDescriptor> parse_op_descriptor(const json& value, const std::string& origin) {
  if (!value.is_object()) {
    return Error::usage(origin + ": an op descriptor must be a JSON object with \"op_type\"");
  }
  OPCACHE_TRY(check_members(value, origin, {"op_type", "name", "inputs", "outputs", "attrs", "options"}, "descriptor"));
  OpDescriptor op;
  if (!value.contains("op_type") || !value["op_type"].is_string() || value["op_type"].get<std::string>().empty()) {
    return Error::usage(origin + ": missing or empty string \"op_type\"");
  }
  op.op_type = value["op_type"].get<std::string>();
  if (value.contains("name")) {
    if (!value["name"].is_string()) {
      return Error::usage(origin + ": \"name\" must be a string");
    }
    op.name = value["name"].get<std::string>();
  }
  if (!value.contains("inputs")) {
    return Error::usage(origin + ": missing \"inputs\" (an array of {shape, dtype[, format]})");
  }
  OPCACHE_TRY_ASSIGN(op.inputs, parse_tensors(value["inputs"], origin + ": inputs"));
  if (value.contains("outputs")) {
    OPCACHE_TRY_ASSIGN(op.outputs, parse_tensors(value["outputs"], origin + ": outputs"));
  }
  if (value.contains("attrs")) {
    if (!value["attrs"].is_object()) {
      return Error::usage(origin + ": \"attrs\" must be an object");
    }
    op.attrs = value["attrs"];
  }
  if (value.contains("options")) {
    if (!value["options"].is_object()) {
      return Error::usage(origin + ": \"options\" must be an object");
    }
    op.options = value["options"];
  }
  return op;
}

Result<OpDescriptor> load_op_descriptor(const std::string& path) {
  OPCACHE_TRY_ASSIGN(auto value, base::load_json_file(path));
  return parse_op_descriptor(value, path);
}

json tensor_to_json(const TensorDesc& tensor) {
  json value = {{"shape", tensor.shape}, {"dtype", dtype_name(tensor.dtype)}, {"format", tensor.format}};
  if (tensor.ori_shape) {
    value["ori_shape"] = *tensor.ori_shape;
  }
  if (tensor.ori_format) {
    value["ori_format"] = *tensor.ori_format;
  }
  return value;
}

json descriptor_to_json(const OpDescriptor& op) {
  json value = {{"op_type", op.op_type}, {"inputs", json::array()}, {"attrs", op.attrs}};
  for (const auto& tensor : op.inputs) {
    value["inputs"].push_back(tensor_to_json(tensor));
  }
  if (op.outputs) {
    value["outputs"] = json::array();
    for (const auto& tensor : *op.outputs) {
      value["outputs"].push_back(tensor_to_json(tensor));
    }
  }
  if (!op.options.empty()) {
    value["options"] = op.options;
  }
  return value;
}

std::int64_t element_count(const Shape& shape) noexcept {
  std::int64_t count = 1;
  for (auto d : shape) {
    count *= d;
  }
  return count;
}

std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i ? "," : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

Shape row_major_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) {
    strides[i - 1] = strides[i] * shape[i];
  }
  return strides;
}

}  // namespace opcache::refcc
