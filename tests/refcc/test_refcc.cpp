// refcc, the reference op compiler, driven as a separate process: its kernels
// are real (linked against a C driver and checked against C++ reference
// implementations), its cache use goes through opcache (hits, shared entries
// across device ids, model dedupe), and its errors have the documented exit
// codes and messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/sha256.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"
#include "opcache_test_paths.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::test::contains;
using opcache::test::ProcessOptions;
using opcache::test::ProcessResult;
using opcache::test::read_text;
using opcache::test::run_process;
using opcache::test::TempDir;
using opcache::test::write_text;

namespace {

using Shape = std::vector<std::int64_t>;
using Values = std::vector<double>;

std::string refcc_path() {
#ifdef OPCACHE_REFCC_PATH
  return OPCACHE_REFCC_PATH;
#else
  const fs::path flat = fs::path(OPCACHE_BINARY_DIR) / "refcc";
  return fs::is_regular_file(flat) ? flat.string() : (flat / "refcc").string();
#endif
}

// Keeps refcc away from the user's environment: what keeps the CLI away
// (opcache::test::hermetic), and the device and compiler refcc reads.
ProcessOptions refcc_hermetic(std::map<std::string, std::string> env = {}) {
  ProcessOptions options = opcache::test::hermetic(std::move(env));
  options.unset_env.insert(options.unset_env.end(), {"DEVICE_ID", "CC"});
  return options;
}

ProcessResult refcc(const std::vector<std::string>& args, const ProcessOptions& options = refcc_hermetic()) {
  std::vector<std::string> argv{refcc_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, options);
}

std::int64_t count(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    n *= d;
  }
  return n;
}

Shape strides_of(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) {
    strides[i - 1] = strides[i] * shape[i];
  }
  return strides;
}

// Multi-index of flat position `flat` in `shape`.
Shape unravel(std::int64_t flat, const Shape& shape) {
  Shape index(shape.size(), 0);
  for (std::size_t i = shape.size(); i-- > 0;) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

// Deterministic inputs, exactly representable as float (and as half when `half`).
Values sample(std::int64_t n, std::uint32_t seed, double lo = -2.0, double hi = 2.0) {
  Values values;
  std::uint32_t state = seed * 2654435761u + 12345u;
  for (std::int64_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    const double unit = static_cast<double>(state >> 8) / static_cast<double>(1u << 24);
    // Multiples of 1/64 in range: exact in float32 and float16.
    values.push_back(std::round((lo + (hi - lo) * unit) * 64.0) / 64.0);
  }
  return values;
}

struct Tensor {
  Shape shape;
  std::string dtype = "float32";
  Values values;
};

Tensor make(Shape shape, std::uint32_t seed, std::string dtype = "float32") {
  Tensor t{shape, dtype, sample(count(shape), seed)};
  if (dtype == "int32") {
    for (auto& v : t.values) {
      v = std::round(v * 8);
    }
  }
  return t;
}

json tensor_json(const Tensor& t) {
  return {{"shape", t.shape}, {"dtype", t.dtype}};
}

const char* c_type(const std::string& dtype) {
  return dtype == "float16" ? "_Float16" : dtype == "int32" ? "int32_t" : "float";
}

// Compiles `descriptor` (inputs taken from `inputs`) with `refcc compile
// --no-cache`, links the object with a C driver that passes the inputs and
// prints every output, runs it and returns the outputs.
std::vector<Values> run_kernel(const TempDir& dir, json descriptor, const std::vector<Tensor>& inputs) {
  descriptor["inputs"] = json::array();
  for (const auto& t : inputs) {
    descriptor["inputs"].push_back(tensor_json(t));
  }
  const fs::path desc_path = dir / "desc.json";
  write_text(desc_path, descriptor.dump());
  const fs::path out = dir / "kernel_meta";
  auto compiled = refcc({"compile", desc_path.string(), "--out", out.string(), "--no-cache", "--json"});
  REQUIRE_MESSAGE(compiled.exit_code == 0, compiled.err);
  const json result = json::parse(compiled.out);
  const std::string stem = result["stem"];
  const json metadata = json::parse(read_text(out / (stem + ".json")));
  const json job = json::parse(read_text(out / (stem + ".info")));
  const std::string symbol = metadata["kernelName"];
  const json outputs = job["job_content"]["refcc_descriptor"]["outputs"];

  std::ostringstream c;
  c.precision(17);
  c << "#include <stdint.h>\n#include <stdio.h>\n";
  c << "void " << symbol << "(const void* const* inputs, void* const* outputs);\n";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    c << "static const " << c_type(inputs[i].dtype) << " in" << i << "[" << inputs[i].values.size() << "] = {";
    for (double v : inputs[i].values) {
      c << "(" << c_type(inputs[i].dtype) << ")" << v << ", ";
    }
    c << "};\n";
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    c << "static " << c_type(outputs[i]["dtype"]) << " out" << i << "[" << count(outputs[i]["shape"].get<Shape>())
      << "];\n";
  }
  c << "int main(void) {\n  const void* inputs[] = {";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    c << "in" << i << ", ";
  }
  c << "};\n  void* outputs[] = {";
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    c << "out" << i << ", ";
  }
  c << "};\n  " << symbol << "(inputs, outputs);\n";
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    c << "  for (long i = 0; i < " << count(outputs[i]["shape"].get<Shape>())
      << "; ++i) printf(\"%.17g\\n\", (double)out" << i << "[i]);\n  printf(\"--\\n\");\n";
  }
  c << "  return 0;\n}\n";
  write_text(dir / "driver.c", c.str());
  const fs::path exe = dir / "driver";
  auto linked = run_process(
      {"cc", "-std=c11", "-o", exe.string(), (dir / "driver.c").string(), (out / (stem + ".o")).string(), "-lm"});
  REQUIRE_MESSAGE(linked.exit_code == 0, linked.err);
  auto ran = run_process({exe.string()});
  REQUIRE(ran.exit_code == 0);

  std::vector<Values> values(1);
  std::istringstream lines(ran.out);
  for (std::string line; std::getline(lines, line);) {
    if (line == "--") {
      values.emplace_back();
    } else {
      values.back().push_back(std::stod(line));
    }
  }
  values.pop_back();
  REQUIRE(values.size() == outputs.size());
  return values;
}

