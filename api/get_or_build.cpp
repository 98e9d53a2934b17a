// Store::get_or_build: the transparent path compilers call. Modes, debug
// bypass and single flight are applied here; storing and reading is store/.
#include <algorithm>
#include <chrono>

#include "api/build_clock.hpp"
#include "api/store_impl.hpp"
#include "base/file_digest.hpp"
#include "base/file_io.hpp"
#include "base/json_parse.hpp"
#include "base/temporary_directory.hpp"
#include "base/try.hpp"
#include "store/exec_key.hpp"
#include "store/key.hpp"
#include "store/scenario.hpp"
#include "store/single_flight.hpp"

namespace opcache {

namespace {

namespace fs = std::filesystem;

using api::milliseconds_since;

// Moves the files a build wrote into its work directory to out_dir.
Result<std::vector<fs::path>> move_build_outputs(const fs::path& work, const fs::path& out_dir) {
  std::vector<fs::path> produced;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(work, ec)) {
    if (!item.is_regular_file(ec) || item.is_symlink(ec)) {
      return Error::build_failed("the build wrote " + item.path().filename().string() +
                                 ", which is not a regular file; opcache stores flat regular files only");
    }
    produced.push_back(item.path());
  }
  if (ec) {
    return Error::io("cannot list build outputs in " + work.string() + ": " + ec.message());
  }
  if (produced.empty()) {
    return Error::build_failed("the build succeeded but wrote no files into its work directory");
  }
  std::sort(produced.begin(), produced.end());
  std::vector<fs::path> placed;
  for (const auto& file : produced) {
    fs::path target = out_dir / file.filename();
    fs::rename(file, target, ec);
    if (ec) {
      return Error::io("cannot move " + file.string() + " to " + target.string() + ": " + ec.message());
    }
    placed.push_back(target);
  }
  return placed;
}

// The descriptor member that holds the digests of get_or_build's declared inputs.
constexpr const char* k_declared_inputs_member = "declared_inputs";

// Refuses a declared input that does not exist or is neither a file nor a
// directory, naming it as the caller gave it.
Status check_declared_input(const fs::path& input) {
  std::error_code ec;
  const auto status = fs::status(input, ec);
  if (!fs::exists(status)) {
    return Error::usage("declared input \"" + input.string() + "\" does not exist" +
                        (ec ? " (" + ec.message() + ")" : "") +
                        ": declare the files and directories the build reads, as paths that exist when "
                        "get_or_build is called");
  }
  if (!fs::is_regular_file(status) && !fs::is_directory(status)) {
    return Error::usage("declared input \"" + input.string() +
                        "\" is neither a regular file nor a directory: declare the file or directory the build reads");
  }
  return {};
}

// Sets the member "declared_inputs" of `descriptor` (a JSON object) to the
// digests of `inputs`, as exec keys its --input (store::declared_input_digests):
// paths below `base_dir` as {base}, digests remembered in `digests`.
Status add_declared_inputs(nlohmann::json& descriptor, const std::vector<fs::path>& inputs, const fs::path& base_dir,
                           const base::DigestCache& digests) {
  if (descriptor.contains(k_declared_inputs_member)) {
    return Error::usage(
        "descriptor: the member \"declared_inputs\" is reserved: get_or_build sets it to the "
        "digests of the declared inputs; rename that member of the descriptor");
  }
  std::vector<std::string> paths;
  for (const auto& input : inputs) {
    OPCACHE_TRY(check_declared_input(input));
    paths.push_back(input.string());
  }
  OPCACHE_TRY_ASSIGN(descriptor[k_declared_inputs_member], store::declared_input_digests(paths, base_dir, digests));
  return {};
}

// The descriptor as get_or_build keys it with declared inputs: parsed, the
// member "declared_inputs" added, volatile fields removed (by `filter`).
Result<store::Descriptor> declared_descriptor(std::string_view descriptor_json, const std::vector<fs::path>& inputs,
                                              const fs::path& base_dir, const fs::path& root,
                                              const store::VolatileFieldFilter& filter) {
  OPCACHE_TRY_ASSIGN(auto raw, base::parse_json(descriptor_json, "descriptor"));
  if (raw.is_object()) {  // anything else is refused by normalize_descriptor, with its message
    OPCACHE_TRY(add_declared_inputs(raw, inputs, base_dir, base::DigestCache(root / "digests")));
  }
  return store::normalize_descriptor(std::move(raw), filter, "descriptor");
}

}  // namespace

Result<BuildResult> Store::get_or_build_in_place(std::string_view descriptor_json, const Scenario& scenario,
                                                 const fs::path& out_dir, const BuildInPlaceFunction& build) {
  return get_or_build_in_place(descriptor_json, scenario, out_dir, build, GetOrBuildOptions{});
}

