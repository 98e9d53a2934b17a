#include "refcc/codegen.hpp"

#include <cstdio>

#include "opcache/version.hpp"
#include "refcc/op_registry.hpp"

namespace opcache::refcc {

namespace {

// IEEE binary16 <-> binary32, round to nearest even (F. Giesen's
// float_to_half_fast3_rtne); portable C, so no compiler _Float16 support is needed.
constexpr const char* k_half_helpers = R"(static inline float refcc_h2f(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  float f;
  if (exponent == 0) {
    f = (float)mantissa * 5.9604644775390625e-08f;
    return sign ? -f : f;
  }
  if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t refcc_f2h(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  bits &= 0x7fffffffu;
  if (bits >= 0x47800000u) {
    return (uint16_t)(sign | (bits > 0x7f800000u ? 0x7e00u : 0x7c00u));
  }
  if (bits < 0x38800000u) {
    float f;
    memcpy(&f, &bits, sizeof f);
    f += 0.5f;
    memcpy(&bits, &f, sizeof bits);
    return (uint16_t)(sign | (bits - 0x3f000000u));
  }
  bits += 0xc8000fffu + ((bits >> 13) & 1u);
  return (uint16_t)(sign | (bits >> 13));
}
)";

bool uses_half(const OpDescriptor& op) {
  for (const auto& t : op.inputs) {
    if (t.dtype == DType::float16) {
      return true;
    }
  }
  for (const auto& t : *op.outputs) {
    if (t.dtype == DType::float16) {
      return true;
    }
  }
  return false;
}

std::string tensor_comment(const std::string& name, const TensorDesc& tensor) {
  return " * " + name + ": " + dtype_name(tensor.dtype) + shape_text(tensor.shape) + " " + tensor.format;
}

}  // namespace

void CWriter::line(std::string_view text) {
  m_text.append(static_cast<std::size_t>(m_depth) * 2, ' ');
  m_text.append(text);
  m_text.push_back('\n');
}

void CWriter::open(std::string_view head) {
  line(std::string(head) + " {");
  ++m_depth;
}

void CWriter::close() {
  --m_depth;
  line("}");
}

std::string in(std::size_t index) {
  return "in" + std::to_string(index);
}
std::string out(std::size_t index) {
  return "out" + std::to_string(index);
}

const char* c_storage_type(DType dtype) noexcept {
  switch (dtype) {
    case DType::float32:
      return "float";
    case DType::float16:
      return "uint16_t";
    case DType::int32:
      return "int32_t";
  }
  return "void";
}

const char* c_compute_type(DType dtype) noexcept {
  return dtype == DType::int32 ? "int64_t" : "float";
}

std::string load(DType dtype, const std::string& array, const std::string& index) {
  const std::string element = array + "[" + index + "]";
  switch (dtype) {
    case DType::float32:
      return element;
    case DType::float16:
      return "refcc_h2f(" + element + ")";
    case DType::int32:
      return "(int64_t)" + element;
  }
  return element;
}

std::string to_storage(DType dtype, const std::string& value) {
  switch (dtype) {
    case DType::float32:
      return "(float)(" + value + ")";
    case DType::float16:
      return "refcc_f2h(" + value + ")";
    case DType::int32:
      return "(int32_t)(" + value + ")";
  }
  return value;
}

std::string c_float(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "((float)%.9g)", static_cast<double>(static_cast<float>(value)));
  return buffer;
}

std::string lowest(DType dtype) {
  return dtype == DType::int32 ? "(int64_t)INT32_MIN" : "-INFINITY";
}

LoopNest open_loops(CWriter& out, const Shape& dims, const std::vector<Shape>& strides, const std::string& prefix) {
  LoopNest nest;
  nest.offsets.assign(strides.size(), "");
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) {
      continue;
    }
    const std::string var = prefix + std::to_string(d);
    out.open("for (int64_t " + var + " = 0; " + var + " < " + std::to_string(dims[d]) + "; ++" + var + ")");
    ++nest.depth;
    for (std::size_t k = 0; k < strides.size(); ++k) {
      const std::int64_t stride = strides[k][d];
      if (stride == 0) {
        continue;
      }
      const std::string term = stride == 1 ? var : var + " * " + std::to_string(stride);
      nest.offsets[k] = nest.offsets[k].empty() ? term : nest.offsets[k] + " + " + term;
    }
  }
  for (auto& offset : nest.offsets) {
    if (offset.empty()) {
      offset = "0";
    }
  }
  return nest;
}

void close_loops(CWriter& out, const LoopNest& nest) {
  for (int i = 0; i < nest.depth; ++i) {
    out.close();
  }
}

std::string add_offsets(const std::string& a, const std::string& b) {
  if (a == "0") {
    return b;
  }
  if (b == "0") {
    return a;
  }
  return a + " + " + b;
}

std::string generate_kernel_source(const PreparedOp& prepared, const std::string& symbol) {
  const OpDescriptor& op = prepared.op;
  const std::string signature = "void " + symbol + "(const void* const* inputs, void* const* outputs)";
  CWriter c;
  c.line(std::string("/* Generated by refcc ") + k_version_string + " (codegen v" + std::to_string(k_codegen_version) +
         "): " + op.op_type + ". Do not edit.");
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    c.line(tensor_comment("inputs[" + std::to_string(i) + "]", op.inputs[i]));
  }
  for (std::size_t i = 0; i < op.outputs->size(); ++i) {
    c.line(tensor_comment("outputs[" + std::to_string(i) + "]", (*op.outputs)[i]));
  }
  c.line(" * attrs: " + op.attrs.dump());
  c.line(" */");
  c.line("#include <math.h>");
  c.line("#include <stdint.h>");
  c.line("#include <string.h>");
  c.line("");
  if (uses_half(op)) {
    c.line(k_half_helpers);
  }
  c.line(signature + ";");
  c.line("");
  c.open(signature);
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    const char* type = c_storage_type(op.inputs[i].dtype);
    c.line(std::string("const ") + type + "* restrict " + in(i) + " = (const " + type + "*)inputs[" +
           std::to_string(i) + "];");
  }
  for (std::size_t i = 0; i < op.outputs->size(); ++i) {
    const char* type = c_storage_type((*op.outputs)[i].dtype);
    c.line(std::string(type) + "* restrict " + out(i) + " = (" + type + "*)outputs[" + std::to_string(i) + "];");
  }
  prepared.def->emit(op, c);
  c.close();
  return c.text();
}

}  // namespace opcache::refcc