void check_close(const Values& got, const Values& want, double tolerance = 1e-4) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= tolerance * std::max(1.0, std::abs(want[i])))) {
      first = bad++ == 0 ? i : first;
    }
  }
  CHECK_MESSAGE(bad == 0, bad << " of " << got.size() << " elements differ; first at " << first << ": got "
                              << got[first] << ", want " << want[first]);
}

// Reads `t` at the multi-index `index` of a broadcast output shape (right-aligned).
double at_broadcast(const Tensor& t, const Shape& index) {
  const Shape strides = strides_of(t.shape);
  const std::size_t lead = index.size() - t.shape.size();
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < t.shape.size(); ++d) {
    offset += (t.shape[d] == 1 ? 0 : index[lead + d]) * strides[d];
  }
  return t.values[static_cast<std::size_t>(offset)];
}

Values ref_binary(const Tensor& a, const Tensor& b, const Shape& out, const std::function<double(double, double)>& f) {
  Values y;
  for (std::int64_t i = 0; i < count(out); ++i) {
    const Shape index = unravel(i, out);
    y.push_back(f(at_broadcast(a, index), at_broadcast(b, index)));
  }
  return y;
}

Values ref_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb, const Tensor* bias, std::int64_t batches) {
  const std::size_t ra = a.shape.size(), rb = b.shape.size();
  const std::int64_t m = ta ? a.shape[ra - 1] : a.shape[ra - 2], k = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  const std::int64_t n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  const bool b_batched = rb > 2;
  Values y;
  for (std::int64_t bt = 0; bt < batches; ++bt) {
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = bias ? bias->values[static_cast<std::size_t>(j)] : 0.0;
        for (std::int64_t p = 0; p < k; ++p) {
          const double av = a.values[static_cast<std::size_t>(bt * m * k + (ta ? p * m + i : i * k + p))];
          const double bv =
              b.values[static_cast<std::size_t>((b_batched ? bt * k * n : 0) + (tb ? j * k + p : p * n + j))];
          acc += av * bv;
        }
        y.push_back(acc);
      }
    }
  }
  return y;
}

struct ConvGeometry {
  std::int64_t stride_h, stride_w, pad_top, pad_left, dilation, groups, out_h, out_w;
};

Values ref_conv(const Tensor& x, const Tensor& w, const Tensor* bias, const ConvGeometry& g) {
  const std::int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const std::int64_t o = w.shape[0], kh = w.shape[2], kw = w.shape[3];
  const std::int64_t cpg = c / g.groups, opg = o / g.groups;
  Values y;
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t oc = 0; oc < o; ++oc) {
      for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
        for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
          double acc = bias ? bias->values[static_cast<std::size_t>(oc)] : 0.0;
          for (std::int64_t ic = 0; ic < cpg; ++ic) {
            for (std::int64_t i = 0; i < kh; ++i) {
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t ih = oh * g.stride_h - g.pad_top + i * g.dilation;
                const std::int64_t iw = ow * g.stride_w - g.pad_left + j * g.dilation;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) {
                  continue;
                }
                const std::int64_t channel = (oc / opg) * cpg + ic;
                acc += x.values[static_cast<std::size_t>(((b * c + channel) * h + ih) * wd + iw)] *
                       w.values[static_cast<std::size_t>(((oc * cpg + ic) * kh + i) * kw + j)];
              }
            }
          }
          y.push_back(acc);
        }
      }
    }
  }
  return y;
}

