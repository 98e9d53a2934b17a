// Windowed NCHW ops: Conv2D (stride, pad/pad_mode, dilation, group, optional
// bias) and pooling (MaxPool, AvgPool; AvgPool divides by the number of
// elements inside the input, padding excluded).
#include <algorithm>
#include <array>
#include <string>

#include "refcc/codegen.hpp"
#include "refcc/op_registry.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

namespace {

// The geometry of a 2-D window over NCHW input.
struct Window {
  std::int64_t kh = 1, kw = 1;        // kernel
  std::int64_t sh = 1, sw = 1;        // stride
  std::int64_t dh = 1, dw = 1;        // dilation
  std::array<std::int64_t, 4> pad{};  // top, bottom, left, right
  std::int64_t oh = 1, ow = 1;        // output size
};

// An int, [h, w], or the NCHW 4-tuple [1, 1, h, w] MindSpore writes, as {h, w}.
Result<std::array<std::int64_t, 2>> pair_attr(AttrReader& attrs, const std::string& name, std::int64_t fallback) {
  OPCACHE_TRY_ASSIGN(auto values, attrs.int_list(name, {fallback}));
  std::array<std::int64_t, 2> pair{};
  if (values.size() == 1) {
    pair = {values[0], values[0]};
  } else if (values.size() == 2) {
    pair = {values[0], values[1]};
  } else if (values.size() == 4 && values[0] == 1 && values[1] == 1) {
    pair = {values[2], values[3]};
  } else {
    return Error::usage(attrs.where(name) + " must be an integer, [h, w] or [1, 1, h, w]");
  }
  if (pair[0] < 1 || pair[1] < 1) {
    return Error::usage(attrs.where(name) + " must be positive");
  }
  attrs.set(name, {pair[0], pair[1]});
  return pair;
}

// pad_mode "valid" | "same" | "pad" and pad (int, [h, w] or [top, bottom, left,
// right]); normalized to pad_mode "pad" with four explicit pads.
Status resolve_window(AttrReader& attrs, const Shape& x, Window& w) {
  OPCACHE_TRY(attrs.alias("pads", "pad"));
  OPCACHE_TRY(attrs.alias("padding", "pad"));
  OPCACHE_TRY_ASSIGN(auto given, attrs.int_list("pad", {0}));
  const bool pad_given = attrs.has("pad") && std::any_of(given.begin(), given.end(), [](auto v) { return v != 0; });
  OPCACHE_TRY_ASSIGN(auto mode, attrs.text("pad_mode", pad_given ? "pad" : "valid", {"valid", "same", "pad"}));
  const std::int64_t eh = (w.kh - 1) * w.dh + 1, ew = (w.kw - 1) * w.dw + 1;  // effective window
  const std::int64_t h = x[2], width = x[3];
  if (mode == "pad") {
    if (given.size() == 1) {
      w.pad = {given[0], given[0], given[0], given[0]};
    } else if (given.size() == 2) {
      w.pad = {given[0], given[0], given[1], given[1]};
    } else if (given.size() == 4) {
      w.pad = {given[0], given[1], given[2], given[3]};
    } else {
      return Error::usage(attrs.where("pad") + " must be an integer, [h, w] or [top, bottom, left, right]");
    }
  } else if (pad_given) {
    return Error::usage(attrs.where("pad") + " is set but pad_mode is \"" + mode + "\"; use pad_mode \"pad\"");
  } else if (mode == "same") {
    const std::int64_t oh = (h + w.sh - 1) / w.sh, ow = (width + w.sw - 1) / w.sw;
    const std::int64_t th = std::max<std::int64_t>((oh - 1) * w.sh + eh - h, 0);
    const std::int64_t tw = std::max<std::int64_t>((ow - 1) * w.sw + ew - width, 0);
    w.pad = {th / 2, th - th / 2, tw / 2, tw - tw / 2};
  }
  for (auto p : w.pad) {
    if (p < 0) {
      return Error::usage(attrs.where("pad") + " must not be negative");
    }
  }
  if (w.pad[0] >= eh || w.pad[1] >= eh || w.pad[2] >= ew || w.pad[3] >= ew) {
    return Error::usage(attrs.where("pad") + " must be smaller than the window (" + std::to_string(eh) + "x" +
                        std::to_string(ew) + ")");
  }
  const std::int64_t ph = h + w.pad[0] + w.pad[1], pw = width + w.pad[2] + w.pad[3];
  if (ph < eh || pw < ew) {
    return Error::usage("the window " + std::to_string(eh) + "x" + std::to_string(ew) +
                        " does not fit the padded input " + std::to_string(ph) + "x" + std::to_string(pw));
  }
  w.oh = (ph - eh) / w.sh + 1;
  w.ow = (pw - ew) / w.sw + 1;
  attrs.set("pad_mode", "pad");
  attrs.set("pad", {w.pad[0], w.pad[1], w.pad[2], w.pad[3]});
  return {};
}

Status expect_nchw(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(attrs.alias("format", "data_format"));
  OPCACHE_TRY(attrs.text("data_format", "NCHW", {"NCHW"}));
  if (op.inputs[0].shape.size() != 4 || op.inputs[0].format == "NHWC") {
    return Error::usage(op.op_type + ": x must be a 4-D NCHW tensor, got " + shape_text(op.inputs[0].shape) + " " +
                        op.inputs[0].format);
  }
  return {};
}

// Opens the loops over the window rows/columns, skipping positions in the padding.
void open_window(CWriter& c, const Window& w, const Shape& x) {
  c.open("for (int64_t kh = 0; kh < " + std::to_string(w.kh) + "; ++kh)");
  c.line("const int64_t ih = oh * " + std::to_string(w.sh) + " - " + std::to_string(w.pad[0]) + " + kh * " +
         std::to_string(w.dh) + ";");
  if (w.pad[0] > 0 || w.pad[1] > 0) {
    c.line("if (ih < 0 || ih >= " + std::to_string(x[2]) + ") continue;");
  }
  c.open("for (int64_t kw = 0; kw < " + std::to_string(w.kw) + "; ++kw)");
  c.line("const int64_t iw = ow * " + std::to_string(w.sw) + " - " + std::to_string(w.pad[2]) + " + kw * " +
         std::to_string(w.dw) + ";");
  if (w.pad[2] > 0 || w.pad[3] > 0) {
    c.line("if (iw < 0 || iw >= " + std::to_string(x[3]) + ") continue;");
  }
}

// ---------------------------------------------------------------------------
// Conv2D: x [N, C, H, W], weight [O, C / group, KH, KW], optional bias [O].

struct ConvParams {
  Window w;
  std::int64_t group = 1;
  bool bias = false;
};

Result<ConvParams> conv_params(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 2, 3, "x, weight[, bias]"));
  OPCACHE_TRY(expect_dtype(op, 0, {DType::float32, DType::float16}));
  OPCACHE_TRY(expect_same_dtype(op));
  OPCACHE_TRY(expect_nchw(op, attrs));
  const Shape& x = op.inputs[0].shape;
  const Shape& wt = op.inputs[1].shape;
  if (wt.size() != 4) {
    return Error::usage("Conv2D: weight must be [O, C / group, KH, KW], got " + shape_text(wt));
  }
  ConvParams p;
  OPCACHE_TRY(attrs.alias("groups", "group"));
  OPCACHE_TRY_ASSIGN(p.group, attrs.integer("group", 1));
  if (p.group < 1 || x[1] % p.group != 0 || wt[0] % p.group != 0) {
    return Error::usage("Conv2D: group " + std::to_string(p.group) + " must divide the input channels (" +
                        std::to_string(x[1]) + ") and the output channels (" + std::to_string(wt[0]) + ")");
  }
  if (wt[1] != x[1] / p.group) {
    return Error::usage("Conv2D: weight " + shape_text(wt) + " needs " + std::to_string(x[1] / p.group) +
                        " input channels per group (x " + shape_text(x) + ", group " + std::to_string(p.group) + ")");
  }
  p.w.kh = wt[2];
  p.w.kw = wt[3];
  OPCACHE_TRY(attrs.alias("strides", "stride"));
  OPCACHE_TRY(attrs.alias("dilations", "dilation"));
  OPCACHE_TRY_ASSIGN(auto stride, pair_attr(attrs, "stride", 1));
  OPCACHE_TRY_ASSIGN(auto dilation, pair_attr(attrs, "dilation", 1));
  p.w.sh = stride[0];
  p.w.sw = stride[1];
  p.w.dh = dilation[0];
  p.w.dw = dilation[1];
  // MindSpore also writes these; they follow from the weight shape: checked, not hashed.
  if (attrs.has("kernel_size")) {
    OPCACHE_TRY_ASSIGN(auto ks, pair_attr(attrs, "kernel_size", 1));
    if (ks[0] != p.w.kh || ks[1] != p.w.kw) {
      return Error::usage("Conv2D: kernel_size does not match the weight " + shape_text(wt));
    }
  }
  if (attrs.has("out_channel")) {
    OPCACHE_TRY_ASSIGN(auto oc, attrs.integer("out_channel", wt[0]));
    if (oc != wt[0]) {
      return Error::usage("Conv2D: out_channel " + std::to_string(oc) + " does not match the weight " + shape_text(wt));
    }
  }
  attrs.drop("kernel_size");
  attrs.drop("out_channel");
  OPCACHE_TRY(resolve_window(attrs, x, p.w));
  p.bias = op.inputs.size() == 3;
  if (p.bias && op.inputs[2].shape != Shape{wt[0]}) {
    return Error::usage("Conv2D: bias must have shape [" + std::to_string(wt[0]) + "], got " +
                        shape_text(op.inputs[2].shape));
  }
  return p;
}

