#include "refcc/model.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "opcache/model.hpp"
#include "base/file_io.hpp"
#include "base/json_parse.hpp"
#include "base/mutex.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

using json = nlohmann::json;

namespace {

// What compile_model's worker threads write: each kernel's outcome and the
// report's first error, and the calls of on_kernel, one at a time. (The
// workers read only each kernel's key outside it, which no thread writes.)
class KernelResults {
 public:
  KernelResults(ModelReport& report, const std::function<void(const ModelKernel&)>& on_kernel)
      : m_report(&report), m_on_kernel(on_kernel) {}

  /// Records the outcome of kernel `index` and hands the kernel to on_kernel.
  void record(std::size_t index, Result<KernelOutcome> outcome) EXCLUDES(m_mutex) {
    base::MutexLock lock(m_mutex);
    ModelKernel& kernel = m_report->kernels[index];
    if (outcome) {
      kernel.ok = true;
      kernel.outcome = std::move(outcome).value();
    } else {
      kernel.error = outcome.error().message();
      if (!m_report->first_error) {
        m_report->first_error = outcome.error();
      }
    }
    if (m_on_kernel) {
      m_on_kernel(kernel);
    }
  }

 private:
  base::Mutex m_mutex;
  ModelReport* const m_report PT_GUARDED_BY(m_mutex);
  const std::function<void(const ModelKernel&)>& m_on_kernel;
};

}  // namespace

Result<Model> load_model(const std::string& path) {
  OPCACHE_TRY_ASSIGN(std::string text, base::read_file(path));
  OPCACHE_TRY_ASSIGN(auto list, parse_model_op_list(text, path));
  Model model;
  model.name = list.name.empty() ? std::filesystem::path(path).stem().string() : list.name;
  for (std::size_t i = 0; i < list.ops.size(); ++i) {
    const ModelOp& entry = list.ops[i];
    std::string origin = path + ": ops[" + std::to_string(i) + "]";
    OPCACHE_TRY_ASSIGN(json value, base::parse_json(entry.descriptor_json, origin));
    if (!entry.name.empty()) {
      origin += " (" + entry.name + ")";
      value["name"] = entry.name;
    }
    OPCACHE_TRY_ASSIGN(auto op, parse_op_descriptor(value, origin));
    OPCACHE_TRY_ASSIGN(auto prepared, prepare_op(op, origin));
    model.ops.push_back(std::move(prepared));
  }
  return model;
}

Result<ModelReport> compile_model(const Model& model, const BuildContext& ctx, int jobs,
                                  const std::function<void(const ModelKernel&)>& on_kernel) {
  const auto start = std::chrono::steady_clock::now();
  ModelReport report;
  report.model = model.name;
  report.ops = model.ops.size();
  report.jobs = std::max(1, jobs);

  // Dedupe by key: the first op with a key stands for all of them.
  std::map<std::string, std::size_t> by_key;
  std::vector<const PreparedOp*> representatives;
  for (const auto& op : model.ops) {
    OPCACHE_TRY_ASSIGN(auto key, kernel_key(op, ctx));
    auto [it, inserted] = by_key.emplace(key, report.kernels.size());
    if (inserted) {
      ModelKernel kernel;
      kernel.op_type = op.op.op_type;
      kernel.key = key;
      report.kernels.push_back(std::move(kernel));
      representatives.push_back(&op);
    }
    ++report.kernels[it->second].uses;
  }
  report.distinct = report.kernels.size();

  std::atomic<std::size_t> next{0};
  KernelResults results(report, on_kernel);
  const std::size_t kernel_count = report.kernels.size();
  auto worker = [&]() {
    for (std::size_t i = next++; i < kernel_count; i = next++) {
      const std::string& key = report.kernels[i].key;
      Result<KernelOutcome> outcome = Error::internal("not built");
      try {
        outcome = build_kernel(*representatives[i], key, ctx);
      } catch (const std::exception& e) {
        // A thread must not end in an exception; report it like any failure.
        outcome = Error::internal(std::string("building ") + key + " threw: " + e.what());
      }
      results.record(i, std::move(outcome));
    }
  };
  {
    std::vector<std::jthread> threads;
    const auto count = std::min<std::size_t>(static_cast<std::size_t>(report.jobs), report.kernels.size());
    for (std::size_t t = 0; t < count; ++t) {
      threads.emplace_back(worker);
    }
  }

  for (const auto& kernel : report.kernels) {
    if (!kernel.ok) {
      ++report.failed;
      continue;
    }
    report.build_ms += kernel.outcome.build_ms;
    switch (kernel.outcome.source) {
      case BuildSource::hit:
        ++report.hits;
        break;
      case BuildSource::built:
        ++report.builds;
        break;
      case BuildSource::bypassed:
        ++report.bypassed;
        break;
    }
  }
  report.wall_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace opcache::refcc
