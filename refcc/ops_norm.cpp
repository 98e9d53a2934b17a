// Normalizations: LayerNorm (MindSpore semantics: begin_norm_axis,
// begin_params_axis, epsilon; optional mean/variance outputs) and inference
// BatchNorm (per-channel scale, offset, moving mean and variance).
#include <string>

#include "refcc/codegen.hpp"
#include "refcc/op_registry.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

namespace {


// ---------------------------------------------------------------------------
// LayerNorm: x, gamma, beta -> y [, mean, variance]. Rows are the dimensions
// before begin_norm_axis; gamma/beta have shape x.shape[begin_params_axis:].

struct LayerNormParams {
  std::int64_t rows = 1, row_length = 1, params = 1;
  double epsilon = 1e-7;
  Shape stats_shape;
};

Result<LayerNormParams> layer_norm_params(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 3, 3, "x, gamma, beta"));
  OPCACHE_TRY(expect_dtype(op, 0, k_float_dtypes));
  OPCACHE_TRY(expect_same_dtype(op));
  const Shape& x = op.inputs[0].shape;
  if (x.empty()) {
    return Error::usage("LayerNorm: x must have rank >= 1");
  }
  OPCACHE_TRY_ASSIGN(auto norm_axis, attrs.integer("begin_norm_axis", 1));
  OPCACHE_TRY_ASSIGN(auto params_axis, attrs.integer("begin_params_axis", 1));
  OPCACHE_TRY_ASSIGN(norm_axis, normalize_axis(norm_axis, x.size(), attrs.where("begin_norm_axis")));
  OPCACHE_TRY_ASSIGN(params_axis, normalize_axis(params_axis, x.size(), attrs.where("begin_params_axis")));
  if (params_axis < norm_axis) {
    return Error::usage("LayerNorm: begin_params_axis (" + std::to_string(params_axis) +
                        ") must not be before begin_norm_axis (" + std::to_string(norm_axis) + ")");
  }
  attrs.set("begin_norm_axis", norm_axis);
  attrs.set("begin_params_axis", params_axis);
  LayerNormParams p;
  OPCACHE_TRY_ASSIGN(p.epsilon, attrs.number("epsilon", 1e-7));
  if (!(p.epsilon > 0)) {
    return Error::usage(attrs.where("epsilon") + " must be positive");
  }
  const Shape param_shape(x.begin() + params_axis, x.end());
  for (std::size_t i = 1; i < 3; ++i) {
    if (op.inputs[i].shape != param_shape) {
      return Error::usage(std::string("LayerNorm: ") + (i == 1 ? "gamma" : "beta") + " must have shape " +
                          shape_text(param_shape) + " (x " + shape_text(x) + " from begin_params_axis " +
                          std::to_string(params_axis) + "), got " + shape_text(op.inputs[i].shape));
    }
  }
  for (std::size_t d = 0; d < x.size(); ++d) {
    const bool normed = static_cast<std::int64_t>(d) >= norm_axis;
    (normed ? p.row_length : p.rows) *= x[d];
    p.stats_shape.push_back(normed ? 1 : x[d]);
  }
  p.params = element_count(param_shape);
  return p;
}

Result<std::vector<TensorDesc>> infer_layer_norm(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY_ASSIGN(auto p, layer_norm_params(op, attrs));
  const DType dtype = op.inputs[0].dtype;
  std::vector<TensorDesc> outputs{output_like(op, op.inputs[0].shape, dtype)};
  // MindSpore's LayerNorm also returns mean and variance; list three outputs to get them.
  if (op.outputs && op.outputs->size() == 3) {
    outputs.push_back(output_like(op, p.stats_shape, dtype));
    outputs.push_back(output_like(op, p.stats_shape, dtype));
  }
  return outputs;
}

void emit_layer_norm(const OpDescriptor& op, CWriter& c) {
  AttrReader attrs(op.attrs, op.op_type);
  const LayerNormParams p = layer_norm_params(op, attrs).value();
  const DType dtype = op.inputs[0].dtype;
  const std::string len = std::to_string(p.row_length);
  const bool stats = op.outputs->size() == 3;
  c.open("for (int64_t r = 0; r < " + std::to_string(p.rows) + "; ++r)");
  c.line("const int64_t base = r * " + len + ";");
  c.line("float mean = 0.0f;");
  c.open("for (int64_t j = 0; j < " + len + "; ++j)");
  c.line("mean += " + load(dtype, in(0), "base + j") + ";");
  c.close();
  c.line("mean /= " + c_float(static_cast<double>(p.row_length)) + ";");
  c.line("float variance = 0.0f;");
  c.open("for (int64_t j = 0; j < " + len + "; ++j)");
  c.line("const float d = " + load(dtype, in(0), "base + j") + " - mean;");
  c.line("variance += d * d;");
  c.close();
  c.line("variance /= " + c_float(static_cast<double>(p.row_length)) + ";");
  c.line("const float inv = 1.0f / sqrtf(variance + " + c_float(p.epsilon) + ");");
  c.open("for (int64_t j = 0; j < " + len + "; ++j)");
  const std::string param = p.params == p.row_length ? "j" : "j % " + std::to_string(p.params);
  c.line(out(0) + "[base + j] = " +
         to_storage(dtype, "(" + load(dtype, in(0), "base + j") + " - mean) * inv * " + load(dtype, in(1), param) +
                               " + " + load(dtype, in(2), param)) +
         ";");
  c.close();
  if (stats) {
    c.line(out(1) + "[r] = " + to_storage(dtype, "mean") + ";");
    c.line(out(2) + "[r] = " + to_storage(dtype, "variance") + ";");
  }
  c.close();
}