Result<std::vector<TensorDesc>> infer_conv(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY_ASSIGN(auto p, conv_params(op, attrs));
  const Shape& x = op.inputs[0].shape;
  return std::vector<TensorDesc>{output_like(op, {x[0], op.inputs[1].shape[0], p.w.oh, p.w.ow}, op.inputs[0].dtype)};
}

void emit_conv(const OpDescriptor& op, CWriter& c) {
  AttrReader attrs(op.attrs, op.op_type);
  const ConvParams p = conv_params(op, attrs).value();
  const DType dtype = op.inputs[0].dtype;
  const Shape& x = op.inputs[0].shape;
  const std::int64_t o = op.inputs[1].shape[0], cpg = x[1] / p.group, opg = o / p.group;
  const std::string s_c = std::to_string(x[1]), s_h = std::to_string(x[2]), s_w = std::to_string(x[3]);
  const std::string s_cpg = std::to_string(cpg), s_o = std::to_string(o);
  c.open("for (int64_t n = 0; n < " + std::to_string(x[0]) + "; ++n)");
  c.open("for (int64_t oc = 0; oc < " + s_o + "; ++oc)");
  c.line(p.group == 1 ? "const int64_t ic0 = 0;"
                      : "const int64_t ic0 = (oc / " + std::to_string(opg) + ") * " + s_cpg + ";");
  c.open("for (int64_t oh = 0; oh < " + std::to_string(p.w.oh) + "; ++oh)");
  c.open("for (int64_t ow = 0; ow < " + std::to_string(p.w.ow) + "; ++ow)");
  c.line(std::string("float acc = ") + (p.bias ? load(dtype, in(2), "oc") : "0.0f") + ";");
  c.open("for (int64_t ic = 0; ic < " + s_cpg + "; ++ic)");
  open_window(c, p.w, x);
  c.line(
      "acc += " + load(dtype, in(0), "((n * " + s_c + " + ic0 + ic) * " + s_h + " + ih) * " + s_w + " + iw") + " * " +
      load(dtype, in(1),
           "((oc * " + s_cpg + " + ic) * " + std::to_string(p.w.kh) + " + kh) * " + std::to_string(p.w.kw) + " + kw") +
      ";");
  c.close();  // kw
  c.close();  // kh
  c.close();  // ic
  c.line(out(0) + "[((n * " + s_o + " + oc) * " + std::to_string(p.w.oh) + " + oh) * " + std::to_string(p.w.ow) +
         " + ow] = " + to_storage(dtype, "acc") + ";");
  c.close();  // ow
  c.close();  // oh
  c.close();  // oc
  c.close();  // n
}