// ---------------------------------------------------------------------------
// Numeric correctness: real objects, linked and run.

TEST_CASE("refcc: Add, Mul and Sub kernels broadcast like numpy") {
  TempDir dir;
  Tensor a = make({2, 3, 4}, 1);
  Tensor suffix = make({4}, 2);
  auto y = run_kernel(dir, {{"op_type", "Add"}}, {a, suffix});
  check_close(y[0], ref_binary(a, suffix, {2, 3, 4}, [](double p, double q) { return p + q; }));

  TempDir dir2;
  Tensor middle = make({3, 1}, 3);
  y = run_kernel(dir2, {{"op_type", "Mul"}}, {a, middle});
  check_close(y[0], ref_binary(a, middle, {2, 3, 4}, [](double p, double q) { return p * q; }));

  TempDir dir3;
  Tensor ints = make({5, 2}, 5, "int32");
  Tensor int_scalar = make({}, 6, "int32");
  y = run_kernel(dir3, {{"op_type", "Sub"}}, {ints, int_scalar});
  check_close(y[0], ref_binary(ints, int_scalar, {5, 2}, [](double p, double q) { return p - q; }), 0);
}

TEST_CASE("refcc: MatMul kernels honour transpose_a, transpose_b, batch dims and bias") {
  TempDir dir;
  Tensor a = make({2, 3, 5}, 11);
  Tensor b = make({4, 5}, 12);
  auto y = run_kernel(dir, {{"op_type", "MatMul"}, {"attrs", {{"transpose_b", true}}}}, {a, b});
  check_close(y[0], ref_matmul(a, b, false, true, nullptr, 2));

  TempDir dir2;
  Tensor at = make({6, 3}, 13);
  Tensor b2 = make({6, 4}, 14);
  Tensor bias = make({4}, 15);
  y = run_kernel(dir2, {{"op_type", "MatMul"}, {"attrs", {{"transpose_a", true}}}}, {at, b2, bias});
  check_close(y[0], ref_matmul(at, b2, true, false, &bias, 1));

  TempDir dir3;
  Tensor q = make({3, 4, 2}, 16);
  Tensor k = make({3, 2, 5}, 17);
  y = run_kernel(dir3, {{"op_type", "BatchMatMul"}}, {q, k});
  check_close(y[0], ref_matmul(q, k, false, false, nullptr, 3));
}

TEST_CASE("refcc: Conv2D kernels honour stride, padding, dilation, groups and bias") {
  TempDir dir;
  Tensor x = make({2, 4, 7, 6}, 21);
  Tensor w = make({6, 2, 3, 3}, 22);
  Tensor bias = make({6}, 23);
  // 7x6 input, pad 1, stride 2, 3x3 window: 4x3 output.
  auto y = run_kernel(dir, {{"op_type", "Conv2D"}, {"attrs", {{"stride", 2}, {"pad", {1, 1, 1, 1}}, {"group", 2}}}},
                      {x, w, bias});
  check_close(y[0], ref_conv(x, w, &bias, {2, 2, 1, 1, 1, 2, 4, 3}));

  TempDir dir2;
  Tensor x2 = make({1, 3, 8, 8}, 24);
  Tensor w2 = make({2, 3, 3, 3}, 25);
  // pad_mode "same" with dilation 2: effective window 5, pads 2 on every side, 8x8 output.
  y = run_kernel(dir2, {{"op_type", "Conv2D"}, {"attrs", {{"dilation", 2}, {"pad_mode", "same"}}}}, {x2, w2});
  check_close(y[0], ref_conv(x2, w2, nullptr, {1, 1, 2, 2, 2, 1, 8, 8}));
}

