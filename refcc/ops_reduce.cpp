// Reductions (ReduceSum, ReduceMax, ReduceMin, ReduceMean over a set of axes,
// keep_dims) and Softmax / LogSoftmax along one axis.
#include <algorithm>
#include <set>
#include <string>

#include "refcc/codegen.hpp"
#include "refcc/op_registry.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

namespace {

// ---------------------------------------------------------------------------
// ReduceSum / ReduceMax / ReduceMin / ReduceMean: axes (empty = all), keep_dims.

struct ReduceParams {
  std::vector<bool> reduced;  // per input dimension
  bool keep_dims = false;
};

Result<ReduceParams> reduce_params(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 1, 1, "x"));
  if (op.op_type == "ReduceMean") {
    OPCACHE_TRY(expect_dtype(op, 0, {DType::float32, DType::float16}));
  } else {
    OPCACHE_TRY(expect_dtype(op, 0, {DType::float32, DType::float16, DType::int32}));
  }
  OPCACHE_TRY(attrs.alias("axis", "axes"));
  OPCACHE_TRY(attrs.alias("keep_dim", "keep_dims"));
  const Shape& x = op.inputs[0].shape;
  OPCACHE_TRY_ASSIGN(auto given, attrs.int_list("axes", {}));
  ReduceParams p;
  p.reduced.assign(x.size(), given.empty());
  std::set<std::int64_t> axes;
  for (auto axis : given) {
    OPCACHE_TRY_ASSIGN(auto a, normalize_axis(axis, x.size(), attrs.where("axes") + " value"));
    if (!axes.insert(a).second) {
      return Error::usage(attrs.where("axes") + " names dimension " + std::to_string(a) + " twice");
    }
    p.reduced[static_cast<std::size_t>(a)] = true;
  }
  // Empty means every axis; normalize to the explicit list.
  nlohmann::json normalized = nlohmann::json::array();
  for (std::size_t d = 0; d < x.size(); ++d) {
    if (p.reduced[d]) {
      normalized.push_back(d);
    }
  }
  attrs.set("axes", normalized);
  OPCACHE_TRY_ASSIGN(p.keep_dims, attrs.boolean("keep_dims", false));
  return p;
}

Result<std::vector<TensorDesc>> infer_reduce(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY_ASSIGN(auto p, reduce_params(op, attrs));
  const Shape& x = op.inputs[0].shape;
  Shape shape;
  for (std::size_t d = 0; d < x.size(); ++d) {
    if (!p.reduced[d]) {
      shape.push_back(x[d]);
    } else if (p.keep_dims) {
      shape.push_back(1);
    }
  }
  return std::vector<TensorDesc>{output_like(op, shape, op.inputs[0].dtype)};
}

void emit_reduce(const OpDescriptor& op, CWriter& c) {
  AttrReader attrs(op.attrs, op.op_type);
  const ReduceParams p = reduce_params(op, attrs).value();
  const DType dtype = op.inputs[0].dtype;
  const Shape& x = op.inputs[0].shape;
  const Shape strides = row_major_strides(x);
  Shape kept, kept_strides, reduced, reduced_strides;
  std::int64_t count = 1;
  for (std::size_t d = 0; d < x.size(); ++d) {
    (p.reduced[d] ? reduced : kept).push_back(x[d]);
    (p.reduced[d] ? reduced_strides : kept_strides).push_back(strides[d]);
    count *= p.reduced[d] ? x[d] : 1;
  }
  const bool sum = op.op_type == "ReduceSum" || op.op_type == "ReduceMean";
  const std::string type = c_compute_type(dtype);
  auto outer = open_loops(c, kept, {kept_strides, row_major_strides(kept)}, "o");
  std::string init = sum                         ? "0"
                     : op.op_type == "ReduceMax" ? lowest(dtype)
                     : dtype == DType::int32     ? "(int64_t)INT32_MAX"
                                                 : "INFINITY";
  c.line(type + " acc = " + init + ";");
  auto inner = open_loops(c, reduced, {reduced_strides}, "r");
  c.line("const " + type + " v = " + load(dtype, in(0), add_offsets(outer.offsets[0], inner.offsets[0])) + ";");
  c.line(sum ? "acc += v;" : op.op_type == "ReduceMax" ? "if (v > acc) acc = v;" : "if (v < acc) acc = v;");
  close_loops(c, inner);
  const std::string value = op.op_type == "ReduceMean" ? "acc / " + c_float(static_cast<double>(count)) : "acc";
  c.line(out(0) + "[" + outer.offsets[1] + "] = " + to_storage(dtype, value) + ";");
  close_loops(c, outer);
}

