// Store::exec: a compiler command line run through the cache, keyed on what
// its process tree reads (docs/formats.md "What exec keys on", "Exec
// manifests"). The command key (descriptor, scenario, command line,
// compiler, exec_env, --input, standard input) names a manifest of earlier
// traced builds; a build whose every observed input still has its digest
// names the entry to write out. A miss runs the command under the tracer,
// stores the files it wrote in --out under the entry key of what it read,
// and adds that build to the manifest.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <system_error>
#include <thread>

#include "api/build_clock.hpp"
#include "api/exec_process.hpp"
#include "base/environment.hpp"
#include "api/store_impl.hpp"
#include "base/file_io.hpp"
#include "base/json_parse.hpp"
#include "base/program_search.hpp"
#include "base/try.hpp"
#include "store/exec_key.hpp"
#include "store/exec_manifest_file.hpp"
#include "store/key.hpp"
#include "store/manifest.hpp"
#include "store/digest_prefetch.hpp"
#include "store/observed_inputs.hpp"
#include "store/scenario.hpp"
#include "store/single_flight.hpp"
#include "trace/process_tracer.hpp"

namespace opcache {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using api::milliseconds_since;

// A build that fails because the command did: nothing is stored, waiters learn why.
Error command_failed(int status) {
  return Error::build_failed("the command exited with status " + std::to_string(status));
}

// The note of a miss run untraced because the system refused to trace it.
std::string untraced_note(const Error& refusal) {
  return "not cached: this system does not let opcache trace the command (" + refusal.message() + ")";
}

Status check_output_names(const ExecRequest& request) {
  for (const auto& name : request.outputs) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      return Error::usage("--output \"" + name + "\" must be a file name inside --out, without '/'");
    }
  }
  if (request.command.empty()) {
    return Error::usage("no command to run");
  }
  return {};
}

// Everything one exec knows before it looks anything up.
struct ExecPlan {
  const ExecRequest& request;
  store::Descriptor descriptor;  // the command descriptor: --desc plus the member "exec"
  json scenario;
  std::string command_key;
  store::PathFrame frame;
  base::DigestCache digests;
  api::CommandInput input;
  CompilerCheck compiler_check;  // decides whether the programs a build runs are inputs (programs_by)
};

// The files the command produced: the declared outputs, which it must have
// written, or else what the trace shows it wrote directly in --out.
Result<std::vector<fs::path>> produced_files(const ExecRequest& request, const store::ObservedBuild& observed) {
  if (request.outputs.empty()) {
    if (observed.outputs.empty()) {
      return Error::build_failed("the command succeeded but wrote no files into " + request.out.string());
    }
    return observed.outputs;
  }
  std::vector<fs::path> files;
  for (const auto& name : request.outputs) {
    const auto file = (fs::absolute(request.out) / name).lexically_normal();
    if (std::find(observed.outputs.begin(), observed.outputs.end(), file) == observed.outputs.end()) {
      return Error::build_failed("the command succeeded but did not write --output " + name + " in " +
                                 request.out.string());
    }
    files.push_back(file);
  }
  return files;
}

// `files` (absolute, directly in --out) spelled below --out as the caller gave it.
std::vector<fs::path> as_named_under_out(const std::vector<fs::path>& files, const fs::path& out) {
  std::vector<fs::path> named;
  for (const auto& file : files) {
    named.push_back(out / file.filename());
  }
  return named;
}