TEST_CASE("refcc: Softmax and LayerNorm kernels normalize along the right axes") {
  TempDir dir;
  Tensor x = make({2, 5, 3}, 31);
  auto y = run_kernel(dir, {{"op_type", "Softmax"}, {"attrs", {{"axis", 1}}}}, {x});
  Values want(x.values.size());
  for (std::int64_t o = 0; o < 2; ++o) {
    for (std::int64_t i = 0; i < 3; ++i) {
      double max = -1e300, sum = 0;
      for (std::int64_t l = 0; l < 5; ++l) {
        max = std::max(max, x.values[static_cast<std::size_t>(o * 15 + l * 3 + i)]);
      }
      for (std::int64_t l = 0; l < 5; ++l) {
        sum += std::exp(x.values[static_cast<std::size_t>(o * 15 + l * 3 + i)] - max);
      }
      for (std::int64_t l = 0; l < 5; ++l) {
        const auto at = static_cast<std::size_t>(o * 15 + l * 3 + i);
        want[at] = std::exp(x.values[at] - max) / sum;
      }
    }
  }
  check_close(y[0], want);

  TempDir dir2;
  Tensor ln_x = make({4, 8}, 32);
  Tensor gamma = make({8}, 33);
  Tensor beta = make({8}, 34);
  y = run_kernel(dir2,
                 {{"op_type", "LayerNorm"},
                  {"attrs", {{"begin_norm_axis", -1}, {"begin_params_axis", -1}, {"epsilon", 1e-5}}},
                  {"outputs",
                   {{{"shape", {4, 8}}, {"dtype", "float32"}},
                    {{"shape", {4, 1}}, {"dtype", "float32"}},
                    {{"shape", {4, 1}}, {"dtype", "float32"}}}}},
                 {ln_x, gamma, beta});
  Values want_y, want_mean, want_var;
  for (std::size_t r = 0; r < 4; ++r) {
    double mean = 0, var = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      mean += ln_x.values[r * 8 + j] / 8;
    }
    for (std::size_t j = 0; j < 8; ++j) {
      var += (ln_x.values[r * 8 + j] - mean) * (ln_x.values[r * 8 + j] - mean) / 8;
    }
    for (std::size_t j = 0; j < 8; ++j) {
      want_y.push_back((ln_x.values[r * 8 + j] - mean) / std::sqrt(var + 1e-5) * gamma.values[j] + beta.values[j]);
    }
    want_mean.push_back(mean);
    want_var.push_back(var);
  }
  check_close(y[0], want_y);
  check_close(y[1], want_mean);
  check_close(y[2], want_var);
}

TEST_CASE("refcc: ReduceSum, ReduceMax and ReduceMean kernels reduce the given axes") {
  Tensor x = make({3, 4, 5}, 41);
  auto reduce = [&](const std::function<double(double, double)>& f, double init, bool mean) {
    Values y;
    for (std::size_t j = 0; j < 4; ++j) {
      double acc = init;
      for (std::size_t i = 0; i < 3; ++i) {
        for (std::size_t k = 0; k < 5; ++k) {
          acc = f(acc, x.values[(i * 4 + j) * 5 + k]);
        }
      }
      y.push_back(mean ? acc / 15 : acc);
    }
    return y;
  };
  TempDir dir;
  auto y = run_kernel(dir, {{"op_type", "ReduceSum"}, {"attrs", {{"axes", {0, -1}}, {"keep_dims", true}}}}, {x});
  check_close(y[0], reduce([](double a, double b) { return a + b; }, 0, false));
  TempDir dir2;
  y = run_kernel(dir2, {{"op_type", "ReduceMax"}, {"attrs", {{"axis", {2, 0}}}}}, {x});
  check_close(y[0], reduce([](double a, double b) { return std::max(a, b); }, -1e300, false));
  TempDir dir3;
  y = run_kernel(dir3, {{"op_type", "ReduceMean"}, {"attrs", {{"axes", {0, 2}}}}}, {x});
  check_close(y[0], reduce([](double a, double b) { return a + b; }, 0, true));
}

