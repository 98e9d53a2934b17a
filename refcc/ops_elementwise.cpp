// Elementwise ops: binary arithmetic with numpy broadcasting, unary
// activations, Cast, and BiasAdd.
#include <string>

#include "refcc/codegen.hpp"
#include "refcc/op_registry.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

namespace {

constexpr std::initializer_list<DType> k_all_dtypes = {DType::float32, DType::float16, DType::int32};

// ---------------------------------------------------------------------------
// Binary: Add, Sub, Mul, Div, Maximum, Minimum.

std::string binary_expression(const std::string& op_type, const std::string& a, const std::string& b) {
  if (op_type == "Add") {
    return a + " + " + b;
  }
  if (op_type == "Sub") {
    return a + " - " + b;
  }
  if (op_type == "Mul") {
    return a + " * " + b;
  }
  if (op_type == "Div") {
    return a + " / " + b;
  }
  if (op_type == "Maximum") {
    return a + " > " + b + " ? " + a + " : " + b;
  }
  return a + " < " + b + " ? " + a + " : " + b;  // Minimum
}

Result<std::vector<TensorDesc>> infer_binary(const OpDescriptor& op, AttrReader&) {
  OPCACHE_TRY(expect_inputs(op, 2, 2, "x, y"));
  OPCACHE_TRY(expect_dtype(op, 0, op.op_type == "Div" ? k_float_dtypes : k_all_dtypes));
  OPCACHE_TRY(expect_same_dtype(op));
  OPCACHE_TRY_ASSIGN(Shape shape, broadcast_shapes(op.inputs[0].shape, op.inputs[1].shape, op.op_type));
  return std::vector<TensorDesc>{output_like(op, shape, op.inputs[0].dtype)};
}

void emit_binary(const OpDescriptor& op, CWriter& c) {
  const DType dtype = op.inputs[0].dtype;
  const Shape& shape = (*op.outputs)[0].shape;
  const char* type = c_compute_type(dtype);
  if (op.inputs[0].shape == shape && op.inputs[1].shape == shape) {
    c.open("for (int64_t i = 0; i < " + std::to_string(element_count(shape)) + "; ++i)");
    c.line(std::string("const ") + type + " a = " + load(dtype, in(0), "i") + ";");
    c.line(std::string("const ") + type + " b = " + load(dtype, in(1), "i") + ";");
    c.line(out(0) + "[i] = " + to_storage(dtype, binary_expression(op.op_type, "a", "b")) + ";");
    c.close();
    return;
  }
  auto nest = open_loops(c, shape,
                         {broadcast_strides(op.inputs[0].shape, shape), broadcast_strides(op.inputs[1].shape, shape),
                          row_major_strides(shape)},
                         "i");
  c.line(std::string("const ") + type + " a = " + load(dtype, in(0), nest.offsets[0]) + ";");
  c.line(std::string("const ") + type + " b = " + load(dtype, in(1), nest.offsets[1]) + ";");
  c.line(out(0) + "[" + nest.offsets[2] + "] = " + to_storage(dtype, binary_expression(op.op_type, "a", "b")) + ";");
  close_loops(c, nest);
}

// ---------------------------------------------------------------------------
// Unary: Relu, Relu6, Sigmoid, Tanh, Gelu, Exp, Sqrt, Rsqrt, Neg, Abs, Square.

bool unary_takes_ints(const std::string& op_type) {
  return op_type == "Relu" || op_type == "Relu6" || op_type == "Neg" || op_type == "Abs" || op_type == "Square";
}

std::string unary_expression(const OpDescriptor& op, const std::string& v) {
  const std::string& t = op.op_type;
  if (t == "Relu") {
    return v + " > 0 ? " + v + " : 0";
  }
  if (t == "Relu6") {
    return v + " < 0 ? 0 : (" + v + " > 6 ? 6 : " + v + ")";
  }
  if (t == "Sigmoid") {
    return "1.0f / (1.0f + expf(-" + v + "))";
  }
  if (t == "Tanh") {
    return "tanhf(" + v + ")";
  }
  if (t == "Gelu") {
    if (op.attrs.value("approximate", "tanh") == "none") {
      return "0.5f * " + v + " * (1.0f + erff(" + v + " * 0.70710678118654752f))";
    }
    return "0.5f * " + v + " * (1.0f + tanhf(0.79788456080286536f * (" + v + " + 0.044715f * " + v + " * " + v + " * " +
           v + ")))";
  }
  if (t == "Exp") {
    return "expf(" + v + ")";
  }
  if (t == "Sqrt") {
    return "sqrtf(" + v + ")";
  }
  if (t == "Rsqrt") {
    return "1.0f / sqrtf(" + v + ")";
  }
  if (t == "Neg") {
    return "-" + v;
  }
  if (t == "Abs") {
    return v + " < 0 ? -" + v + " : " + v;
  }
  return v + " * " + v;  // Square
}

Result<std::vector<TensorDesc>> infer_unary(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 1, 1, "x"));
  OPCACHE_TRY(expect_dtype(op, 0, unary_takes_ints(op.op_type) ? k_all_dtypes : k_float_dtypes));
  if (op.op_type == "Gelu") {
    OPCACHE_TRY(attrs.text("approximate", "tanh", {"tanh", "none"}));
  }
  return std::vector<TensorDesc>{output_like(op, op.inputs[0].shape, op.inputs[0].dtype)};
}

void emit_unary(const OpDescriptor& op, CWriter& c) {
  const DType dtype = op.inputs[0].dtype;
  c.open("for (int64_t i = 0; i < " + std::to_string(element_count(op.inputs[0].shape)) + "; ++i)");
  c.line(std::string("const ") + c_compute_type(dtype) + " v = " + load(dtype, in(0), "i") + ";");
  c.line(out(0) + "[i] = " + to_storage(dtype, unary_expression(op, "v")) + ";");
  c.close();
}

