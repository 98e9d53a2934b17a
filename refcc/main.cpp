// refcc — the reference op compiler. Reads op descriptors, generates C code
// specialised to their shapes, dtypes and attributes, compiles it with the
// system C compiler and writes MindSpore-style kernel triples; every compile
// goes through opcache's Store::get_or_build unless --no-cache.
//
//   refcc compile DESC.json --out DIR [--no-cache] [--device-id N] ...
//   refcc model MODEL.json --out DIR [--jobs N] [--no-cache] ...
//   refcc describe DESC.json [--source]
//   refcc ops
//
// Exit codes: 0 ok, 2 usage (bad descriptor, unknown op type), 7 compile
// failure; otherwise the opcache error code (see refcc/README.md).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "opcache/opcache.hpp"
#include "base/value_parse.hpp"
#include "opcache/version.hpp"
#include "refcc/codegen.hpp"
#include "refcc/kernel_build.hpp"
#include "refcc/model.hpp"
#include "refcc/op_registry.hpp"
#include "refcc/toolchain.hpp"
#include "base/try.hpp"

namespace {

using namespace opcache;
using namespace opcache::refcc;
using json = nlohmann::json;

// The largest device id, from --device-id or DEVICE_ID.
constexpr std::int64_t k_max_device_id = 1'000'000;

// The check of an integer flag: read as DEVICE_ID is (base::parse_integer).
CLI::Validator integer_in(std::int64_t min, std::int64_t max) {
  return CLI::Validator([min, max](std::string& value) { return base::integer_refusal(value, min, max); },
                        "INTEGER " + std::to_string(min) + ".." + std::to_string(max));
}

// Options shared by the compiling subcommands.
struct CommonOptions {
  std::string out_dir;
  std::string scenario;
  std::string scenario_file;
  std::string cache_dir;
  std::string cc;
  std::optional<int> device_id;
  bool no_cache = false;
  bool json = false;

  void add_to(CLI::App& command, bool compiles) {
    if (compiles) {
      command.add_option("--out,-o", out_dir, "Directory for the kernel files (kernel_meta)")->required();
      command.add_flag("--no-cache", no_cache, "Build without reading or writing the cache");
      command.add_option("--cache-dir", cache_dir, "Cache root (default: OPCACHE_DIR, else ~/.cache/opcache)");
      command.add_option("--device-id", device_id, "Device id in the file names (default: DEVICE_ID, else 0)")
          ->check(integer_in(0, k_max_device_id));
      command.add_flag("--json", json, "Print the result as one line of JSON");
    }
    auto* spec = command.add_option("--scenario", scenario,
                                    "Scenario spec or JSON (default: phase=infer,toolchain=auto,soc=auto; "
                                    "\"auto\" = detected)");
    command.add_option("--scenario-file", scenario_file, "Scenario JSON file")->excludes(spec);
    command.add_option("--cc", cc, "C compiler command (default: CC, else cc)");
  }
};

int fail(const Error& error) {
  std::fprintf(stderr, "refcc: error: %s\n", error.message().c_str());
  return static_cast<int>(error.code());
}

Result<int> resolve_device_id(const CommonOptions& options) {
  if (options.device_id) {
    return *options.device_id;
  }
  const char* env = std::getenv("DEVICE_ID");
  if (env == nullptr || *env == '\0') {
    return 0;
  }
  auto value = base::parse_integer(env, 0, k_max_device_id);
  if (!value) {
    return Error::usage(std::string("DEVICE_ID=\"") + env + "\" is not a device number: it " +
                        value.error().message() + " (use --device-id N)");
  }
  return static_cast<int>(*value);
}

// The context of a compiling command; opens the store into `store` unless --no-cache.
Result<BuildContext> make_context(const CommonOptions& options, std::optional<Store>& store) {
  BuildContext ctx;
  OPCACHE_TRY_ASSIGN(ctx.compiler, detect_compiler(options.cc));
  OPCACHE_TRY_ASSIGN(ctx.scenario, resolve_scenario(options.scenario, options.scenario_file, ctx.compiler));
  OPCACHE_TRY_ASSIGN(ctx.device_id, resolve_device_id(options));
  ctx.out_dir = options.out_dir;
  if (!options.no_cache) {
    StoreConfig config;
    config.cache_dir = options.cache_dir;
    OPCACHE_TRY_ASSIGN(auto opened, Store::open(config));
    store.emplace(std::move(opened));
    ctx.store = &*store;
  }
  return ctx;
}

json files_json(const std::vector<std::filesystem::path>& files) {
  json list = json::array();
  for (const auto& f : files) {
    list.push_back(f.string());
  }
  return list;
}

// The op descriptor file at `path`, validated and completed by its op type.
Result<PreparedOp> load_prepared_op(const std::string& path) {
  auto op = load_op_descriptor(path);
  if (!op) {
    return op.error();
  }
  return prepare_op(*op, path);
}

int run_compile(const CommonOptions& options, const std::string& path) {
  auto prepared = load_prepared_op(path);
  if (!prepared) {
    return fail(prepared.error());
  }
  std::optional<Store> store;
  auto ctx = make_context(options, store);
  if (!ctx) {
    return fail(ctx.error());
  }
  auto key = kernel_key(*prepared, *ctx);
  if (!key) {
    return fail(key.error());
  }
  auto outcome = build_kernel(*prepared, *key, *ctx);
  if (!outcome) {
    return fail(outcome.error());
  }
  if (options.json) {
    json result = {{"op_type", prepared->op.op_type},
                   {"stem", outcome->stem},
                   {"symbol", outcome->names.symbol},
                   {"key", outcome->key},
                   {"source", source_name(outcome->source)},
                   {"cached", ctx->store != nullptr},
                   {"build_ms", outcome->build_ms},
                   {"device_id", ctx->device_id},
                   {"scenario", scenario_json(ctx->scenario)},
                   {"files", files_json(outcome->files)}};
    if (!outcome->note.empty()) {
      result["note"] = outcome->note;
    }
    std::cout << result.dump() << "\n";
  } else {
    const std::string how = outcome->source == BuildSource::hit     ? "hit"
                            : outcome->source == BuildSource::built ? "built"
                                                                    : "built (no cache)";
    std::cout << "refcc: " << how << " " << outcome->stem << " (" << prepared->op.op_type << ", " << outcome->build_ms
              << " ms) -> " << (ctx->out_dir / outcome->stem).string() << ".{o,json,info}\n";
    if (!outcome->note.empty() && outcome->note != "--no-cache") {
      std::cout << "refcc: " << outcome->note << "\n";
    }
  }
  return 0;
}

std::string seconds(std::int64_t ms) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f s", static_cast<double>(ms) / 1000.0);
  return buffer;
}

