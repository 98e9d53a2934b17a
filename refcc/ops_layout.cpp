// Layout ops: Transpose (a permutation of the dimensions).
#include <string>

#include "refcc/codegen.hpp"
#include "refcc/op_registry.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

namespace {

Result<std::vector<std::int64_t>> transpose_perm(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 1, 1, "x"));
  const Shape& x = op.inputs[0].shape;
  OPCACHE_TRY(attrs.alias("input_perm", "perm"));
  if (!attrs.has("perm")) {
    return Error::usage("Transpose needs attribute \"perm\" (a permutation of 0.." + std::to_string(x.size()) + ")");
  }
  OPCACHE_TRY_ASSIGN(auto perm, attrs.int_list("perm", {}));
  if (perm.size() != x.size()) {
    return Error::usage(attrs.where("perm") + " has " + std::to_string(perm.size()) + " entries but x " +
                        shape_text(x) + " has rank " + std::to_string(x.size()));
  }
  std::vector<bool> seen(x.size(), false);
  for (auto& axis : perm) {
    OPCACHE_TRY_ASSIGN(axis, normalize_axis(axis, x.size(), attrs.where("perm") + " entry"));
    if (seen[static_cast<std::size_t>(axis)]) {
      return Error::usage(attrs.where("perm") + " is not a permutation: " + std::to_string(axis) + " appears twice");
    }
    seen[static_cast<std::size_t>(axis)] = true;
  }
  attrs.set("perm", perm);
  return perm;
}

Result<std::vector<TensorDesc>> infer_transpose(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY_ASSIGN(auto perm, transpose_perm(op, attrs));
  Shape shape;
  for (auto axis : perm) {
    shape.push_back(op.inputs[0].shape[static_cast<std::size_t>(axis)]);
  }
  return std::vector<TensorDesc>{output_like(op, shape, op.inputs[0].dtype)};
}

void emit_transpose(const OpDescriptor& op, CWriter& c) {
  AttrReader attrs(op.attrs, op.op_type);
  const auto perm = transpose_perm(op, attrs).value();
  const Shape& x = op.inputs[0].shape;
  const Shape& y = (*op.outputs)[0].shape;
  const Shape x_strides = row_major_strides(x);
  Shape read_strides;
  for (auto axis : perm) {
    read_strides.push_back(x_strides[static_cast<std::size_t>(axis)]);
  }
  auto nest = open_loops(c, y, {read_strides, row_major_strides(y)}, "i");
  c.line(out(0) + "[" + nest.offsets[1] + "] = " + in(0) + "[" + nest.offsets[0] + "];");
  close_loops(c, nest);
}

}  // namespace

void add_layout_ops(std::vector<OpDef>& table) {
  table.push_back(
      {"Transpose", "transpose", "x; any dtype; attrs perm (required permutation)", infer_transpose, emit_transpose});
}

}  // namespace opcache::refcc