std::vector<std::string> member_names(const std::vector<fs::path>& files) {
  std::vector<std::string> names;
  for (const auto& file : files) {
    names.push_back(file.filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// compiler_check content and mtime identify programs by what they are: the
// programs the command ran are inputs; none, string: and command: stand for
// the toolchain themselves.
store::ProgramInputs programs_by(const CompilerCheck& check, const std::string& argv0) {
  store::ProgramInputs programs;
  programs.digested = check.kind == CompilerCheck::Kind::content || check.kind == CompilerCheck::Kind::mtime;
  const auto env = base::process_environment();
  if (auto found = base::find_program(argv0, env("PATH").value_or("/bin:/usr/bin"), base::EmptyPathEntry::current_directory)) {
    programs.compiler.push_back(fs::absolute(*found).lexically_normal().string());
    std::error_code ec;
    auto real = fs::canonical(*found, ec);
    if (!ec) {
      programs.compiler.push_back(real.string());
    }
  }
  return programs;
}

// What an exec run uses of its Store.
struct ExecContext {
  store::LocalStore& local;
  remote::RemoteSet* remotes;  // null or empty: none
  bool force;                  // mode force: only entries stored since opened_at_ms are hits
  std::int64_t opened_at_ms;
  remote::TeamFlight* team;    // team single flight, or null
  remote::LookupHint hint;     // what the lookups are for, told to a server
  std::function<Result<bool>(const std::string& key)> fetch;  // the remotes' layered lookup of a key
  /// Lets the remotes prefetch the command's scenario (entries and exec manifests) into the local store;
  /// whether anything was pulled.
  std::function<bool()> prefetch;
  /// Queues a stored key for upload to every uploading remote but the one given.
  std::function<void(const std::string& key, const remote::Remote* except)> after_store;
};

// Readies the store's write of the build on a thread of its own while the
// command runs, so that storing it does not wait for SQLite to load, the
// index to open, its statements to be prepared, the bundle's temp file and
// the manifest's directory to be created (together about two milliseconds
// of a miss on this project's machine, where each new inode costs 0.1-0.4
// ms, on the compile's critical path otherwise). The thread waits for the
// command to start (the tracer's first event): loading SQLite earlier took
// a CPU from the threads and the child that start the command, which on a
// 2-CPU machine waited for it (the probe of seccomp notifications alone:
// 0.37 ms started first, 1.25 ms behind it). Without a thread, the store
// does it all when it first writes, as it would anyway. Joined when it goes
// out of scope.
class StoreWarmup {
 public:
  StoreWarmup(store::LocalStore& local, const std::string& command_key) {
    try {
      m_thread = std::thread([this, &local, &command_key] {
        m_command_started.wait(false);
        local.warm_for_put();
        store::prepare_exec_manifest_directory(local.layout(), command_key);
      });
    } catch (const std::system_error&) {
    }
  }
  StoreWarmup(const StoreWarmup&) = delete;
  StoreWarmup& operator=(const StoreWarmup&) = delete;
  ~StoreWarmup() {
    command_started();
    if (m_thread.joinable()) {
      m_thread.join();
    }
  }

  /// Lets the thread start: the command has started (or will not).
  /// Cheap after the first call; safe from any thread.
  void command_started() noexcept {
    if (!m_command_started.exchange(true)) {
      m_command_started.notify_one();
    }
  }

 private:
  std::atomic<bool> m_command_started{false};
  std::thread m_thread;  // last: its lambda uses the member above
};

// One exec's lookup and build, under single flight on its command key.
class ExecRun {
 public:
  ExecRun(const ExecContext& context, ExecPlan& plan, ExecResult& result)
      : m_context(context), m_plan(plan), m_result(result) {}

  // A build of the manifest whose inputs all hold, written out: true.
  Result<bool> try_hit() {
    OPCACHE_TRY_ASSIGN(auto local_manifest, local_manifest_of());
    if (local_manifest) {
      OPCACHE_TRY_ASSIGN(bool hit, try_builds(*local_manifest));
      if (hit) {
        return true;
      }
    }
    return try_remote_manifests();
  }

  // Builds (through team single flight when there is a team server), then
  // queues what was stored for upload.
  Status build() {
    if (m_context.team == nullptr) {
      OPCACHE_TRY(build_locally());
      finish(nullptr);
      return {};
    }
    auto fetch = [this] { return try_remote_manifests(); };
    auto build_here = [this] { return build_locally(); };
    auto publish = [this] { return publish_to(*m_context.team); };
    OPCACHE_TRY_ASSIGN(auto outcome, m_context.team->run(m_plan.command_key, m_context.hint, fetch, build_here, publish));
    if (outcome == remote::TeamOutcome::fetched) {
      m_built_elsewhere = true;
      return {};
    }
    finish(outcome == remote::TeamOutcome::built_and_uploaded ? &m_context.team->remote() : nullptr);
    return {};
  }

  /// Whether another machine built it while this one waited (team single flight).
  bool built_elsewhere() const { return m_built_elsewhere; }

 private:
  // The remotes' manifests of the command, merged into the local one, and
  // the first of their builds whose inputs hold.
  // A fresh machine's first lookup of a scenario prefetches it first, so
  // that its other commands find their manifests here, not one request each.
  Result<bool> try_remote_manifests() {
    if (m_context.remotes == nullptr || m_context.remotes->empty() || m_context.force) {
      return false;
    }
    OPCACHE_TRY_ASSIGN(bool prefetched_hit, try_prefetched_manifest());
    if (prefetched_hit) {
      return true;
    }
    OPCACHE_TRY_ASSIGN(auto remote_manifest, m_context.remotes->fetch_exec_manifests(m_plan.command_key));
    if (!remote_manifest) {
      return false;
    }
    (void)store::merge_into_exec_manifest(m_context.local.layout(), *remote_manifest);
    return try_builds(*remote_manifest);
  }

  // The local manifest once the remotes have had the chance to prefetch the
  // scenario, and the first of its builds not yet tried whose inputs hold;
  // read again only when the prefetch pulled something (try_hit read it).
  Result<bool> try_prefetched_manifest() {
    if (!m_context.prefetch()) {
      return false;
    }
    OPCACHE_TRY_ASSIGN(auto manifest, local_manifest_of());
    if (!manifest) {
      return false;
    }
    return try_builds(*manifest);
  }

  // The entry and the manifest of this build, to the team server at once.
  Status publish_to(remote::TeamFlight& team) {
    if (!m_stored) {
      return {};  // nothing to share (not cacheable)
    }
    OPCACHE_TRY(team.upload_entry(m_result.build.key));
    return team.remote().store->store_exec_manifest(*m_stored);
  }

  // Queues the stored entry and manifest for upload, to every remote but `uploaded_to`.
  void finish(const remote::Remote* uploaded_to) {
    if (m_stored) {
      m_context.after_store(m_result.build.key, uploaded_to);
      if (m_context.remotes != nullptr) {
        // After the entry, to every uploading remote (the team server merges a second copy as a no-op).
        m_context.remotes->enqueue_exec_manifest_upload(m_plan.command_key);
      }
    }
    if (!m_miss_counted) {
      (void)m_context.local.record_miss();
    }
  }

  // Runs the command under the tracer, digesting the files it reads while
  // it runs; stores its outputs and its build locally. Where tracing is
  // refused, runs it untraced and stores nothing.
  Status build_locally() {
    const auto start = std::chrono::steady_clock::now();
    StoreWarmup warmup(m_context.local, m_plan.command_key);
    const auto programs = programs_by(m_plan.compiler_check, m_plan.request.command[0]);  // a miss only: a PATH search
    store::DigestPrefetch prefetch(m_plan.digests, programs.digested);
    trace::TraceRequest traced{m_plan.request.command, m_plan.input.fd,
                               [&prefetch, &warmup](const trace::PathEvent& event) {
                                 warmup.command_started();
                                 prefetch.offer(event);
                               },
                               std::nullopt};
    auto outcome = trace::run_traced(traced);
    warmup.command_started();  // a command that ran unseen, or not at all
    if (!outcome && trace::is_tracing_refused(outcome.error())) {
      OPCACHE_TRY_ASSIGN(m_result.command_status, api::run_untraced(m_plan.request.command, m_plan.input.fd));
      m_result.build.build_ms = milliseconds_since(start);
      m_result.notes.push_back(untraced_note(outcome.error()));
      return {};
    }
    OPCACHE_TRY(outcome);
    m_result.build.build_ms = milliseconds_since(start);
    m_result.command_status = outcome->status;
    if (outcome->status != 0) {
      return command_failed(outcome->status);
    }
    prefetch.finish();
    OPCACHE_TRY_ASSIGN(auto observed, store::observe_build(*outcome, m_plan.frame, m_plan.digests, programs));
    OPCACHE_TRY_ASSIGN(auto files, produced_files(m_plan.request, observed));
    m_result.build.files = as_named_under_out(files, m_plan.request.out);
    if (observed.uncacheable) {
      m_result.notes.push_back("not cached: " + *observed.uncacheable);
      return {};
    }
    OPCACHE_TRY_ASSIGN(auto entry_descriptor, store::exec_entry_descriptor(m_plan.descriptor.normalized, observed.inputs));
    OPCACHE_TRY_ASSIGN(m_result.build.key, store::derive_key(entry_descriptor, m_plan.scenario));
    store(entry_descriptor, observed);
    return {};
  }

  Result<std::optional<store::ExecManifest>> local_manifest_of() {
    auto manifest = store::read_exec_manifest(m_context.local.layout(), m_plan.command_key);
    if (!manifest) {
      m_context.local.options().warn("ignoring exec manifest: " + manifest.error().message());
      return std::optional<store::ExecManifest>();
    }
    return manifest;
  }

  // The first build of `manifest` not in `tried` whose inputs all hold and
  // whose entry is here or on a remote, written out.
  Result<bool> try_builds(const store::ExecManifest& manifest) {
    for (const auto& build : manifest.builds) {
      if (!m_tried.insert(build.entry).second) {
        continue;
      }
      std::map<std::string, std::string> seen_now;
      if (auto changed = store::first_changed_input(build, m_plan.frame, m_plan.digests, &seen_now)) {
        if (!m_result.miss_reason) {
          m_result.miss_reason = std::move(changed);
        }
        continue;
      }
      OPCACHE_TRY_ASSIGN(bool keys_as_recorded, entry_matches_inputs(build));
      if (!keys_as_recorded) {
        continue;  // not what these inputs key as: a foreign or damaged manifest
      }
      OPCACHE_TRY_ASSIGN(bool hit, get_entry(build.entry));
      if (hit) {
        remember_seen(manifest.command_key, build, std::move(seen_now));
        return true;
      }
    }
    return false;
  }

  // Whether `build.entry` is the key of the command with `build.inputs`. A
  // build with a `seen` was keyed by this machine (ManifestBuild::seen), so
  // its entry is taken as it is; any other is derived again, which costs a
  // hit about a sixth of its own work (the canonical JSON of every input).
  Result<bool> entry_matches_inputs(const store::ManifestBuild& build) const {
    if (!build.seen.empty()) {
      return true;
    }
    OPCACHE_TRY_ASSIGN(auto descriptor, store::exec_entry_descriptor(m_plan.descriptor.normalized, build.inputs));
    OPCACHE_TRY_ASSIGN(auto key, store::derive_key(descriptor, m_plan.scenario));
    return key == build.entry;
  }

  // Records in the local manifest the identities of the files a hit had to
  // read, so that the next hit only stats them (after a pull, a touch, a
  // manifest from a remote). Best effort: the hit stands either way.
  void remember_seen(const std::string& command_key, const store::ManifestBuild& build,
                     std::map<std::string, std::string> seen_now) {
    if (seen_now.empty()) {
      return;
    }
    store::ManifestBuild updated = build;
    seen_now.insert(build.seen.begin(), build.seen.end());  // an identity just seen wins
    updated.seen = std::move(seen_now);
    (void)store::merge_into_exec_manifest(m_context.local.layout(), {command_key, {std::move(updated)}});
  }

  Result<bool> get_entry(const std::string& key) {
    store::LocalStore& local = m_context.local;
    if (m_context.force) {
      // Only entries stored since this Store was opened count: this run built them.
      OPCACHE_TRY_ASSIGN(auto entry, local.find(key));
      if (!entry || entry->created_ms < m_context.opened_at_ms) {
        return false;
      }
    }
    OPCACHE_TRY_ASSIGN(auto hit, local.get(key, m_plan.request.out, store::CountMisses::no));
    if (!hit && !m_context.force) {
      OPCACHE_TRY_ASSIGN(bool fetched, m_context.fetch(key));
      if (fetched) {
        OPCACHE_TRY_ASSIGN(hit, local.get(key, m_plan.request.out, store::CountMisses::no));
      }
    }
    if (!hit) {
      return false;
    }
    m_result.build.key = key;
    m_result.build.files = hit->files;
    return true;
  }

  // Stores the outputs under the entry key and the build in the manifest; a
  // failure to cache is a warning, never a failed compile.
  void store(const json& entry_descriptor, const store::ObservedBuild& observed) {
    store::BundleInput input;
    input.descriptor = entry_descriptor;
    input.scenario = m_plan.scenario;
    input.build_ms = m_result.build.build_ms;
    for (const auto& file : m_result.build.files) {
      input.members.push_back({file.filename().string(), file, ""});
    }
    // The manifest is written on a thread of its own while the entry is
    // stored (a CPU is free once the command has ended): a third of a
    // millisecond off the miss. Under the command key's single flight, no
    // other exec of this command builds meanwhile; one that reads the
    // manifest before the entry is there takes it for a miss, as it would a
    // manifest whose entry was evicted (and so it stays if the put fails).
    store::ManifestBuild build{observed.inputs, member_names(m_result.build.files), m_result.build.key,
                               store::rfc3339_now(), observed.seen};
    const auto manifest = store::add_manifest_build({m_plan.command_key, {}}, std::move(build));
    std::optional<Result<store::ExecManifest>> merged;
    auto write_manifest = [this, &manifest, &merged] {
      merged.emplace(store::merge_into_exec_manifest(m_context.local.layout(), manifest));
    };
    std::thread writer;
    try {
      writer = std::thread(write_manifest);
    } catch (const std::system_error&) {
    }
    // The miss is counted in the put's own transaction: one index commit, not two.
    m_context.local.record_miss_with_next_write();
    m_miss_counted = true;
    // Not synced: an exec entry lost to a power cut costs a rebuild (ccache syncs nothing either).
    auto stored = m_context.local.put(input, m_context.force ? ReplacePolicy::replace : ReplacePolicy::keep_existing,
                                      base::Durability::deferred);
    (void)m_context.local.flush_pending_misses();  // a put that wrote no row (kept, failed) did not take it
    if (writer.joinable()) {
      writer.join();
    } else {
      write_manifest();
    }
    if (!stored) {
      m_context.local.options().warn("built " + m_result.build.key + " but could not store it: " +
                                     stored.error().message());
      return;
    }
    if (!*merged) {
      m_context.local.options().warn("stored " + m_result.build.key + " but not its exec manifest: " +
                                     merged->error().message());
      return;
    }
    m_stored = std::move(**merged);
  }

  const ExecContext& m_context;
  ExecPlan& m_plan;
  ExecResult& m_result;
  std::set<std::string> m_tried;                // entries already looked for
  std::optional<store::ExecManifest> m_stored;  // the manifest written after a stored build
  bool m_built_elsewhere = false;
  bool m_miss_counted = false;  // store() counted this build's miss
};

// Runs the command without the cache, for one of `why`.
Result<ExecResult> run_uncached(const ExecRequest& request, int stdin_fd, BuildSource source, std::string note) {
  ExecResult result;
  const auto start = std::chrono::steady_clock::now();
  OPCACHE_TRY_ASSIGN(result.command_status, api::run_untraced(request.command, stdin_fd));
  result.build.build_ms = milliseconds_since(start);
  result.build.source = source;
  if (source == BuildSource::bypassed) {
    result.build.note = std::move(note);
  } else {
    result.notes.push_back(std::move(note));
  }
  return result;
}

// The note of a run that waited too long for another process's build.
std::string without_cache_note(const Error& error) {
  return "warning: " + error.message() + "; the command ran without the cache";
}

// What exec answers when the single flight (or get_or_build) failed: a
// command that failed is answered by its status (its own output said why);
// a wait that timed out before the command ran runs it without the cache
// (never fail a compile because of the cache); anything else is the error.
Result<ExecResult> after_failed_flight(const Error& error, ExecResult result, const ExecRequest& request,
                                       int stdin_fd) {
  if (result.command_status && *result.command_status != 0) {
    return result;
  }
  if (error.code() == ErrorCode::timeout && !result.command_status) {
    return run_uncached(request, stdin_fd, BuildSource::built, without_cache_note(error));
  }
  return error;
}

// The declared outputs of the command run untraced (this machine refused to
// trace it): the only outputs it can name.
Result<std::vector<fs::path>> declared_outputs_of_untraced_run(const ExecRequest& request, std::optional<int>& status) {
  OPCACHE_TRY_ASSIGN(status, api::run_untraced(request.command, request.stdin_fd));
  if (*status != 0) {
    return command_failed(*status);
  }
  std::vector<fs::path> files;
  for (const auto& name : request.outputs) {
    files.push_back(request.out / name);
    if (!fs::is_regular_file(files.back())) {
      return Error::build_failed("the command succeeded but did not write --output " + name);
    }
  }
  if (files.empty()) {
    return Error::usage("this machine does not let opcache trace the command: name its outputs with --output");
  }
  return files;
}

// The outputs of a run keyed on the descriptor alone: what the trace shows
// the command wrote in --out (or the declared outputs, where it cannot be traced).
Result<std::vector<fs::path>> run_for_outputs(const ExecRequest& request, std::optional<int>& status) {
  auto outcome = trace::run_traced({request.command, request.stdin_fd, {}, std::nullopt});
  if (!outcome && trace::is_tracing_refused(outcome.error())) {
    return declared_outputs_of_untraced_run(request, status);
  }
  OPCACHE_TRY(outcome);
  status = outcome->status;
  if (outcome->status != 0) {
    return command_failed(outcome->status);
  }
  OPCACHE_TRY_ASSIGN(auto observed, store::observe_build(*outcome, {request.out, {}, {}}, base::DigestCache()));
  return produced_files(request, observed);
}

// exec --key-on descriptor: get_or_build on the descriptor and scenario.
Result<ExecResult> exec_on_descriptor(Store& store, const ExecRequest& request) {
  ExecResult result;
  auto build = [&]() { return run_for_outputs(request, result.command_status); };
  auto built = store.get_or_build_in_place(request.descriptor_json, request.scenario, request.out, build);
  if (!built) {
    return after_failed_flight(built.error(), std::move(result), request, request.stdin_fd);
  }
  result.build = std::move(*built);
  return result;
}

// The plan of a command-keyed exec: the command descriptor and its key.
Result<std::unique_ptr<ExecPlan>> plan_exec(const ExecRequest& request, json user_descriptor, const Store& store,
                                            const std::function<Result<store::Descriptor>(json)>& normalize,
                                            const std::filesystem::path& temp_directory) {
  OPCACHE_TRY_ASSIGN(auto input, api::capture_command_input(request.stdin_fd, temp_directory));
  const auto policy = store.exec_key_policy();
  const base::DigestCache digests(store.root() / "digests");
  const auto cann_root = store::cann_root_of(base::process_environment());
  const store::ExecKeyRequest key_request{request.command, request.out, request.inputs, policy, cann_root,
                                          input.digest};
  OPCACHE_TRY_ASSIGN(auto member, store::exec_key_member(key_request, digests, base::process_environment()));
  OPCACHE_TRY_ASSIGN(auto with_member, store::descriptor_with_exec_member(std::move(user_descriptor), member,
                                                                          request.descriptor_origin));
  OPCACHE_TRY_ASSIGN(auto descriptor, normalize(std::move(with_member)));
  auto scenario = store::scenario_to_json(request.scenario);
  OPCACHE_TRY_ASSIGN(auto command_key, store::derive_key(descriptor.normalized, scenario));
  // --out made absolute once: keyed_path and unkeyed_path would otherwise ask for the working directory per input.
  store::PathFrame frame{fs::absolute(request.out).lexically_normal(), policy.base_dir, cann_root};
  return std::unique_ptr<ExecPlan>(new ExecPlan{request, std::move(descriptor), std::move(scenario),
                                                std::move(command_key), std::move(frame), digests, std::move(input),
                                                policy.compiler_check});
}

}  // namespace

Result<ExecResult> Store::exec(const ExecRequest& request) {
  auto parsed = base::parse_json(request.descriptor_json, "descriptor");
  auto raw = parsed ? m_impl->normalized_descriptor(*parsed) : Result<store::Descriptor>(parsed.error());
  if (!raw) {
    return raw.error().with_context(request.descriptor_origin);
  }
  OPCACHE_TRY(check_output_names(request));
  OPCACHE_TRY(base::ensure_directory(request.out));
  if (auto reason = bypass_reason(raw->op_type)) {
    return run_uncached(request, request.stdin_fd, BuildSource::bypassed, "cache bypassed: " + *reason);
  }
  if (request.key_on == ExecKeyOn::descriptor) {
    return exec_on_descriptor(*this, request);
  }
  auto normalize = [this](json descriptor) { return m_impl->normalized_descriptor(std::move(descriptor)); };
  OPCACHE_TRY_ASSIGN(auto plan, plan_exec(request, std::move(*parsed), *this, normalize, m_impl->local->layout().tmp()));
  if (plan->input.unkeyable) {
    return run_uncached(request, plan->input.fd, BuildSource::built, "not cached: " + *plan->input.unkeyable);
  }
  if (auto inherited = api::unseen_inherited_file()) {
    return run_uncached(request, plan->input.fd, BuildSource::built, "not cached: " + *inherited);
  }
  m_impl->check_revocations();
  const auto hint = m_impl->lookup_hint(plan->descriptor.op_type, plan->scenario);
  const ExecContext context{*m_impl->local,
                            m_impl->remotes.get(),
                            m_impl->settings.mode.value == store::CacheMode::force,
                            m_impl->opened_at_ms,
                            m_impl->team.get(),
                            hint,
                            [this, &hint, &request](const std::string& key) {
                              return m_impl->fetch_from_remotes(key, hint, &request.scenario);
                            },
                            [this, &request] { return m_impl->remotes->prefetch(scenario_filter(request.scenario)); },
                            [this](const std::string& key, const remote::Remote* except) {
                              m_impl->after_store(key, except);
                            }};
  ExecResult result;
  result.build.key = plan->command_key;
  ExecRun run(context, *plan, result);
  store::SingleFlight flight(m_impl->local->layout().locks(), std::chrono::seconds(m_impl->settings.wait_timeout_s.value));
  auto outcome = flight.run(
      plan->command_key, [&run] { return run.try_hit(); }, [&run] { return run.build(); });
  if (!outcome) {
    return after_failed_flight(outcome.error(), std::move(result), request, plan->input.fd);
  }
  const bool hit = *outcome == store::FlightOutcome::hit || run.built_elsewhere();
  result.build.source = hit ? BuildSource::hit : BuildSource::built;
  return result;
}

Result<std::optional<std::string>> Store::exec_miss_reason(const ExecRequest& request) {
  ExecRequest quiet = request;
  quiet.stdin_fd = -1;  // explaining reads no standard input
  OPCACHE_TRY_ASSIGN(auto parsed, base::parse_json(quiet.descriptor_json, "descriptor"));
  auto normalize = [this](json descriptor) { return m_impl->normalized_descriptor(std::move(descriptor)); };
  OPCACHE_TRY_ASSIGN(auto plan, plan_exec(quiet, std::move(parsed), *this, normalize, m_impl->local->layout().tmp()));
  auto manifest = store::read_exec_manifest(m_impl->local->layout(), plan->command_key);
  std::optional<store::ExecManifest> known = manifest ? *manifest : std::nullopt;
  if (m_impl->remotes && !m_impl->remotes->empty()) {
    OPCACHE_TRY_ASSIGN(auto remote, m_impl->remotes->fetch_exec_manifests(plan->command_key));
    if (remote) {
      auto merged = known ? store::merge_exec_manifests(*known, *remote) : Result<store::ExecManifest>(*remote);
      if (merged) {
        known = std::move(*merged);
      }
    }
  }
  if (!known || known->builds.empty()) {
    return std::optional<std::string>("this command was never built here or on a remote (no exec manifest)");
  }
  std::optional<std::string> first_reason;
  for (const auto& build : known->builds) {
    auto reason = store::first_changed_input(build, plan->frame, plan->digests);
    if (!reason) {
      return std::optional<std::string>();
    }
    if (!first_reason) {
      first_reason = std::move(reason);
    }
  }
  return first_reason;
}

Result<std::string> Store::exec_descriptor(const ExecRequest& request) {
  if (request.key_on == ExecKeyOn::descriptor) {
    return request.descriptor_json;
  }
  ExecRequest quiet = request;
  quiet.stdin_fd = -1;
  OPCACHE_TRY_ASSIGN(auto parsed, base::parse_json(quiet.descriptor_json, "descriptor"));
  auto normalize = [this](json descriptor) { return m_impl->normalized_descriptor(std::move(descriptor)); };
  OPCACHE_TRY_ASSIGN(auto plan, plan_exec(quiet, std::move(parsed), *this, normalize, m_impl->local->layout().tmp()));
  return plan->descriptor.normalized.dump();
}

}  // namespace opcache