TEST_CASE("refcc: pooling, BatchNorm, BiasAdd and Transpose kernels match their definitions") {
  Tensor x = make({1, 2, 5, 5}, 51);
  auto pool = [&](bool average) {
    // 3x3 window, stride 2, pad_mode "same": 3x3 output, pads 1 on every side.
    Values y;
    for (std::int64_t c = 0; c < 2; ++c) {
      for (std::int64_t oh = 0; oh < 3; ++oh) {
        for (std::int64_t ow = 0; ow < 3; ++ow) {
          double acc = average ? 0 : -1e300;
          int n = 0;
          for (std::int64_t i = 0; i < 3; ++i) {
            for (std::int64_t j = 0; j < 3; ++j) {
              const std::int64_t ih = oh * 2 - 1 + i, iw = ow * 2 - 1 + j;
              if (ih < 0 || ih >= 5 || iw < 0 || iw >= 5) {
                continue;
              }
              const double v = x.values[static_cast<std::size_t>((c * 5 + ih) * 5 + iw)];
              acc = average ? acc + v : std::max(acc, v);
              ++n;
            }
          }
          y.push_back(average ? acc / n : acc);
        }
      }
    }
    return y;
  };
  const json pool_attrs = {{"kernel_size", 3}, {"strides", 2}, {"pad_mode", "same"}};
  TempDir dir;
  check_close(run_kernel(dir, {{"op_type", "MaxPool"}, {"attrs", pool_attrs}}, {x})[0], pool(false));
  TempDir dir2;
  check_close(run_kernel(dir2, {{"op_type", "AvgPool"}, {"attrs", pool_attrs}}, {x})[0], pool(true));

  TempDir dir3;
  Tensor bx = make({2, 3, 2, 2}, 52);
  Tensor scale = make({3}, 53), offset = make({3}, 54), mean = make({3}, 55);
  Tensor var{{3}, "float32", {0.5, 1.25, 2.0}};
  auto y = run_kernel(dir3, {{"op_type", "BatchNorm"}, {"attrs", {{"epsilon", 1e-3}}}}, {bx, scale, offset, mean, var});
  Values want;
  for (std::size_t i = 0; i < bx.values.size(); ++i) {
    const std::size_t c = (i / 4) % 3;
    want.push_back((bx.values[i] - mean.values[c]) / std::sqrt(var.values[c] + 1e-3) * scale.values[c] +
                   offset.values[c]);
  }
  check_close(y[0], want);

  TempDir dir4;
  Tensor nhwc = make({2, 2, 3, 4}, 56);
  Tensor bias = make({4}, 57);
  y = run_kernel(dir4, {{"op_type", "BiasAdd"}, {"attrs", {{"data_format", "NHWC"}}}}, {nhwc, bias});
  check_close(y[0], ref_binary(nhwc, bias, nhwc.shape, [](double p, double q) { return p + q; }));

  TempDir dir5;
  Tensor t = make({2, 3, 4}, 58);
  y = run_kernel(dir5, {{"op_type", "Transpose"}, {"attrs", {{"perm", {2, 0, 1}}}}}, {t});
  want.clear();
  for (std::size_t k = 0; k < 4; ++k) {
    for (std::size_t i = 0; i < 2; ++i) {
      for (std::size_t j = 0; j < 3; ++j) {
        want.push_back(t.values[(i * 3 + j) * 4 + k]);
      }
    }
  }
  check_close(y[0], want, 0);
}

