// refcc — op descriptors: the JSON object that says which operator to compile
// (op type, input/output tensors, attributes, options), parsed strictly.
//
//   {"op_type": "MatMul",
//    "inputs":  [{"shape": [64, 128], "dtype": "float32", "format": "ND"}, ...],
//    "outputs": [{"shape": [64, 256], "dtype": "float32", "format": "ND"}],
//    "attrs":   {"transpose_a": false, "transpose_b": true},
//    "options": {}}
//
// Parsing only checks the generic structure; what an op type accepts is checked
// by prepare_op() (op_registry.hpp), which also fills in outputs and defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"

namespace opcache::refcc {

/// Element types refcc generates code for.
enum class DType { float32, float16, int32 };

/// "float32", "float16" or "int32".
const char* dtype_name(DType dtype) noexcept;

/// Size of one element in bytes.
int dtype_size(DType dtype) noexcept;

/// True for float32 and float16.
bool is_float(DType dtype) noexcept;

/// Parses a dtype name; std::nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);

using Shape = std::vector<std::int64_t>;

/// Largest rank and element count refcc accepts (keeps every offset in int64).
inline constexpr std::size_t k_max_rank = 8;
inline constexpr std::int64_t k_max_elements = std::int64_t{1} << 40;

/// One input or output tensor.
struct TensorDesc {
  Shape shape;  ///< static, every dimension >= 1; [] is a scalar
  DType dtype = DType::float32;
  std::string format = "ND";              ///< ND, NCHW or NHWC (layouts refcc understands)
  std::optional<Shape> ori_shape;         ///< kept as given (metadata, hashed)
  std::optional<std::string> ori_format;  ///< kept as given (metadata, hashed)

  bool operator==(const TensorDesc& other) const = default;
};

/// A parsed descriptor. `outputs` is absent when the descriptor did not list
/// them; prepare_op() infers them then.
struct OpDescriptor {
  std::string op_type;
  std::string name;  ///< optional instance name ("layer1.0.conv1"); not part of the kernel, never hashed
  std::vector<TensorDesc> inputs;
  std::optional<std::vector<TensorDesc>> outputs;
  nlohmann::json attrs = nlohmann::json::object();
  nlohmann::json options = nlohmann::json::object();  ///< implementation options, hashed as given
};

/// Parses a descriptor object. Unknown members (top level or in a tensor) are
/// rejected so a typo cannot silently produce another kernel. Errors are
/// `usage` and start with `origin` (a file name, "ops[3]").
Result<OpDescriptor> parse_op_descriptor(const nlohmann::json& value, const std::string& origin);

/// Reads and parses a descriptor file.
Result<OpDescriptor> load_op_descriptor(const std::string& path);

/// The JSON form of a tensor (optional members only when present).
nlohmann::json tensor_to_json(const TensorDesc& tensor);

/// The JSON form of a descriptor without its instance name: the object that
/// refcc hands to opcache (after prepare_op() this is the normalized descriptor).
nlohmann::json descriptor_to_json(const OpDescriptor& op);

/// Number of elements (1 for a scalar).
std::int64_t element_count(const Shape& shape) noexcept;

/// "[2,3,4]".
std::string shape_text(const Shape& shape);

/// Row-major strides of `shape` in elements.
Shape row_major_strides(const Shape& shape);

}  // namespace opcache::refcc
