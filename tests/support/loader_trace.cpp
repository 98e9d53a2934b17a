#include "tests/support/loader_trace.hpp"

#include <tuple>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.hpp"

namespace opcache::test {

namespace fs = std::filesystem;

std::pair<ProcessResult, std::string> run_traced(const std::vector<std::string>& args, const fs::path& trace_dir) {
  fs::remove_all(trace_dir);
  fs::create_directories(trace_dir);
  ProcessOptions options;
  options.env = {{"LD_DEBUG", "files"}, {"LD_DEBUG_OUTPUT", (trace_dir / "ld").string()}};
  options.unset_env = hermetic_variables();
  auto result = run_cli(args, options);
  std::string trace;
  for (const auto& file : fs::directory_iterator(trace_dir)) {
    trace += read_text(file.path());
  }
  return {result, trace};
}

TracedPut put_kernel_traced(const fs::path& dir) {
  TracedPut put{make_kernel(dir / "kernel", "square", 48), {"--cache-dir", (dir / "cache").string()}, {}, {}, {}};
  write_text(dir / "square.desc.json", put.kernel.descriptor_json);
  std::vector<std::string> args = put.cache;
  args.insert(args.end(), {"--json", "put", "--desc", (dir / "square.desc.json").string(), "--scenario", k_test_scenario});
  for (const auto& file : put.kernel.files()) {
    args.push_back(file.string());
  }
  std::tie(put.result, put.trace) = run_traced(args, dir / "trace");
  if (put.result.exit_code == 0) {
    put.key = nlohmann::json::parse(put.result.out).at("key").get<std::string>();
  }
  return put;
}

bool trace_maps(const std::string& trace, const std::string& soname_prefix) {
  return trace.find("file=" + soname_prefix) != std::string::npos ||
         trace.find("/" + soname_prefix) != std::string::npos;
}

}  // namespace opcache::test