TEST_CASE("refcc: activation kernels (Gelu, Sigmoid, Relu) and float16 arithmetic") {
  Tensor x = make({3, 7}, 61);
  TempDir dir;
  auto y = run_kernel(dir, {{"op_type", "Gelu"}}, {x});
  Values want;
  for (double v : x.values) {
    want.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  check_close(y[0], want);
  TempDir dir2;
  y = run_kernel(dir2, {{"op_type", "Sigmoid"}}, {x});
  want.clear();
  for (double v : x.values) {
    want.push_back(1 / (1 + std::exp(-v)));
  }
  check_close(y[0], want);
  TempDir dir3;
  Tensor ints = make({9}, 62, "int32");
  y = run_kernel(dir3, {{"op_type", "Relu"}}, {ints});
  want.clear();
  for (double v : ints.values) {
    want.push_back(std::max(v, 0.0));
  }
  check_close(y[0], want, 0);

  // float16 storage, float arithmetic: products of multiples of 1/64 in [-2, 2] round to half precision.
  TempDir dir4;
  Tensor a = make({4, 4}, 63, "float16"), b = make({4}, 64, "float16");
  y = run_kernel(dir4, {{"op_type", "Mul"}}, {a, b});
  check_close(y[0], ref_binary(a, b, {4, 4}, [](double p, double q) { return p * q; }), 1e-3);
}

TEST_CASE("refcc: Cast to float16 rounds to nearest even, handles subnormals, and float to int truncates") {
  TempDir dir;
  // 1 + 2^-11 and 1 + 3 * 2^-11 are halfway cases; 2^-15 and 6e-8 are half subnormals.
  Tensor x{{8}, "float32", {65504.0, 65519.0, 1e-8, 6e-8, 1.00048828125, 1.00146484375, -2.5, 3.0517578125e-05}};
  auto y = run_kernel(dir, {{"op_type", "Cast"}, {"attrs", {{"dst_type", "float16"}}}}, {x});
  check_close(y[0], {65504.0, 65504.0, 0.0, 5.9604644775390625e-08, 1.0, 1.001953125, -2.5, 3.0517578125e-05}, 0);
  TempDir dir2;
  Tensor f{{4}, "float32", {2.75, -2.75, 0.5, -7.0}};
  y = run_kernel(dir2, {{"op_type", "Cast"}, {"attrs", {{"dst_type", "int32"}}}}, {f});
  check_close(y[0], {2, -2, 0, -7}, 0);
}

// ---------------------------------------------------------------------------
// Cache behaviour.

json matmul_descriptor(std::int64_t m) {
  return {{"op_type", "MatMul"},
          {"inputs", {{{"shape", {m, 8}}, {"dtype", "float32"}}, {{"shape", {8, 4}}, {"dtype", "float32"}}}},
          {"attrs", {{"transpose_a", false}}}};
}

struct Compiled {
  json result;
  std::map<std::string, std::string> files;  // extension -> bytes
};

Compiled compile(const TempDir& dir, const json& descriptor, const std::string& out,
                 std::vector<std::string> extra = {}, const ProcessOptions& options = refcc_hermetic()) {
  const fs::path desc = dir / ("desc-" + std::to_string(std::hash<std::string>{}(descriptor.dump())) + ".json");
  write_text(desc, descriptor.dump());
  std::vector<std::string> args = {"compile", desc.string(), "--out", (dir / out).string(), "--json"};
  if (std::find(extra.begin(), extra.end(), "--no-cache") == extra.end()) {
    args.push_back("--cache-dir");
    args.push_back((dir / "cache").string());
  }
  args.insert(args.end(), extra.begin(), extra.end());
  auto run = refcc(args, options);
  REQUIRE_MESSAGE(run.exit_code == 0, run.err);
  Compiled compiled;
  compiled.result = json::parse(run.out);
  const std::string stem = compiled.result["stem"];
  for (const char* ext : {".o", ".json", ".info"}) {
    REQUIRE(fs::is_regular_file(dir / out / (stem + ext)));
    compiled.files[ext] = read_text(dir / out / (stem + ext));
  }
  return compiled;
}

TEST_CASE("refcc: a second compile of the same descriptor is a cache hit with byte-identical files") {
  TempDir dir;
  auto first = compile(dir, matmul_descriptor(16), "km");
  CHECK(first.result["source"] == "built");
  CHECK(first.result["build_ms"].get<std::int64_t>() > 0);
  auto second = compile(dir, matmul_descriptor(16), "km");
  CHECK(second.result["source"] == "hit");
  CHECK(second.result["key"] == first.result["key"]);
  CHECK(second.files == first.files);
}

TEST_CASE("refcc: equivalent descriptors share a key, different shapes and --no-cache do not hit") {
  TempDir dir;
  auto base = compile(dir, matmul_descriptor(16), "km");
  json spelled = matmul_descriptor(16);
  spelled["attrs"] = {{"transpose_b", false}, {"transpose_x1", false}};
  spelled["outputs"] = {{{"dtype", "float32"}, {"shape", {16, 4}}, {"format", "ND"}}};
  spelled["name"] = "layer3.fc";
  auto same = compile(dir, spelled, "km");
  CHECK(same.result["source"] == "hit");
  CHECK(same.result["key"] == base.result["key"]);

  auto other = compile(dir, matmul_descriptor(32), "km");
  CHECK(other.result["source"] == "built");
  CHECK(other.result["key"] != base.result["key"]);
  CHECK(other.result["stem"] != base.result["stem"]);

  for (int i = 0; i < 2; ++i) {
    auto uncached = compile(dir, matmul_descriptor(16), "km-nocache", {"--no-cache"});
    CHECK(uncached.result["source"] == "bypassed");
    CHECK(uncached.result["cached"] == false);
    CHECK(uncached.result["key"] == base.result["key"]);
    // The compile is reproducible: the uncached object is the cached one, byte for byte.
    CHECK(uncached.files == base.files);
  }
}

TEST_CASE("refcc: device ids change the stem but share one cache entry and object") {
  TempDir dir;
  auto rank0 = compile(dir, matmul_descriptor(8), "rank_0", {"--device-id", "0"});
  auto rank5 = compile(dir, matmul_descriptor(8), "rank_5", {}, refcc_hermetic({{"DEVICE_ID", "5"}}));
  CHECK(rank0.result["source"] == "built");
  CHECK(rank5.result["source"] == "hit");
  CHECK(rank0.result["key"] == rank5.result["key"]);
  const std::string stem0 = rank0.result["stem"], stem5 = rank5.result["stem"];
  CHECK(stem0.substr(stem0.size() - 2) == "_0");
  CHECK(stem5.substr(stem5.size() - 2) == "_5");
  CHECK(stem0.substr(0, stem0.size() - 2) == stem5.substr(0, stem5.size() - 2));
  CHECK(rank0.files[".o"] == rank5.files[".o"]);
  const json meta5 = json::parse(rank5.files[".json"]);
  CHECK(meta5["binFileName"] == stem5);
  const json info5 = json::parse(rank5.files[".info"]);
  CHECK(info5["job_content"]["SocInfo"]["deviceId"] == "5");
  CHECK(info5["job_content"]["fusion_op_name"] == stem5);
}

TEST_CASE("refcc: kernel files follow the MindSpore kernel_meta layout") {
  TempDir dir;
  auto compiled = compile(dir, matmul_descriptor(4), "km", {"--device-id", "2"});
  const std::string stem = compiled.result["stem"];
  const std::string key = compiled.result["key"];
  // <func>_<decimal of the key's first 16 hex digits>_<device id>
  CHECK(stem == "mat_mul_" + std::to_string(std::stoull(key.substr(0, 16), nullptr, 16)) + "_2");
  const json meta = json::parse(compiled.files[".json"]);
  CHECK(meta["sha256"] == opcache::base::sha256_hex(compiled.files[".o"]));
  CHECK(meta["binFileName"] == stem);
  CHECK(meta["binFileSuffix"] == ".o");
  CHECK(meta["magic"] == "RT_DEV_BINARY_MAGIC_ELF");
  CHECK(meta["kernelName"] == compiled.result["symbol"]);
  CHECK(meta["parameters"].size() == 3);
  CHECK(compiled.files[".o"].substr(0, 4) ==
        "\x7f"
        "ELF");
  const json info = json::parse(compiled.files[".info"]);
  CHECK(info["job_type"] == "Compile");
  CHECK(info["job_content"]["op_list"].back()["type"] == "MatMul");
  CHECK(info["job_content"]["refcc_descriptor"]["inputs"][0]["shape"] == json({4, 8}));
}

TEST_CASE("refcc: model compiles distinct kernels once and a second run is all hits") {
  TempDir dir;
  json relu = {{"op_type", "Relu"}, {"inputs", {{{"shape", {2, 8}}, {"dtype", "float32"}}}}};
  json relu_big = {{"op_type", "Relu"}, {"inputs", {{{"shape", {4, 8}}, {"dtype", "float32"}}}}};
  json model = {{"name", "tiny_mlp"}, {"ops", json::array()}};
  for (int layer = 0; layer < 3; ++layer) {
    json mm = matmul_descriptor(2);
    mm["name"] = "layer" + std::to_string(layer) + ".matmul";
    model["ops"].push_back(mm);
    model["ops"].push_back(relu);
  }
  model["ops"].push_back(relu_big);
  write_text(dir / "model.json", model.dump());
  const std::vector<std::string> args = {"model",       (dir / "model.json").string(), "--out",  (dir / "km").string(),
                                         "--cache-dir", (dir / "cache").string(),      "--jobs", "2",
                                         "--json"};
  auto cold = refcc(args);
  REQUIRE_MESSAGE(cold.exit_code == 0, cold.err);
  json report = json::parse(cold.out);
  CHECK(report["model"] == "tiny_mlp");
  CHECK(report["ops"] == 7);
  CHECK(report["distinct_kernels"] == 3);
  CHECK(report["builds"] == 3);
  CHECK(report["hits"] == 0);
  CHECK(report["failed"] == 0);
  std::map<std::string, int> uses;
  for (const auto& k : report["kernels"]) {
    uses[k["op_type"].get<std::string>() + ":" + std::to_string(k["uses"].get<int>())]++;
  }
  CHECK(uses == std::map<std::string, int>{{"MatMul:3", 1}, {"Relu:3", 1}, {"Relu:1", 1}});
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir / "km")) {
    files += entry.is_regular_file() ? 1 : 0;
  }
  CHECK(files == 9);

  auto warm = refcc(args);
  REQUIRE_MESSAGE(warm.exit_code == 0, warm.err);
  report = json::parse(warm.out);
  CHECK(report["hits"] == 3);
  CHECK(report["builds"] == 0);

  auto text = refcc({"model", (dir / "model.json").string(), "--out", (dir / "km").string(), "--cache-dir",
                     (dir / "cache").string()});
  CHECK(text.exit_code == 0);
  CHECK(contains(text.out, "7 ops, 3 distinct kernels: 3 hits, 0 builds"));
}

