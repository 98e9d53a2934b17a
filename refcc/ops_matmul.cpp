// MatMul / BatchMatMul: y[..., M, N] = op(a)[..., M, K] x op(b)[..., K, N] (+ bias[N]),
// op = transpose of the last two dimensions when transpose_a / transpose_b;
// batch dimensions broadcast numpy-style (a 2-D b is shared by every batch).
#include <string>

#include "refcc/codegen.hpp"
#include "refcc/op_registry.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

namespace {

struct MatMulParams {
  bool transpose_a = false;
  bool transpose_b = false;
  std::int64_t m = 1, k = 1, n = 1;
  Shape batch;  // broadcast batch dimensions of the output
  Shape a_batch_strides, b_batch_strides, y_batch_strides;
  bool bias = false;
};

Shape scaled(Shape strides, std::int64_t factor) {
  for (auto& s : strides) {
    s *= factor;
  }
  return strides;
}

std::string k_source(const char* operand, const Shape& shape, bool transposed) {
  return std::string(operand) + " " + shape_text(shape) +
         " gives K = " + std::to_string(transposed == (operand[0] == 'a') ? shape[shape.size() - 2] : shape.back()) +
         " (transpose_" + operand + "=" + (transposed ? "true" : "false") + ")";
}

Result<MatMulParams> matmul_params(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 2, 3, "a, b[, bias]"));
  OPCACHE_TRY(expect_dtype(op, 0, {DType::float32, DType::float16, DType::int32}));
  OPCACHE_TRY(expect_same_dtype(op));
  OPCACHE_TRY(attrs.alias("transpose_x1", "transpose_a"));
  OPCACHE_TRY(attrs.alias("transpose_x2", "transpose_b"));
  MatMulParams p;
  OPCACHE_TRY_ASSIGN(p.transpose_a, attrs.boolean("transpose_a", false));
  OPCACHE_TRY_ASSIGN(p.transpose_b, attrs.boolean("transpose_b", false));
  const Shape& a = op.inputs[0].shape;
  const Shape& b = op.inputs[1].shape;
  if (a.size() < 2 || b.size() < 2) {
    return Error::usage(op.op_type + ": a and b need rank >= 2, got a " + shape_text(a) + " and b " + shape_text(b));
  }
  const std::int64_t a_rows = a[a.size() - 2], a_cols = a.back();
  const std::int64_t b_rows = b[b.size() - 2], b_cols = b.back();
  p.m = p.transpose_a ? a_cols : a_rows;
  p.k = p.transpose_a ? a_rows : a_cols;
  const std::int64_t k_b = p.transpose_b ? b_cols : b_rows;
  p.n = p.transpose_b ? b_rows : b_cols;
  if (p.k != k_b) {
    return Error::usage(op.op_type + ": inner dimensions do not match: " + k_source("a", a, p.transpose_a) + " but " +
                        k_source("b", b, p.transpose_b));
  }
  const Shape a_batch(a.begin(), a.end() - 2);
  const Shape b_batch(b.begin(), b.end() - 2);
  OPCACHE_TRY_ASSIGN(p.batch, broadcast_shapes(a_batch, b_batch, op.op_type + " batch dimensions"));
  p.a_batch_strides = scaled(broadcast_strides(a_batch, p.batch), p.m * p.k);
  p.b_batch_strides = scaled(broadcast_strides(b_batch, p.batch), p.k * p.n);
  p.y_batch_strides = scaled(row_major_strides(p.batch), p.m * p.n);
  p.bias = op.inputs.size() == 3;
  if (p.bias && op.inputs[2].shape != Shape{p.n}) {
    return Error::usage(op.op_type + ": bias must have shape [" + std::to_string(p.n) + "], got " +
                        shape_text(op.inputs[2].shape));
  }
  return p;
}

Result<std::vector<TensorDesc>> infer_matmul(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY_ASSIGN(auto p, matmul_params(op, attrs));
  Shape shape = p.batch;
  shape.push_back(p.m);
  shape.push_back(p.n);
  return std::vector<TensorDesc>{output_like(op, shape, op.inputs[0].dtype)};
}

void emit_matmul(const OpDescriptor& op, CWriter& c) {
  AttrReader attrs(op.attrs, op.op_type);
  const MatMulParams p = matmul_params(op, attrs).value();
  const DType dtype = op.inputs[0].dtype;
  const std::string m = std::to_string(p.m), k = std::to_string(p.k), n = std::to_string(p.n);
  auto nest = open_loops(c, p.batch, {p.a_batch_strides, p.b_batch_strides, p.y_batch_strides}, "b");
  c.open("for (int64_t i = 0; i < " + m + "; ++i)");
  c.open("for (int64_t j = 0; j < " + n + "; ++j)");
  c.line(std::string(c_compute_type(dtype)) + " acc = " + (p.bias ? load(dtype, in(2), "j") : "0") + ";");
  c.open("for (int64_t k = 0; k < " + k + "; ++k)");
  const std::string a_index = add_offsets(nest.offsets[0], p.transpose_a ? "k * " + m + " + i" : "i * " + k + " + k");
  const std::string b_index = add_offsets(nest.offsets[1], p.transpose_b ? "j * " + k + " + k" : "k * " + n + " + j");
  c.line("acc += " + load(dtype, in(0), a_index) + " * " + load(dtype, in(1), b_index) + ";");
  c.close();
  c.line(out(0) + "[" + add_offsets(nest.offsets[2], "i * " + n + " + j") + "] = " + to_storage(dtype, "acc") + ";");
  c.close();
  c.close();
  close_loops(c, nest);
}

}  // namespace

void add_matmul_ops(std::vector<OpDef>& table) {
  constexpr const char* k_summary =
      "a [..., M, K], b [..., K, N] (batch dims broadcast), optional bias [N]; float32, float16, int32; "
      "attrs transpose_a, transpose_b (false)";
  table.push_back({"MatMul", "mat_mul", k_summary, infer_matmul, emit_matmul});
  table.push_back({"BatchMatMul", "batch_matmul", k_summary, infer_matmul, emit_matmul});
}

}  // namespace opcache::refcc
