// refcc — model op lists: the operators of a network, compiled together.
//
//   {"name": "resnet50", "description": "...", "ops": [{descriptor}, ...]}
//
// Each op is an op descriptor (with an optional instance "name"). Identical
// ops (a network repeats layers) dedupe to one kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "opcache/result.hpp"
#include "refcc/kernel_build.hpp"
#include "refcc/op_registry.hpp"

namespace opcache::refcc {

/// A model with every op prepared.
struct Model {
  std::string name;
  std::vector<PreparedOp> ops;
};

/// Reads and prepares a model file; the first bad op is a `usage` error naming
/// the file, its index and its name.
Result<Model> load_model(const std::string& path);

/// One distinct kernel of a model run.
struct ModelKernel {
  std::string op_type;
  std::string key;
  std::size_t uses = 0;  ///< ops of the model that use it
  bool ok = false;
  KernelOutcome outcome;  ///< when ok
  std::string error;      ///< when not ok
};

/// The result of compiling a model.
struct ModelReport {
  std::string model;
  std::size_t ops = 0;
  std::size_t distinct = 0;
  std::size_t hits = 0, builds = 0, bypassed = 0, failed = 0;
  std::int64_t wall_ms = 0;
  std::int64_t build_ms = 0;  ///< sum over kernels (CPU-ish time; exceeds wall time with jobs > 1)
  int jobs = 1;
  std::vector<ModelKernel> kernels;  ///< in order of first use
  std::optional<Error> first_error;
};

/// Compiles every distinct kernel of `model` with `jobs` threads (each kernel
/// exactly once, so no two threads work on one key). A failing kernel does not
/// stop the others; it is counted in `failed`. `on_kernel` (optional) is
/// called after each kernel, from the worker threads, serialized.
Result<ModelReport> compile_model(const Model& model, const BuildContext& ctx, int jobs,
                                  const std::function<void(const ModelKernel&)>& on_kernel = {});

}  // namespace opcache::refcc