// ---------------------------------------------------------------------------
// MaxPool / AvgPool: x [N, C, H, W]; kernel_size, strides, pad_mode, pad.

Result<Window> pool_params(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY(expect_inputs(op, 1, 1, "x"));
  if (op.op_type == "AvgPool") {
    OPCACHE_TRY(expect_dtype(op, 0, {DType::float32, DType::float16}));
  } else {
    OPCACHE_TRY(expect_dtype(op, 0, {DType::float32, DType::float16, DType::int32}));
  }
  OPCACHE_TRY(expect_nchw(op, attrs));
  if (!attrs.has("kernel_size")) {
    return Error::usage(op.op_type + " needs attribute \"kernel_size\" (an integer or [h, w])");
  }
  Window w;
  OPCACHE_TRY(attrs.alias("stride", "strides"));
  OPCACHE_TRY_ASSIGN(auto kernel, pair_attr(attrs, "kernel_size", 1));
  OPCACHE_TRY_ASSIGN(auto stride, pair_attr(attrs, "strides", 1));
  w.kh = kernel[0];
  w.kw = kernel[1];
  w.sh = stride[0];
  w.sw = stride[1];
  OPCACHE_TRY(resolve_window(attrs, op.inputs[0].shape, w));
  return w;
}

Result<std::vector<TensorDesc>> infer_pool(const OpDescriptor& op, AttrReader& attrs) {
  OPCACHE_TRY_ASSIGN(auto w, pool_params(op, attrs));
  const Shape& x = op.inputs[0].shape;
  return std::vector<TensorDesc>{output_like(op, {x[0], x[1], w.oh, w.ow}, op.inputs[0].dtype)};
}