// ---------------------------------------------------------------------------
// Softmax / LogSoftmax along `axis` (default -1), max-subtracted.

struct SoftmaxParams {
  std::int64_t outer = 1, length = 1, inner = 1;
};

Result<SoftmaxParams> softmax_params(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 1, 1, "x"));
  OPCACHE_TRY(expect_dtype(op, 0, {DType::float32, DType::float16}));
  const Shape& x = op.inputs[0].shape;
  if (x.empty()) {
    return Error::usage(op.op_type + ": x must have rank >= 1");
  }
  OPCACHE_TRY_ASSIGN(auto given, attrs.int_list("axis", {-1}));
  if (given.size() != 1) {
    return Error::usage(attrs.where("axis") + " must be one axis, got " + std::to_string(given.size()));
  }
  OPCACHE_TRY_ASSIGN(auto axis, normalize_axis(given[0], x.size(), attrs.where("axis")));
  attrs.set("axis", axis);
  SoftmaxParams p;
  for (std::size_t d = 0; d < x.size(); ++d) {
    const auto a = static_cast<std::size_t>(axis);
    (d < a ? p.outer : d == a ? p.length : p.inner) *= x[d];
  }
  return p;
}

Result<std::vector<TensorDesc>> infer_softmax(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(softmax_params(op, attrs));
  return std::vector<TensorDesc>{output_like(op, op.inputs[0].shape, op.inputs[0].dtype)};
}

void emit_softmax(const OpDescriptor& op, CWriter& c) {
  AttrReader attrs(op.attrs, op.op_type);
  const SoftmaxParams p = softmax_params(op, attrs).value();
  const DType dtype = op.inputs[0].dtype;
  const std::string len = std::to_string(p.length), inner = std::to_string(p.inner);
  auto nest = open_loops(c, {p.outer, p.inner}, {{p.length * p.inner, 1}}, "i");
  const std::string base = nest.offsets[0];
  const std::string at = add_offsets(base, p.inner == 1 ? "l" : "l * " + inner);
  c.line("float max = -INFINITY;");
  c.open("for (int64_t l = 0; l < " + len + "; ++l)");
  c.line("const float v = " + load(dtype, in(0), at) + ";");
  c.line("if (v > max) max = v;");
  c.close();
  c.line("float sum = 0.0f;");
  c.open("for (int64_t l = 0; l < " + len + "; ++l)");
  c.line("sum += expf(" + load(dtype, in(0), at) + " - max);");
  c.close();
  c.line(op.op_type == "Softmax" ? "const float scale = 1.0f / sum;" : "const float shift = max + logf(sum);");
  c.open("for (int64_t l = 0; l < " + len + "; ++l)");
  const std::string value = op.op_type == "Softmax" ? "expf(" + load(dtype, in(0), at) + " - max) * scale"
                                                    : load(dtype, in(0), at) + " - shift";
  c.line(out(0) + "[" + at + "] = " + to_storage(dtype, value) + ";");
  c.close();
  close_loops(c, nest);
}

}  // namespace

void add_reduce_ops(std::vector<OpDef>& table) {
  constexpr const char* k_reduce = "x; attrs axes (int or list; [] = all), keep_dims (false)";
  table.push_back({"ReduceSum", "reduce_sum", k_reduce, infer_reduce, emit_reduce});
  table.push_back({"ReduceMax", "reduce_max", k_reduce, infer_reduce, emit_reduce});
  table.push_back({"ReduceMin", "reduce_min", k_reduce, infer_reduce, emit_reduce});
  table.push_back({"ReduceMean", "reduce_mean", k_reduce, infer_reduce, emit_reduce});
  constexpr const char* k_softmax = "x; float32, float16; attrs axis (-1)";
  table.push_back({"Softmax", "softmax", k_softmax, infer_softmax, emit_softmax});
  table.push_back({"LogSoftmax", "log_softmax", k_softmax, infer_softmax, emit_softmax});
}

}  // namespace opcache::refcc
