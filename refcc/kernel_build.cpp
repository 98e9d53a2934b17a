#include "refcc/kernel_build.hpp"

#include <chrono>
#include <cstdlib>

#include "base/file_io.hpp"
#include "base/temporary_directory.hpp"
#include "base/try.hpp"
#include "opcache/key.hpp"
#include "refcc/codegen.hpp"

namespace opcache::refcc {

namespace fs = std::filesystem;

namespace {

std::int64_t elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

const char* source_name(BuildSource source) noexcept {
  switch (source) {
    case BuildSource::hit:
      return "hit";
    case BuildSource::built:
      return "built";
    case BuildSource::bypassed:
      return "bypassed";
  }
  return "?";
}

Result<std::string> kernel_key(const PreparedOp& prepared, const BuildContext& ctx) {
  const std::string descriptor = prepared.descriptor.dump();
  if (ctx.store != nullptr) {
    return ctx.store->key(descriptor, ctx.scenario);
  }
  std::optional<std::string> setting;
  if (const char* value = std::getenv("OPCACHE_VOLATILE_FIELDS")) {
    setting = value;
  }
  return derive_key(descriptor, ctx.scenario, setting);
}

Status build_neutral_triple(const PreparedOp& prepared, const KernelNames& names, const BuildContext& ctx,
                            const fs::path& dir) {
  const std::string source = generate_kernel_source(prepared, names.symbol);
  auto compiled = compile_c(ctx.compiler, source, names.neutral_stem, dir / (names.neutral_stem + ".o"));
  if (!compiled) {
    return compiled.error().with_context(prepared.op.op_type + " kernel " + names.neutral_stem);
  }
  return write_neutral_metadata(dir, names, prepared, ctx.scenario);
}

Result<KernelOutcome> build_kernel(const PreparedOp& prepared, const std::string& key, const BuildContext& ctx) {
  KernelOutcome outcome;
  outcome.key = key;
  outcome.names = kernel_names(prepared.def->func_name, key);
  outcome.stem = outcome.names.stem(ctx.device_id);
  OPCACHE_TRY(base::ensure_directory(ctx.out_dir));
  // Inside out_dir (same file system, so publishing is a rename), removed
  // with whatever is left in it.
  OPCACHE_TRY_ASSIGN(auto stage,
                     base::TemporaryDirectory::create(ctx.out_dir, ".refcc-" + outcome.names.neutral_stem + "-"));
  auto build = [&](const fs::path& work_dir) { return build_neutral_triple(prepared, outcome.names, ctx, work_dir); };

  if (ctx.store == nullptr) {
    const auto start = std::chrono::steady_clock::now();
    OPCACHE_TRY(build(stage.path()));
    outcome.build_ms = elapsed_ms(start);
    outcome.source = BuildSource::bypassed;
    outcome.note = "--no-cache";
  } else {
    OPCACHE_TRY_ASSIGN(auto result,
                       ctx.store->get_or_build(prepared.descriptor.dump(), ctx.scenario, stage.path(), build));
    if (result.key != key) {
      return Error::internal("the store derived key " + result.key + " for a kernel refcc named after key " + key);
    }
    outcome.source = result.source;
    outcome.build_ms = result.build_ms;
    outcome.note = result.note;
  }
  OPCACHE_TRY_ASSIGN(outcome.files, publish_kernel(stage.path(), ctx.out_dir, outcome.names, ctx.device_id));
  return outcome;
}

}  // namespace opcache::refcc