Result<BuildResult> Store::get_or_build_in_place(std::string_view descriptor_json, const Scenario& scenario,
                                                 const fs::path& out_dir, const BuildInPlaceFunction& build,
                                                 const GetOrBuildOptions& options) {
  OPCACHE_TRY_ASSIGN(auto descriptor, options.inputs.empty() ? m_impl->descriptor(descriptor_json)
                                                             : declared_descriptor(descriptor_json, options.inputs,
                                                                                   m_impl->settings.base_dir.value,
                                                                                   root(), m_impl->volatile_fields));
  const auto scenario_json = store::scenario_to_json(scenario);
  BuildResult result;
  OPCACHE_TRY_ASSIGN(result.key, store::derive_key(descriptor.normalized, scenario_json));

  if (auto reason = bypass_reason(descriptor.op_type)) {
    const auto start = std::chrono::steady_clock::now();
    OPCACHE_TRY_ASSIGN(result.files, build());
    result.build_ms = milliseconds_since(start);
    result.source = BuildSource::bypassed;
    result.note = "cache bypassed: " + *reason;
    return result;
  }

  m_impl->check_revocations();  // when due: a hit between checks reads one small file
  store::LocalStore& local = *m_impl->local;
  const auto hint = m_impl->lookup_hint(descriptor.op_type, scenario_json);
  const bool force = m_impl->settings.mode.value == store::CacheMode::force;
  // Misses are counted once, by build_and_store.
  auto get_local = [&]() { return local.get(result.key, out_dir, store::CountMisses::no); };
  auto try_hit = [&]() -> Result<bool> {
    if (force) {
      // In force mode only entries stored since this Store was opened count:
      // those were rebuilt by this run (here or by a process we waited for).
      OPCACHE_TRY_ASSIGN(auto entry, local.find(result.key));
      if (!entry || entry->created_ms < m_impl->opened_at_ms) {
        return false;
      }
    }
    OPCACHE_TRY_ASSIGN(auto hit, get_local());
    if (!hit && !force) {
      // Layered lookup: a verified remote hit becomes a local entry.
      OPCACHE_TRY_ASSIGN(bool fetched, m_impl->fetch_from_remotes(result.key, hint, &scenario));
      if (fetched) {
        OPCACHE_TRY_ASSIGN(hit, get_local());
      }
    }
    if (!hit) {
      return false;
    }
    result.files = hit->files;
    return true;
  };
  bool stored_now = false;
  // Builds and stores locally; uploads are the caller's.
  auto build_locally = [&]() -> Status {
    const auto start = std::chrono::steady_clock::now();
    OPCACHE_TRY_ASSIGN(auto files, build());
    result.build_ms = milliseconds_since(start);
    result.files = files;
    store::BundleInput input;
    input.descriptor = descriptor.normalized;
    input.scenario = scenario_json;
    input.build_ms = result.build_ms;
    for (const auto& file : files) {
      input.members.push_back({file.filename().string(), file, ""});
    }
    auto stored = local.put(input, force ? ReplacePolicy::replace : ReplacePolicy::keep_existing);
    if (!stored) {
      // The kernel is built and usable; failing to cache it must not fail the compile.
      local.options().warn("built " + result.key + " but could not store it: " + stored.error().message());
    }
    stored_now = stored && stored->stored;
    return {};
  };
  bool built_elsewhere = false;  // by another machine, through team single flight
  auto build_and_store = [&]() -> Status {
    // Null unless the mode is enable (store.cpp open_team_flight), so never in force mode.
    remote::TeamFlight* team = m_impl->team.get();
    const remote::Remote* uploaded_to = nullptr;
    if (team == nullptr) {
      OPCACHE_TRY(build_locally());
    } else {
      auto fetch = [&] { return m_impl->fetch_from_remotes(result.key, hint); };
      OPCACHE_TRY_ASSIGN(auto outcome, team->run(result.key, hint, fetch, build_locally));
      if (outcome == remote::TeamOutcome::fetched) {
        OPCACHE_TRY_ASSIGN(auto hit, get_local());
        if (hit) {
          result.files = hit->files;
          built_elsewhere = true;
          return {};
        }
        OPCACHE_TRY(build_locally());  // gone again at once (aging): build it after all
      } else if (outcome == remote::TeamOutcome::built_and_uploaded) {
        uploaded_to = &team->remote();
      }
    }
    if (stored_now) {
      m_impl->after_store(result.key, uploaded_to);
    }
    (void)local.record_miss();
    return {};
  };

  store::SingleFlight flight(local.layout().locks(), std::chrono::seconds(m_impl->settings.wait_timeout_s.value));
  OPCACHE_TRY_ASSIGN(auto outcome, flight.run(result.key, try_hit, build_and_store));
  result.source = outcome == store::FlightOutcome::hit || built_elsewhere ? BuildSource::hit : BuildSource::built;
  return result;
}

Result<BuildResult> Store::get_or_build(std::string_view descriptor_json, const Scenario& scenario,
                                        const fs::path& out_dir, const BuildFunction& build) {
  return get_or_build(descriptor_json, scenario, out_dir, build, GetOrBuildOptions{});
}

Result<BuildResult> Store::get_or_build(std::string_view descriptor_json, const Scenario& scenario,
                                        const fs::path& out_dir, const BuildFunction& build,
                                        const GetOrBuildOptions& options) {
  OPCACHE_TRY(base::ensure_directory(out_dir));
  auto build_in_work_dir = [&]() -> Result<std::vector<fs::path>> {
    OPCACHE_TRY_ASSIGN(auto work, base::TemporaryDirectory::create(out_dir, ".opcache-build-"));
    auto built = build(work.path());
    if (!built) {
      return built.error();
    }
    return move_build_outputs(work.path(), out_dir);
  };
  return get_or_build_in_place(descriptor_json, scenario, out_dir, build_in_work_dir, options);
}

}  // namespace opcache
