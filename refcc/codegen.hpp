// refcc — C code generation: a small writer, the C spelling of dtypes and
// constants, loop nests with compile-time bounds, and the kernel source file.
//
// Every kernel has the one signature
//
//   void <symbol>(const void* const* inputs, void* const* outputs);
//
// inputs[i] / outputs[i] point at dense row-major buffers of the dtypes and
// shapes in the descriptor (float16 is IEEE binary16 bits in a uint16_t).
// Outputs must not alias inputs. Shapes and attributes are compile-time
// constants of the generated code.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "refcc/op_descriptor.hpp"

namespace opcache::refcc {

struct PreparedOp;

/// Version of the code generator. Part of the default toolchain string, so a
/// change of the generated code changes every key. Bump it with any change
/// to what codegen emits.
inline constexpr int k_codegen_version = 1;

/// Appends C source lines with indentation. Not thread-safe.
class CWriter {
 public:
  /// One line at the current indentation.
  void line(std::string_view text);
  /// "head {" and indent.
  void open(std::string_view head);
  /// Outdent and "}".
  void close();
  const std::string& text() const { return m_text; }

 private:
  std::string m_text;
  int m_depth = 0;
};

/// The variable names of the kernel's tensors: "in0", "out1", ...
std::string in(std::size_t index);
std::string out(std::size_t index);

/// The C type elements are stored as: float, uint16_t (binary16 bits), int32_t.
const char* c_storage_type(DType dtype) noexcept;
/// The C type arithmetic is done in: float for float types, int64_t for int32.
const char* c_compute_type(DType dtype) noexcept;
/// An expression reading `array[index]` as the compute type.
std::string load(DType dtype, const std::string& array, const std::string& index);
/// An expression converting a compute-type `value` to the storage type.
std::string to_storage(DType dtype, const std::string& value);
/// A C float constant with the exact float value of `value`, e.g. "((float)1e-05)".
std::string c_float(double value);
/// The lowest value of the compute type (-INFINITY or INT64_MIN-safe int32 min).
std::string lowest(DType dtype);

/// A loop nest over `dims` (dimensions of size 1 get no loop). `offsets[k]`
/// is the C expression of sum(index[d] * strides[k][d]).
struct LoopNest {
  std::vector<std::string> offsets;
  int depth = 0;
};

/// Opens the loops; variables are named `<prefix><d>`. Close with close_loops().
LoopNest open_loops(CWriter& out, const Shape& dims, const std::vector<Shape>& strides, const std::string& prefix);
void close_loops(CWriter& out, const LoopNest& nest);

/// "a + b" that drops a "0" on either side.
std::string add_offsets(const std::string& a, const std::string& b);

/// The complete C source file of the kernel `symbol` for a prepared op.
std::string generate_kernel_source(const PreparedOp& prepared, const std::string& symbol);

}  // namespace opcache::refcc