json report_json(const ModelReport& report, const BuildContext& ctx) {
  json kernels = json::array();
  for (const auto& k : report.kernels) {
    json item = {{"op_type", k.op_type}, {"key", k.key}, {"uses", k.uses}};
    if (k.ok) {
      item["stem"] = k.outcome.stem;
      item["source"] = source_name(k.outcome.source);
      item["build_ms"] = k.outcome.build_ms;
    } else {
      item["error"] = k.error;
    }
    kernels.push_back(item);
  }
  return {{"model", report.model},
          {"ops", report.ops},
          {"distinct_kernels", report.distinct},
          {"hits", report.hits},
          {"builds", report.builds},
          {"bypassed", report.bypassed},
          {"failed", report.failed},
          {"wall_ms", report.wall_ms},
          {"build_ms", report.build_ms},
          {"jobs", report.jobs},
          {"device_id", ctx.device_id},
          {"out_dir", ctx.out_dir.string()},
          {"cached", ctx.store != nullptr},
          {"kernels", kernels}};
}

int run_model(const CommonOptions& options, const std::string& path, int jobs, bool verbose) {
  auto model = load_model(path);
  if (!model) {
    return fail(model.error());
  }
  std::optional<Store> store;
  auto ctx = make_context(options, store);
  if (!ctx) {
    return fail(ctx.error());
  }
  std::size_t done = 0;
  auto progress = [&](const ModelKernel& kernel) {
    ++done;
    if (!kernel.ok) {
      std::fprintf(stderr, "refcc: error: %s\n", kernel.error.c_str());
    } else if (verbose) {
      std::fprintf(stderr, "refcc: [%zu] %s %s (%s, %lld ms, %zu uses)\n", done, source_name(kernel.outcome.source),
                   kernel.outcome.stem.c_str(), kernel.op_type.c_str(), static_cast<long long>(kernel.outcome.build_ms),
                   kernel.uses);
    }
  };
  auto report = compile_model(*model, *ctx, jobs, progress);
  if (!report) {
    return fail(report.error());
  }
  if (options.json) {
    std::cout << report_json(*report, *ctx).dump() << "\n";
  } else {
    std::cout << "refcc: " << report->model << ": " << report->ops << " ops, " << report->distinct
              << " distinct kernels: " << report->hits << " hits, " << report->builds << " builds, " << report->bypassed
              << " bypassed, " << report->failed << " failed; wall " << seconds(report->wall_ms) << ", build time "
              << seconds(report->build_ms) << " (" << report->jobs << " jobs)\n";
  }
  if (report->first_error) {
    std::fprintf(stderr, "refcc: %zu of %zu kernels failed\n", report->failed, report->distinct);
    return static_cast<int>(report->first_error->code());
  }
  return 0;
}