void emit_pool(const OpDescriptor& op, CWriter& c) {
  AttrReader attrs(op.attrs, op.op_type);
  const Window w = pool_params(op, attrs).value();
  const DType dtype = op.inputs[0].dtype;
  const Shape& x = op.inputs[0].shape;
  const bool average = op.op_type == "AvgPool";
  const std::string plane = std::to_string(x[2] * x[3]);
  c.open("for (int64_t p = 0; p < " + std::to_string(x[0] * x[1]) + "; ++p)");
  c.open("for (int64_t oh = 0; oh < " + std::to_string(w.oh) + "; ++oh)");
  c.open("for (int64_t ow = 0; ow < " + std::to_string(w.ow) + "; ++ow)");
  c.line(std::string(c_compute_type(dtype)) + " acc = " + (average ? "0" : lowest(dtype)) + ";");
  if (average) {
    c.line("int64_t count = 0;");
  }
  open_window(c, w, x);
  c.line(std::string("const ") + c_compute_type(dtype) +
         " v = " + load(dtype, in(0), "p * " + plane + " + ih * " + std::to_string(x[3]) + " + iw") + ";");
  c.line(average ? "acc += v;" : "if (v > acc) acc = v;");
  if (average) {
    c.line("++count;");
  }
  c.close();  // kw
  c.close();  // kh
  c.line(out(0) + "[(p * " + std::to_string(w.oh) + " + oh) * " + std::to_string(w.ow) +
         " + ow] = " + to_storage(dtype, average ? "acc / (float)count" : "acc") + ";");
  c.close();
  c.close();
  c.close();
}

}  // namespace

void add_conv_ops(std::vector<OpDef>& table) {
  table.push_back({"Conv2D", "conv2d",
                   "x [N,C,H,W], weight [O,C/group,KH,KW], optional bias [O]; float32, float16; attrs stride (1), "
                   "dilation (1), pad_mode \"valid\"|\"same\"|\"pad\", pad [top,bottom,left,right], group (1), "
                   "data_format \"NCHW\"",
                   infer_conv, emit_conv});
  constexpr const char* k_pool =
      "x [N,C,H,W]; attrs kernel_size (required), strides (1), pad_mode \"valid\"|\"same\"|\"pad\", pad, "
      "data_format \"NCHW\"";
  table.push_back({"MaxPool", "max_pool", k_pool, infer_pool, emit_pool});
  table.push_back({"AvgPool", "avg_pool", k_pool, infer_pool, emit_pool});
}

}  // namespace opcache::refcc