TEST_CASE("refcc: the shipped model op lists are valid and large") {
  std::size_t distinct_total = 0;
  for (const char* name : {"resnet50", "transformer_block"}) {
    const fs::path path = fs::path(OPCACHE_SOURCE_DIR) / "examples" / "models" / (std::string(name) + ".json");
    const json model = json::parse(read_text(path));
    std::set<std::string> distinct;
    std::set<std::string> types;
    for (auto op : model["ops"]) {
      op.erase("name");
      distinct.insert(op.dump());
      types.insert(op["op_type"].get<std::string>());
    }
    distinct_total += distinct.size();
    CHECK(types.size() >= 5);
    // Every op is valid for refcc (describe prepares it without compiling).
    TempDir dir;
    write_text(dir / "op.json", model["ops"][model["ops"].size() / 2].dump());
    CHECK(refcc({"describe", (dir / "op.json").string()}).exit_code == 0);
  }
  CHECK(distinct_total >= 250);
}

// ---------------------------------------------------------------------------
// Errors.

TEST_CASE("refcc: an unknown op type is a usage error naming it and the supported ops") {
  TempDir dir;
  write_text(dir / "desc.json", R"({"op_type": "Frobnicate", "inputs": [{"shape": [2], "dtype": "float32"}]})");
  auto run = refcc({"compile", (dir / "desc.json").string(), "--out", (dir / "km").string(), "--no-cache"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, "\"Frobnicate\""));
  CHECK(contains(run.err, "MatMul"));
  CHECK(contains(run.err, "Conv2D"));
}

