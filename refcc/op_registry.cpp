#include "refcc/op_registry.hpp"

#include <algorithm>

#include "base/try.hpp"

namespace opcache::refcc {

namespace {

std::vector<OpDef> build_registry() {
  std::vector<OpDef> table;
  add_elementwise_ops(table);
  add_matmul_ops(table);
  add_conv_ops(table);
  add_reduce_ops(table);
  add_norm_ops(table);
  add_layout_ops(table);
  std::sort(table.begin(), table.end(), [](const OpDef& a, const OpDef& b) { return a.op_type < b.op_type; });
  return table;
}

std::string tensor_text(const TensorDesc& tensor) {
  return std::string(dtype_name(tensor.dtype)) + shape_text(tensor.shape);
}

// Given outputs must match what the op produces; their format and original
// shape/format are kept (metadata the caller chose).
Status check_given_outputs(const OpDescriptor& op, const std::vector<TensorDesc>& inferred) {
  const auto& given = *op.outputs;
  if (given.size() != inferred.size()) {
    return Error::usage(op.op_type + " produces " + std::to_string(inferred.size()) +
                        " output(s), the descriptor lists " + std::to_string(given.size()));
  }
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (given[i].shape != inferred[i].shape || given[i].dtype != inferred[i].dtype) {
      return Error::usage("outputs[" + std::to_string(i) + "] is " + tensor_text(given[i]) + " but " + op.op_type +
                          " of these inputs produces " + tensor_text(inferred[i]));
    }
  }
  return {};
}

}  // namespace

const std::vector<OpDef>& op_registry() {
  static const std::vector<OpDef> k_table = build_registry();
  return k_table;
}

Result<const OpDef*> find_op(std::string_view op_type) {
  for (const auto& def : op_registry()) {
    if (def.op_type == op_type) {
      return &def;
    }
  }
  std::string list;
  for (const auto& def : op_registry()) {
    list += (list.empty() ? "" : ", ") + std::string(def.op_type);
  }
  return Error::usage("unknown op type \"" + std::string(op_type) + "\"; refcc supports: " + list);
}

Result<PreparedOp> prepare_op(const OpDescriptor& op, const std::string& origin) {
  auto def = find_op(op.op_type);
  if (!def) {
    return def.error().with_context(origin);
  }
  AttrReader attrs(op.attrs, op.op_type);
  auto inferred = (*def)->infer(op, attrs);
  if (!inferred) {
    return inferred.error().with_context(origin);
  }
  if (auto finished = attrs.finish(); !finished) {
    return finished.error().with_context(origin);
  }
  PreparedOp prepared;
  prepared.def = *def;
  prepared.op = op;
  prepared.op.attrs = attrs.normalized();
  if (op.outputs) {
    if (auto checked = check_given_outputs(op, *inferred); !checked) {
      return checked.error().with_context(origin);
    }
  } else {
    prepared.op.outputs = std::move(inferred).value();
  }
  prepared.descriptor = descriptor_to_json(prepared.op);
  return prepared;
}

Status expect_inputs(const OpDescriptor& op, std::size_t min, std::size_t max, const char* names) {
  const auto n = op.inputs.size();
  if (n < min || n > max) {
    const std::string count = min == max ? std::to_string(min) : std::to_string(min) + " to " + std::to_string(max);
    return Error::usage(op.op_type + " takes " + count + " input(s) (" + names + "), the descriptor has " +
                        std::to_string(n));
  }
  return {};
}

Status expect_same_dtype(const OpDescriptor& op, std::size_t first) {
  for (std::size_t i = first; i < op.inputs.size(); ++i) {
    if (op.inputs[i].dtype != op.inputs[0].dtype) {
      return Error::usage(op.op_type + ": inputs[" + std::to_string(i) + "] is " + dtype_name(op.inputs[i].dtype) +
                          " but inputs[0] is " + dtype_name(op.inputs[0].dtype) + "; all inputs need one dtype");
    }
  }
  return {};
}

Status expect_dtype(const OpDescriptor& op, std::size_t index, std::initializer_list<DType> allowed) {
  const DType dtype = op.inputs[index].dtype;
  std::string list;
  for (auto a : allowed) {
    if (a == dtype) {
      return {};
    }
    list += (list.empty() ? "" : ", ") + std::string(dtype_name(a));
  }
  return Error::usage(op.op_type + ": inputs[" + std::to_string(index) + "] dtype " + dtype_name(dtype) +
                      " is not supported (supported: " + list + ")");
}

TensorDesc output_like(const OpDescriptor& op, Shape shape, DType dtype) {
  TensorDesc tensor;
  tensor.format = !op.inputs.empty() && shape.size() == 4 ? op.inputs[0].format : "ND";
  tensor.shape = std::move(shape);
  tensor.dtype = dtype;
  return tensor;
}

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b, const std::string& what) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape result(rank, 1);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return Error::usage(what + ": shapes " + shape_text(a) + " and " + shape_text(b) +
                          " cannot be broadcast (dimensions must be equal or 1, aligned from the right)");
    }
    result[i] = std::max(da, db);
  }
  return result;
}

Shape broadcast_strides(const Shape& in, const Shape& out) {
  const Shape dense = row_major_strides(in);
  const std::size_t lead = out.size() - in.size();
  Shape strides(out.size(), 0);
  for (std::size_t i = 0; i < in.size(); ++i) {
    strides[lead + i] = in[i] == 1 && out[lead + i] != 1 ? 0 : dense[i];
  }
  return strides;
}

}  // namespace opcache::refcc