// ---------------------------------------------------------------------------
// BatchNorm (inference): x [N, C, ...], scale, offset, mean, variance [C].

Result<double> batch_norm_params(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 5, 5, "x, scale, offset, mean, variance"));
  OPCACHE_TRY(expect_dtype(op, 0, k_float_dtypes));
  OPCACHE_TRY(expect_same_dtype(op));
  OPCACHE_TRY(attrs.alias("format", "data_format"));
  OPCACHE_TRY(attrs.text("data_format", "NCHW", {"NCHW"}));
  OPCACHE_TRY_ASSIGN(auto training, attrs.boolean("is_training", false));
  if (training) {
    return Error::usage("BatchNorm: refcc implements inference BatchNorm only (is_training must be false)");
  }
  OPCACHE_TRY_ASSIGN(auto epsilon, attrs.number("epsilon", 1e-5));
  if (!(epsilon > 0)) {
    return Error::usage(attrs.where("epsilon") + " must be positive");
  }
  const Shape& x = op.inputs[0].shape;
  if (x.size() < 2 || op.inputs[0].format == "NHWC") {
    return Error::usage("BatchNorm: x must be [N, C, ...] (NCHW), got " + shape_text(x) + " " + op.inputs[0].format);
  }
  static const char* const k_names[] = {"", "scale", "offset", "mean", "variance"};
  for (std::size_t i = 1; i < 5; ++i) {
    if (op.inputs[i].shape != Shape{x[1]}) {
      return Error::usage(std::string("BatchNorm: ") + k_names[i] + " must have shape [" + std::to_string(x[1]) +
                          "], got " + shape_text(op.inputs[i].shape));
    }
  }
  return epsilon;
}

Result<std::vector<TensorDesc>> infer_batch_norm(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(batch_norm_params(op, attrs));
  return std::vector<TensorDesc>{output_like(op, op.inputs[0].shape, op.inputs[0].dtype)};
}

void emit_batch_norm(const OpDescriptor& op, CWriter& c) {
  AttrReader attrs(op.attrs, op.op_type);
  const double epsilon = batch_norm_params(op, attrs).value();
  const DType dtype = op.inputs[0].dtype;
  const Shape& x = op.inputs[0].shape;
  const std::int64_t channels = x[1];
  const std::int64_t inner = element_count(x) / (x[0] * channels);
  auto nest = open_loops(c, {x[0], channels}, {{channels * inner, inner}, {0, 1}}, "i");
  const std::string ch = nest.offsets[1];
  c.line("const float a = " + load(dtype, in(1), ch) + " / sqrtf(" + load(dtype, in(4), ch) + " + " + c_float(epsilon) +
         ");");
  c.line("const float b = " + load(dtype, in(2), ch) + " - " + load(dtype, in(3), ch) + " * a;");
  c.open("for (int64_t j = 0; j < " + std::to_string(inner) + "; ++j)");
  const std::string at = add_offsets(nest.offsets[0], "j");
  c.line(out(0) + "[" + at + "] = " + to_storage(dtype, load(dtype, in(0), at) + " * a + b") + ";");
  c.close();
  close_loops(c, nest);
}

}  // namespace

void add_norm_ops(std::vector<OpDef>& table) {
  table.push_back({"LayerNorm", "layer_norm",
                   "x, gamma, beta (shape x.shape[begin_params_axis:]); float32, float16; attrs begin_norm_axis (1), "
                   "begin_params_axis (1), epsilon (1e-7); 1 output, or 3 (y, mean, variance) when listed",
                   infer_layer_norm, emit_layer_norm});
  table.push_back({"BatchNorm", "batch_norm",
                   "x [N,C,...], scale, offset, mean, variance [C]; float32, float16; attrs epsilon (1e-5), "
                   "is_training (false only), data_format \"NCHW\"",
                   infer_batch_norm, emit_batch_norm});
}

}  // namespace opcache::refcc
