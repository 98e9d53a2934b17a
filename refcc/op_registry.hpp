// refcc — the table of supported op types and the preparation step that turns
// a parsed descriptor into a complete, validated, normalized one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/result.hpp"
#include "refcc/attrs.hpp"
#include "refcc/op_descriptor.hpp"

namespace opcache::refcc {

class CWriter;

/// One op type. `infer` checks the inputs and attributes (reading them through
/// `attrs`, which records the normalized values) and returns the outputs;
/// `emit` writes the kernel body for a prepared op, whose attributes are the
/// normalized ones and whose outputs are set. Both are pure functions.
struct OpDef {
  std::string_view op_type;    ///< "MatMul"
  std::string_view func_name;  ///< "mat_mul": first part of the kernel file stem
  std::string_view summary;    ///< inputs and attributes, for `refcc ops` and errors
  Result<std::vector<TensorDesc>> (*infer)(const OpDescriptor& op, AttrReader& attrs);
  void (*emit)(const OpDescriptor& op, CWriter& out);
};

/// Every supported op type, in a stable order. Immutable; thread-safe.
const std::vector<OpDef>& op_registry();

/// The definition of `op_type`, or a `usage` error naming it and listing the
/// supported op types.
Result<const OpDef*> find_op(std::string_view op_type);

/// A descriptor ready to compile: validated, attributes normalized (defaults
/// filled in, aliases resolved), outputs inferred or checked against the
/// given ones. `descriptor` is the JSON refcc hands to opcache: two descriptors
/// that describe the same kernel differently (attribute order, defaults left
/// out, axis -1 vs rank-1) prepare to the same JSON.
struct PreparedOp {
  OpDescriptor op;
  const OpDef* def = nullptr;
  nlohmann::json descriptor;
};

/// Prepares `op`; errors are `usage` and start with `origin`.
Result<PreparedOp> prepare_op(const OpDescriptor& op, const std::string& origin);

// Registration of the op families (one file each).
void add_elementwise_ops(std::vector<OpDef>& table);
void add_matmul_ops(std::vector<OpDef>& table);
void add_conv_ops(std::vector<OpDef>& table);
void add_reduce_ops(std::vector<OpDef>& table);
void add_norm_ops(std::vector<OpDef>& table);
void add_layout_ops(std::vector<OpDef>& table);

// Helpers shared by the op families.

/// `usage` error unless `op` has between `min` and `max` inputs.
Status expect_inputs(const OpDescriptor& op, std::size_t min, std::size_t max, const char* names);

/// `usage` error unless every input from `first` on has the dtype of input 0.
Status expect_same_dtype(const OpDescriptor& op, std::size_t first = 1);

/// The floating-point dtypes refcc generates code for.
inline constexpr std::initializer_list<DType> k_float_dtypes = {DType::float32, DType::float16};

/// `usage` error unless input `index` has one of `allowed` dtypes.
Status expect_dtype(const OpDescriptor& op, std::size_t index, std::initializer_list<DType> allowed);

/// An output tensor with `shape` and `dtype` in the format of input 0 (ND for
/// a rank that does not fit a 4-D format).
TensorDesc output_like(const OpDescriptor& op, Shape shape, DType dtype);

/// The numpy broadcast of two shapes, or a `usage` error naming both.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b, const std::string& what);

/// Strides (in elements) of a tensor of shape `in` read as the broadcast
/// shape `out` (right-aligned; 0 where `in` is broadcast).
Shape broadcast_strides(const Shape& in, const Shape& out);

}  // namespace opcache::refcc