int run_describe(const CommonOptions& options, const std::string& path, bool source, int device_id) {
  auto prepared = load_prepared_op(path);
  if (!prepared) {
    return fail(prepared.error());
  }
  BuildContext ctx;
  auto compiler = detect_compiler(options.cc);
  if (!compiler) {
    return fail(compiler.error());
  }
  ctx.compiler = *compiler;
  auto scenario = resolve_scenario(options.scenario, options.scenario_file, ctx.compiler);
  if (!scenario) {
    return fail(scenario.error());
  }
  ctx.scenario = *scenario;
  auto key = kernel_key(*prepared, ctx);
  if (!key) {
    return fail(key.error());
  }
  const KernelNames names = kernel_names(prepared->def->func_name, *key);
  if (source) {
    std::cout << generate_kernel_source(*prepared, names.symbol);
    return 0;
  }
  json result = {{"descriptor", prepared->descriptor},
                 {"func_name", names.func_name},
                 {"key", *key},
                 {"stem", names.stem(device_id)},
                 {"symbol", names.symbol},
                 {"scenario", scenario_json(ctx.scenario)}};
  std::cout << result.dump(2) << "\n";
  return 0;
}

int run_ops(bool as_json) {
  json list = json::array();
  for (const auto& def : op_registry()) {
    if (as_json) {
      list.push_back({{"op_type", def.op_type}, {"func_name", def.func_name}, {"summary", def.summary}});
    } else {
      std::cout << def.op_type << std::string(14 - std::min<std::size_t>(13, def.op_type.size()), ' ') << def.summary
                << "\n";
    }
  }
  if (as_json) {
    std::cout << list.dump() << "\n";
  }
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{"refcc: reference op compiler (generates C per op descriptor, compiles it, caches it with opcache)",
               "refcc"};
  app.set_version_flag(
      "--version", std::string("refcc ") + k_version_string + " (codegen v" + std::to_string(k_codegen_version) + ")");
  app.require_subcommand(1);

  CommonOptions compile_options;
  std::string compile_path;
  auto* compile = app.add_subcommand("compile", "Compile one op descriptor");
  compile->add_option("descriptor", compile_path, "Op descriptor JSON file")->required();
  compile_options.add_to(*compile, true);

  CommonOptions model_options;
  std::string model_path;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool verbose = false;
  auto* model = app.add_subcommand("model", "Compile every op of a model op list");
  model->add_option("model", model_path, "Model JSON file ({\"name\", \"ops\": [descriptor, ...]})")->required();
  model->add_option("--jobs,-j", jobs, "Parallel compile jobs (default: number of CPUs)")->check(integer_in(1, 1024));
  model->add_flag("--verbose,-v", verbose, "Print one line per kernel on stderr");
  model_options.add_to(*model, true);

  CommonOptions describe_options;
  std::string describe_path;
  bool describe_source = false;
  int describe_device = 0;
  auto* describe = app.add_subcommand("describe", "Print the normalized descriptor, key and names (or the C source)");
  describe->add_option("descriptor", describe_path, "Op descriptor JSON file")->required();
  describe->add_flag("--source", describe_source, "Print the generated C source instead");
  describe->add_option("--device-id", describe_device, "Device id for the stem")->check(integer_in(0, k_max_device_id));
  describe_options.add_to(*describe, false);

  bool ops_json = false;
  auto* ops = app.add_subcommand("ops", "List the supported op types");
  ops->add_flag("--json", ops_json, "Print JSON");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (*compile) {
    return run_compile(compile_options, compile_path);
  }
  if (*model) {
    return run_model(model_options, model_path, jobs, verbose);
  }
  if (*describe) {
    return run_describe(describe_options, describe_path, describe_source, describe_device);
  }
  return run_ops(ops_json);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "refcc: internal error: %s\n", e.what());
    return static_cast<int>(opcache::ErrorCode::internal);
  }
}