// ---------------------------------------------------------------------------
// Cast: dtype conversion (float to int truncates toward zero, like C).

Result<std::vector<TensorDesc>> infer_cast(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 1, 1, "x"));
  if (!attrs.has("dst_type") && !(op.outputs && op.outputs->size() == 1)) {
    return Error::usage("Cast needs attribute \"dst_type\" (float32, float16 or int32) or an output dtype");
  }
  const std::string fallback = op.outputs && op.outputs->size() == 1 ? dtype_name((*op.outputs)[0].dtype) : "";
  OPCACHE_TRY_ASSIGN(auto name, attrs.text("dst_type", fallback, {"float32", "float16", "int32"}));
  return std::vector<TensorDesc>{output_like(op, op.inputs[0].shape, *parse_dtype(name))};
}

void emit_cast(const OpDescriptor& op, CWriter& c) {
  const DType from = op.inputs[0].dtype;
  const DType to = (*op.outputs)[0].dtype;
  c.open("for (int64_t i = 0; i < " + std::to_string(element_count(op.inputs[0].shape)) + "; ++i)");
  c.line(out(0) + "[i] = " + to_storage(to, load(from, in(0), "i")) + ";");
  c.close();
}

// ---------------------------------------------------------------------------
// BiasAdd: x + bias along the channel axis (1 for NCHW, last for NHWC).

struct BiasAddParams {
  std::int64_t outer = 1, channels = 1, inner = 1;
};

Result<BiasAddParams> bias_add_params(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 2, 2, "x, bias"));
  OPCACHE_TRY(expect_dtype(op, 0, k_all_dtypes));
  OPCACHE_TRY(expect_same_dtype(op));
  OPCACHE_TRY_ASSIGN(auto format, attrs.text("data_format", "NCHW", {"NCHW", "NHWC"}));
  const Shape& x = op.inputs[0].shape;
  if (x.size() < 2) {
    return Error::usage("BiasAdd: x must have rank >= 2, got " + shape_text(x));
  }
  const std::size_t axis = format == "NCHW" ? 1 : x.size() - 1;
  if (op.inputs[1].shape != Shape{x[axis]}) {
    return Error::usage("BiasAdd: bias must have shape [" + std::to_string(x[axis]) + "] (channel axis " +
                        std::to_string(axis) + " of x " + shape_text(x) + " in " + format + "), got " +
                        shape_text(op.inputs[1].shape));
  }
  BiasAddParams p;
  for (std::size_t i = 0; i < x.size(); ++i) {
    (i < axis ? p.outer : i == axis ? p.channels : p.inner) *= x[i];
  }
  return p;
}

Result<std::vector<TensorDesc>> infer_bias_add(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(bias_add_params(op, attrs));
  return std::vector<TensorDesc>{output_like(op, op.inputs[0].shape, op.inputs[0].dtype)};
}

void emit_bias_add(const OpDescriptor& op, CWriter& c) {
  AttrReader attrs(op.attrs, op.op_type);
  const BiasAddParams p = bias_add_params(op, attrs).value();
  const DType dtype = op.inputs[0].dtype;
  const std::string type = c_compute_type(dtype);
  auto nest = open_loops(c, {p.outer, p.channels}, {{p.channels * p.inner, p.inner}, {0, 1}}, "i");
  c.line("const " + type + " b = " + load(dtype, in(1), nest.offsets[1]) + ";");
  c.open("for (int64_t j = 0; j < " + std::to_string(p.inner) + "; ++j)");
  const std::string index = add_offsets(nest.offsets[0], "j");
  c.line(out(0) + "[" + index + "] = " + to_storage(dtype, load(dtype, in(0), index) + " + b") + ";");
  c.close();
  close_loops(c, nest);
}

}  // namespace

void add_elementwise_ops(std::vector<OpDef>& table) {
  struct Name {
    const char* op_type;
    const char* func_name;
  };
  for (auto [type, func] : {Name{"Add", "add"}, Name{"Sub", "sub"}, Name{"Mul", "mul"}, Name{"Maximum", "maximum"},
                            Name{"Minimum", "minimum"}}) {
    table.push_back(
        {type, func, "x, y (same dtype, numpy broadcasting); float32, float16, int32", infer_binary, emit_binary});
  }
  table.push_back(
      {"Div", "real_div", "x, y (same dtype, numpy broadcasting); float32, float16", infer_binary, emit_binary});
  for (auto [type, func] : {Name{"Relu", "relu"}, Name{"Relu6", "relu6"}, Name{"Neg", "neg"}, Name{"Abs", "abs"},
                            Name{"Square", "square"}}) {
    table.push_back({type, func, "x; float32, float16, int32", infer_unary, emit_unary});
  }
  for (auto [type, func] : {Name{"Sigmoid", "sigmoid"}, Name{"Tanh", "tanh"}, Name{"Exp", "exp"}, Name{"Sqrt", "sqrt"},
                            Name{"Rsqrt", "rsqrt"}}) {
    table.push_back({type, func, "x; float32, float16", infer_unary, emit_unary});
  }
  table.push_back({"Gelu", "gelu", "x; float32, float16; attrs approximate=\"tanh\" (default) | \"none\" (erf)",
                   infer_unary, emit_unary});
  table.push_back(
      {"Cast", "cast", "x; attrs dst_type=float32|float16|int32 (float to int truncates)", infer_cast, emit_cast});
  table.push_back({"BiasAdd", "bias_add", "x (rank >= 2), bias [C]; attrs data_format=\"NCHW\" (default) | \"NHWC\"",
                   infer_bias_add, emit_bias_add});
}

}  // namespace opcache::refcc