TEST_CASE("refcc: a MatMul with mismatched inner dimensions is a usage error") {
  TempDir dir;
  json desc = {{"op_type", "MatMul"},
               {"inputs", {{{"shape", {4, 8}}, {"dtype", "float32"}}, {{"shape", {6, 3}}, {"dtype", "float32"}}}}};
  write_text(dir / "desc.json", desc.dump());
  auto run = refcc({"compile", (dir / "desc.json").string(), "--out", (dir / "km").string(), "--no-cache"});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, "inner dimensions do not match"));
  CHECK(contains(run.err, "K = 8"));
  CHECK(contains(run.err, "K = 6"));
  CHECK_FALSE(fs::exists(dir / "km"));
}

TEST_CASE("refcc: unknown attributes, wrong outputs and bad model ops are usage errors") {
  TempDir dir;
  write_text(dir / "typo.json", R"({"op_type": "Softmax", "inputs": [{"shape": [2, 3], "dtype": "float32"}],
                                    "attrs": {"axsi": 0}})");
  auto typo = refcc({"compile", (dir / "typo.json").string(), "--out", (dir / "km").string(), "--no-cache"});
  CHECK(typo.exit_code == 2);
  CHECK(contains(typo.err, "no attribute \"axsi\""));

  write_text(dir / "outputs.json", R"({"op_type": "Relu", "inputs": [{"shape": [2, 3], "dtype": "float32"}],
                                       "outputs": [{"shape": [3, 2], "dtype": "float32"}]})");
  auto outputs = refcc({"compile", (dir / "outputs.json").string(), "--out", (dir / "km").string(), "--no-cache"});
  CHECK(outputs.exit_code == 2);
  CHECK(contains(outputs.err, "outputs[0] is float32[3,2]"));

  json model = {{"name", "broken"},
                {"ops",
                 {{{"op_type", "Relu"}, {"inputs", {{{"shape", {2}}, {"dtype", "float32"}}}}},
                  {{"op_type", "Sigmoid"}, {"name", "head.act"}, {"inputs", {{{"shape", {2}}, {"dtype", "int32"}}}}}}}};
  write_text(dir / "model.json", model.dump());
  auto bad = refcc({"model", (dir / "model.json").string(), "--out", (dir / "km").string(), "--no-cache"});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "ops[1] (head.act)"));
  CHECK(contains(bad.err, "int32"));
}

TEST_CASE("refcc: a compiler failure exits 7 and shows the compiler's error output") {
  TempDir dir;
  const fs::path fake_cc = dir / "fake-cc";
  write_text(fake_cc,
             "#!/bin/sh\n"
             "if [ \"$1\" = --version ]; then echo 'fake-cc 1.0'; exit 0; fi\n"
             "echo 'fake-cc: error: the kernel does not compile' >&2\n"
             "exit 1\n");
  fs::permissions(fake_cc, fs::perms::owner_all);
  write_text(dir / "desc.json", matmul_descriptor(2).dump());
  auto run = refcc({"compile", (dir / "desc.json").string(), "--out", (dir / "km").string(), "--cache-dir",
                    (dir / "cache").string()},
                   refcc_hermetic({{"CC", fake_cc.string()}}));
  CHECK(run.exit_code == 7);
  CHECK(contains(run.err, "the kernel does not compile"));
  CHECK(contains(run.err, "MatMul"));
  // Nothing was published, and nothing was cached: a later good compile builds.
  CHECK((!fs::exists(dir / "km") || fs::is_empty(dir / "km")));
  auto good = compile(dir, matmul_descriptor(2), "km2");
  CHECK(good.result["source"] == "built");
  // Another compiler is another toolchain, hence another key.
  auto fake = refcc({"describe", (dir / "desc.json").string()}, refcc_hermetic({{"CC", fake_cc.string()}}));
  REQUIRE(fake.exit_code == 0);
  const json described = json::parse(fake.out);
  CHECK(contains(described["scenario"]["toolchain"].get<std::string>(), "fake-cc 1.0"));
  CHECK(described["key"] != good.result["key"]);
}

}  // namespace
