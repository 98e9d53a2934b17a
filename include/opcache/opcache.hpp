// opcache — C++ API.
//
// A compile cache for accelerator operator kernels. A kernel is stored under a
// key derived from its op descriptor (JSON) and its scenario; reading it back
// verifies every byte. Stores are safe to share between threads and between
// processes.
//
//   auto store = opcache::Store::open().value();
//   auto scenario = opcache::parse_scenario("phase=train,toolchain=8.0.RC2,soc=Ascend910B1").value();
//   auto key = store.key(descriptor_json, scenario).value();
//   if (auto hit = store.get(key, "kernel_meta").value()) { ... } else { build; store.put(...); }
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/result.hpp"
#include "opcache/scenario.hpp"
#include "opcache/types.hpp"
#include "opcache/version.hpp"

namespace opcache {

/// How a setting's value is written on each surface (CLI, C ABI JSON, Python).
enum class SettingType {
  text,        ///< one string (C ABI: a JSON string)
  path,        ///< a file or directory (C ABI: a JSON string; Python makes it absolute)
  integer,     ///< one integer (C ABI: a JSON integer)
  comma_list,  ///< comma-separated items (C ABI: a JSON string; Python also takes a list)
  repeated,    ///< each occurrence adds one value (CLI: a repeatable option; C ABI: a JSON array of strings)
  flag,        ///< on or off (CLI: an option without value; C ABI: a JSON boolean)
};

/// The name of a setting type ("text", "path", "integer", "comma_list", "repeated", "flag").
const char* to_string(SettingType type) noexcept;

/// One row of the settings table. The CLI options, the keys of
/// opcache_open_ex's JSON, the Python keyword arguments and the rows of
/// `opcache config` are all derived from this table (docs/configuration.md).
/// Every view points at static storage.
struct SettingDescriptor {
  std::string_view name;           ///< StoreConfig::set name, C ABI JSON key and Python keyword ("min_idle_s")
  std::string_view display;        ///< its row in `opcache config` ("min_idle"); "" when not shown there
  SettingType type = SettingType::text;
  bool settable = true;            ///< false: only the environment and files set it (CANN's aging pair)
  std::string_view flag;           ///< CLI option names in CLI11 form ("--cache-dir,-C"); "" when none
  std::string_view help;           ///< the CLI help text
  std::string_view env;            ///< environment variable ("OPCACHE_MODE"); "" when none
  std::string_view config_key;     ///< key in opcache.conf's [cache] section; "" when none
  std::string_view default_value;  ///< the built-in default, as text ("" when none)
};

/// Every setting, in `opcache config` order. Never empty; the vector lives
/// for the whole program. Thread-safe.
const std::vector<SettingDescriptor>& setting_descriptors();

/// How to open a store. Every field has a working default; unset optional
/// fields come from the environment, then the config file, then built-in
/// defaults (docs/configuration.md). `Store::settings()` shows the result.
struct StoreConfig {
  /// Cache root; empty means: OPCACHE_DIR, else $XDG_CACHE_HOME/opcache,
  /// else ~/.cache/opcache.
  std::filesystem::path cache_dir;
  /// INI config file; empty means OPCACHE_CONFIG, else <cache root>/opcache.conf if present.
  std::filesystem::path config_file;
  /// "enable" (default), "force" or "disable": how get_or_build uses the cache.
  std::optional<std::string> mode;
  /// Aging only removes entries idle at least this long (default 1800 s).
  std::optional<std::int64_t> min_idle_s;
  /// Non-zero bypasses the cache in get_or_build (CANN op_debug_level).
  std::optional<std::int64_t> op_debug_level;
  /// Comma-separated op types for which get_or_build bypasses the cache.
  std::optional<std::string> op_debug_list;
  /// Volatile descriptor field patterns (see docs/formats.md): "none"
  /// disables, "+a,b" adds to the built-in list, "a,b" replaces it.
  std::optional<std::string> volatile_fields;
  /// How long get_or_build waits for another process building the same key (default 3600 s).
  std::optional<std::int64_t> wait_timeout_s;
  /// Remotes, in lookup order ("URL[|attribute…]", see docs/remotes.md);
  /// empty means OPCACHE_REMOTE, else the config file's [remote "…"] sections.
  std::vector<std::string> remotes;
  /// Use no remote at all, whatever the environment and config say.
  bool no_remote = false;
  /// File holding the bearer token for http(s) remotes; empty means OPCACHE_TOKEN.
  std::filesystem::path token_file;
  /// zstd level for new bundles, 1..19.
  int compression_level = 3;
  /// Ed25519 private key (PKCS#8 PEM, mode 0600) that signs every entry this
  /// store writes; empty means OPCACHE_SIGNING_KEY, else the config file's
  /// signing_key, else none (entries are written unsigned).
  std::filesystem::path signing_key;
  /// Trusted signers' public keys, one NAME:BASE64 a line; empty means
  /// OPCACHE_TRUSTED_KEYS, else the config file's trusted_keys, else none.
  std::filesystem::path trusted_keys;
  /// Where a valid signature by a trusted key is required: "off", "remote"
  /// (entries from remotes) or "all" (local reads too). Unset: remote when
  /// trusted keys are configured, else off (docs/security.md).
  std::optional<std::string> require_signature;
  /// Build each kernel once per team (docs/remotes.md "Team single flight"):
  /// "true" or "false" (also 1/0, on/off, yes/no); unset means
  /// OPCACHE_TEAM_SINGLE_FLIGHT, else the config file, else true. Takes
  /// effect with an http(s) remote with `upload`, in mode enable.
  std::optional<std::string> team_single_flight;
  /// Accept a cache root that another user owns and the group may write, and
  /// make what opcache creates there group-writable (a team sharing one
  /// directory); unset means OPCACHE_SHARED_GROUP, else the config file.
  bool shared_group = false;
  /// How `opcache exec` identifies the compiler it runs: "content" (the
  /// default: a digest of the executable), "mtime", "none", "string:TEXT" or
  /// "command:CMD" (docs/formats.md "What exec keys on"); unset means
  /// OPCACHE_COMPILER_CHECK, else the config file.
  std::optional<std::string> compiler_check;
  /// Environment variables whose values `opcache exec` keys on: "+A,B" adds
  /// to the built-in list, "A,B" replaces it, "none" keys on none; unset
  /// means OPCACHE_EXEC_ENV, else the config file, else the built-in list.
  std::optional<std::string> exec_env;
  /// An absolute directory (a checkout, a CANN install's parent) below which
  /// `opcache exec` keys paths relative to it, in the command line and in
  /// the inputs it observes, so that two checkouts share (ccache's base_dir);
  /// unset or empty means OPCACHE_BASE_DIR, else the config file, else none.
  std::optional<std::string> base_dir;
  /// Seconds between two reads of a remote's revocation list by the
  /// processes of one cache directory (docs/remotes.md "Revocation"; 0:
  /// every use); unset means OPCACHE_REVOCATION_CHECK_INTERVAL, else the
  /// config file, else 300.
  std::optional<std::int64_t> revocation_check_interval_s;
  /// Sets the setting `name` (a settable row of setting_descriptors()) from
  /// its text form, as the CLI and the C ABI do: integers in decimal, flags
  /// "true"/"false", a `repeated` setting appends one value. The value is
  /// checked like a command-line flag. Errors: `usage` naming the setting and
  /// the value, or listing the allowed names for an unknown one. Not
  /// thread-safe (it changes this object).
  Status set(std::string_view name, std::string_view value);

  /// Receives warnings (a corrupt entry that was dropped, an invalid setting
  /// that was ignored, ...); default prints "opcache: warning: ..." to stderr.
  std::function<void(const std::string& message)> on_warning;
};

/// Where the result of get_or_build came from.
enum class BuildSource {
  hit,       ///< read from the cache (possibly after waiting for another builder)
  built,     ///< built by this call and stored
  bypassed,  ///< built by this call without using the cache (mode disable, or debug bypass)
};

/// The outcome of get_or_build.
struct BuildResult {
  std::string key;
  BuildSource source = BuildSource::hit;
  std::vector<std::filesystem::path> files;  ///< the kernel's files in out_dir
  std::int64_t build_ms = 0;                 ///< time spent building (0 on a hit)
  std::string note;                          ///< e.g. why the cache was bypassed
};

/// Builds a kernel: writes its files into `work_dir` (an empty directory on
/// the same file system as out_dir). Return an error (e.g. Error::build_failed)
/// on failure; nothing is stored then.
using BuildFunction = std::function<Status(const std::filesystem::path& work_dir)>;

/// Builds a kernel wherever its command line says and returns the files to
/// store (used by `opcache exec`). Return an error on failure.
using BuildInPlaceFunction = std::function<Result<std::vector<std::filesystem::path>>()>;

/// Options of Store::get_or_build and Store::get_or_build_in_place.
struct GetOrBuildOptions {
  /// Declared inputs: files and directories the build reads that the
  /// descriptor does not describe (a header, a tiling source, a directory of
  /// templates). Their content enters the key as `opcache exec --input`'s
  /// does: a file by its SHA-256, a directory by the digest of every file
  /// below it; a path is keyed as given (relative ones as written, absolute
  /// ones below the base_dir setting as "{base}/…"). Editing a declared
  /// file, or adding, removing or changing a file below a declared
  /// directory, makes the next call a miss. Empty: the key is the
  /// descriptor's and the scenario's alone, as without options.
  std::vector<std::filesystem::path> inputs;
};

/// How `opcache exec` identifies the compiler it runs (setting compiler_check),
/// as ccache's compiler_check does.
struct CompilerCheck {
  enum class Kind {
    content,  ///< SHA-256 of the resolved executable (remembered by its path, size and mtime)
    mtime,    ///< the executable's size and modification time (this machine only)
    none,     ///< nothing: only the command line names the compiler
    string,   ///< `argument`, a text the user changes when the compiler changes
    command,  ///< SHA-256 of what `argument` (a shell command, %compiler% replaced) prints
  };
  Kind kind = Kind::content;
  std::string argument;  ///< TEXT of string:TEXT, CMD of command:CMD; empty otherwise

  bool operator==(const CompilerCheck& other) const = default;
};

/// What `opcache exec` keys on besides the descriptor, the scenario, the
/// command line and its input files (settings compiler_check and exec_env).
struct ExecKeyPolicy {
  CompilerCheck compiler_check;
  std::vector<std::string> environment;  ///< names of the variables whose values are keyed
  std::filesystem::path base_dir;        ///< paths below it are keyed relative to it; empty: none
};

/// What `opcache exec` keys on.
enum class ExecKeyOn {
  /// The command: its line, the compiler, exec_env, --input, standard input,
  /// and the files its process tree reads, observed on a miss (manifests).
  command,
  /// The descriptor and scenario only (the caller vouches that they decide the kernel).
  descriptor,
};

/// One compiler command line run through the cache (`opcache exec`).
struct ExecRequest {
  std::string descriptor_json;                  ///< the op descriptor, JSON text
  std::string descriptor_origin = "descriptor"; ///< names it in messages (its file)
  Scenario scenario;
  std::vector<std::string> command;             ///< argv; argv[0] is searched in PATH
  std::filesystem::path out;                    ///< the directory the command writes its outputs to
  /// Output file names in `out`; empty: every file the command's process
  /// tree created or wrote directly in `out`.
  std::vector<std::string> outputs;
  /// Files and directories whose content is keyed before the command runs
  /// (what it reads that the trace cannot tell from the command line alone).
  std::vector<std::string> inputs;
  ExecKeyOn key_on = ExecKeyOn::command;
  /// The command's standard input. Its data is keyed (a file from its
  /// offset, a pipe read whole first); a terminal and /dev/null are not.
  int stdin_fd = 0;
};

/// The outcome of Store::exec.
struct ExecResult {
  BuildResult build;                  ///< key: the entry's; source: hit, built or bypassed
  std::optional<int> command_status;  ///< the command's exit status when it ran (128 + signal when killed)
  /// One line each, for a person: why a built result was not stored (the
  /// tracer cannot run here, an input changed while the command ran...).
  std::vector<std::string> notes;
  /// On a miss of a command built before (here or on a remote): what
  /// differs from its most recent build ("k.h changed", "inc1/k.h now
  /// exists"); std::nullopt otherwise.
  std::optional<std::string> miss_reason;
};

/// One place where a stored entry differs from a lookup (`opcache explain`).
struct EntryDifference {
  std::string path;                   ///< "descriptor.inputs[0].shape", "scenario.toolchain", "scenario.extra[\"cann.opp\"]"
  std::optional<std::string> stored;  ///< the stored entry's value as JSON text; std::nullopt when it has none
  std::optional<std::string> wanted;  ///< the lookup's value as JSON text; std::nullopt when it has none
};

/// A stored entry of the looked-up op type and how it differs.
struct NearEntry {
  std::string key;
  std::string where;     ///< "local", or the remote's name
  std::string scenario;  ///< the entry's scenario, canonical JSON
  std::vector<EntryDifference> differences;  ///< fewest first; empty: this is the entry asked for
};

/// Why a lookup is, or is not, a hit.
struct Explanation {
  std::string key;                      ///< the key looked up
  bool exact = false;                   ///< an entry with that key exists locally or on a remote that answered
  std::vector<NearEntry> nearest;       ///< per place (local first, then remotes in order), fewest differences first
  std::vector<std::string> unanswered;  ///< "<remote>: <why>" for each remote that could not answer
};

/// One effective setting, for display (`opcache config`).
struct SettingInfo {
  std::string name;
  std::string value;
  std::string source;  ///< "--mode", "OPCACHE_MODE", "<file> [cache] mode", "default", ...
};

/// Options of a put.
struct PutOptions {
  std::int64_t build_ms = 0;  ///< how long building took; feeds "compile time saved"
  ReplacePolicy replace = ReplacePolicy::keep_existing;
};

/// Whether a remote spec ("URL[|attribute…]", a --remote value) names a team
/// server (http:// or https://: an `opcache serve`, with statistics and
/// build leases) rather than plain storage (s3://, file://) or nothing
/// known. Pure; thread-safe.
bool remote_has_server(std::string_view remote_spec) noexcept;

/// Checks the name of a signing key as trusted-keys files accept it: 1-128
/// of A-Z a-z 0-9 . _ @ + - (`usage` error saying so).
Status check_signer_name(std::string_view name);

/// A handle on a local store and its remotes. Move-only. Thread-safe: one
/// handle may be used from several threads. Several processes may open the
/// same root at once.
class Store {
 public:
  /// Opens (creating if needed) the store described by `config`.
  /// Errors: `usage` (no cache dir, bad settings, foreign or newer index),
  /// `io` (cannot create or open files).
  static Result<Store> open(const StoreConfig& config = {});

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  /// The cache root in use.
  const std::filesystem::path& root() const;

  /// The key of a descriptor (JSON text of an object with a non-empty string
  /// "op_type") in a scenario, after removing volatile fields. `usage` error
  /// for bad JSON or descriptors. Pure: touches no files.
  Result<std::string> key(std::string_view descriptor_json, const Scenario& scenario) const;

  /// The descriptor exactly as it is hashed: canonical JSON after removing
  /// volatile fields.
  Result<std::string> canonical_descriptor(std::string_view descriptor_json) const;

  /// Stores `files` (members keep their base names) as the kernel for
  /// descriptor + scenario. With keep_existing an existing entry is kept and
  /// `stored` is false. Files are read twice and must not change meanwhile.
  Result<PutResult> put(std::string_view descriptor_json, const Scenario& scenario,
                        const std::vector<std::filesystem::path>& files, const PutOptions& options = {});

  /// Writes the members of `key` into `out_dir` (created if missing), each
  /// byte-exact and verified. Looks in the local store first, then in each
  /// remote in order (a remote hit is verified, stored locally, then written
  /// out). std::nullopt on a miss; an entry whose object is missing or corrupt
  /// is reported through on_warning, dropped, and a miss.
  Result<std::optional<GetResult>> get(std::string_view key, const std::filesystem::path& out_dir);

  /// Like get(key(descriptor_json, scenario), out_dir), but a remote lookup
  /// also tells an opcache server the op type and scenario it is for (for
  /// the server's statistics: its "what to pre-build next"). `usage` error
  /// for bad JSON or descriptors.
  Result<std::optional<GetResult>> get(std::string_view descriptor_json, const Scenario& scenario,
                                       const std::filesystem::path& out_dir);

  /// How the stored entries of the descriptor's op type differ from
  /// descriptor + scenario: at most `limit` nearest per place (this store,
  /// then each remote that can answer: an opcache server), each with the
  /// descriptor paths and scenario fields that differ. Reads manifests only;
  /// never counts a hit or a miss. `usage` error for bad JSON or descriptors.
  Result<Explanation> explain(std::string_view descriptor_json, const Scenario& scenario, std::size_t limit = 5);

  /// The index entry of `key`, or std::nullopt. Does not verify the object.
  Result<std::optional<Entry>> lookup(std::string_view key);

  /// The member file names of `key`'s entry, in bundle order, read from its
  /// manifest without decompressing; std::nullopt when absent.
  Result<std::optional<std::vector<std::string>>> member_names(std::string_view key);

  /// True when `key` has an entry whose object file exists.
  Result<bool> contains(std::string_view key);

  /// Removes an entry; false when there was none.
  Result<bool> remove(std::string_view key);

  /// Entries matching `filter`, ordered by key.
  Result<std::vector<Entry>> list(const ListFilter& filter = {});

  /// Totals and counters.
  Result<StoreStats> stats();

  /// Checks every entry against its object, and looks for orphan objects and
  /// stale temp files; with `repair`, removes what is bad.
  Result<VerifyReport> verify(bool repair);

  /// Signs the entries `keys` (every entry when empty) with the configured
  /// signing key (`opcache sign`), after checking each object against its
  /// digest. Signing an entry twice with the same key adds nothing. `usage`
  /// error when no signing key is configured.
  Result<SignReport> sign(const std::vector<std::string>& keys);

  /// Every entry that no valid signature by a trusted key vouches for, in key
  /// order (`opcache verify --signatures`); with no trusted keys, every entry.
  Result<std::vector<UntrustedEntry>> untrusted_entries();

  /// Where this store requires a valid signature by a trusted key: "off",
  /// "remote" or "all" (docs/security.md).
  std::string signature_requirement() const;

  /// The name under which the raw 32-byte `public_key` is trusted, or "" when
  /// it is not in the trusted keys.
  std::string trusted_name(std::string_view public_key) const;

  /// The transparent path for compilers: a hit writes the kernel's files into
  /// `out_dir`; a miss runs `build` once across all processes sharing this
  /// store (single flight: the others wait and then read its result), stores
  /// the files it wrote and moves them into `out_dir`. A failed build stores
  /// nothing and every waiter gets the failure (`build_failed`); a killed
  /// builder is taken over by a waiter; waits end after wait_timeout (`timeout`).
  /// Mode `force` rebuilds entries stored before this Store was opened and
  /// replaces them (concurrent readers see the old or the new entry); mode
  /// `disable` and debug bypass build without the cache.
  Result<BuildResult> get_or_build(std::string_view descriptor_json, const Scenario& scenario,
                                   const std::filesystem::path& out_dir, const BuildFunction& build);

  /// get_or_build whose key also covers `options.inputs`, the files and
  /// directories the build reads (GetOrBuildOptions): the descriptor is
  /// keyed with the member "declared_inputs" set to their digests
  /// (docs/integration.md "Declared inputs"), read before anything is
  /// looked up or built; BuildResult::key is that key. Errors, before
  /// `build` runs: `usage` when an input is missing or is neither a file
  /// nor a directory, or when the descriptor already has a member
  /// "declared_inputs" (reserved for this); `io` when an input cannot be
  /// read. With no inputs, exactly get_or_build.
  Result<BuildResult> get_or_build(std::string_view descriptor_json, const Scenario& scenario,
                                   const std::filesystem::path& out_dir, const BuildFunction& build,
                                   const GetOrBuildOptions& options);

  /// Like get_or_build, but `build` writes its outputs where it likes and
  /// returns them; on a hit the stored files are written into `out_dir`.
  Result<BuildResult> get_or_build_in_place(std::string_view descriptor_json, const Scenario& scenario,
                                            const std::filesystem::path& out_dir,
                                            const BuildInPlaceFunction& build);

  /// get_or_build_in_place with declared inputs in the key, as the
  /// get_or_build overload with GetOrBuildOptions does (same errors).
  Result<BuildResult> get_or_build_in_place(std::string_view descriptor_json, const Scenario& scenario,
                                            const std::filesystem::path& out_dir,
                                            const BuildInPlaceFunction& build, const GetOrBuildOptions& options);

  /// Runs `request.command` through the cache. A hit writes the stored
  /// outputs into `out` and never runs the command. A miss runs it once
  /// across all processes sharing this store (single flight on the command
  /// key), under a tracer that records what its process tree reads, stores
  /// the files it wrote in `out` and an exec manifest of what it read
  /// (docs/formats.md "Exec manifests"), and queues both for upload. A later
  /// call hits when every file an earlier build read still has its digest,
  /// on this machine or, through the remotes' manifests, on another. A
  /// command that fails stores nothing: `command_status` says how it ended
  /// (not an error). Where the tracer cannot run (or sees a program it
  /// cannot follow) the command runs uncached, with a note. Errors: `usage`
  /// (bad descriptor or --output, compiler not found), `build_failed` (the
  /// command succeeded but wrote no outputs), `io`.
  Result<ExecResult> exec(const ExecRequest& request);

  /// Why `request` would not hit: the first input of the most recent build
  /// of its command that differs now ("k.h changed", "inc1/k.h now
  /// exists"), from the local manifests and then the remotes', or that no
  /// build of the command is known; std::nullopt when a build matches (its
  /// entry is then looked up as usual). Runs nothing.
  Result<std::optional<std::string>> exec_miss_reason(const ExecRequest& request);

  /// The descriptor `request`'s command is keyed by (the descriptor with the
  /// member "exec" set to what exec keys on, volatile fields removed), as
  /// JSON text, for explain's comparison with stored entries; the
  /// descriptor as given with ExecKeyOn::descriptor. Runs nothing.
  Result<std::string> exec_descriptor(const ExecRequest& request);

  /// Why the transparent paths bypass the cache for this op type (mode
  /// disable, op_debug_level, op_debug_list), or std::nullopt.
  std::optional<std::string> bypass_reason(const std::string& op_type) const;

  /// Ages the store now (CANN rules); with `dry_run` only reports.
  Result<GcReport> gc(bool dry_run);

  /// Pins (never aged) or unpins an entry; false when the key is absent.
  Result<bool> set_pinned(std::string_view key, bool pinned);

  /// Removes every entry; safe while other processes use the store.
  Result<ClearReport> clear();

  /// Every effective setting and where it came from.
  std::vector<SettingInfo> settings() const;

  /// The effective compiler_check and exec_env settings, for `opcache exec`.
  ExecKeyPolicy exec_key_policy() const;

  /// The remotes in use, as "URL (source)" lines for display; credentials removed.
  std::vector<std::string> remote_names() const;

  /// Options of push and pull.
  struct TransferOptions {
    std::string remote;             ///< URL or 1-based position; empty: the first remote
    std::vector<std::string> keys;  ///< explicit keys; empty: every entry matching `filter`
    ListFilter filter;
    int parallelism = 0;            ///< 0: the remote's attribute
    std::function<void(const TransferProgress&)> progress;  ///< called from worker threads
    const std::atomic<bool>* cancel = nullptr;               ///< stop starting new transfers
    /// push only: also send the signatures of entries the remote already
    /// has (after `opcache sign`); each signed entry costs a request.
    bool add_signatures = false;
  };

  /// Uploads the local entries (keys, or all matching the filter) that the
  /// remote lacks: one batch query, then parallel uploads.
  Result<TransferSummary> push(const TransferOptions& options);

  /// Downloads the entries (keys, or all the remote lists for the filter)
  /// that the local store lacks, verifying each before it is stored.
  Result<TransferSummary> pull(const TransferOptions& options);

  /// Options of server_stats.
  struct ServerStatsOptions {
    std::string remote;          ///< URL or 1-based position; empty: the first remote
    std::string window = "day";  ///< the summary's window: "hour", "day" or "30d"
    int misses_limit = 5;        ///< how many groups of missed keys (1..1000)
  };

  /// The statistics of the team server behind an http(s) remote (what its
  /// dashboard shows, `opcache stats --remote`): the summary of `window`
  /// and the most requested misses. Errors: `usage` when no remote is
  /// configured or the remote has no server (s3://, file://); `remote` for
  /// a server without /v1/stats (older than HTTP API v1 revision 4), a
  /// refused token (401/403, naming the token settings) or a bad answer;
  /// `remote`/`timeout` when the server cannot be reached. Ignores the
  /// remote's circuit breaker (an explicit request).
  Result<ServerStats> server_stats(const ServerStatsOptions& options);

  /// Options of revoke and unrevoke.
  struct RevokeOptions {
    std::vector<std::string> keys;  ///< the keys (64 lowercase hex each), at least one
    std::string reason;             ///< revoke: why, one line of UTF-8 (1 to 1024 bytes)
    std::string remote;             ///< URL or 1-based position; empty: the first remote
    bool local = false;             ///< this store only (a local tombstone), no remote
  };

  /// Revokes `options.keys` (docs/remotes.md "Revocation"): on the remote,
  /// for everyone using it (a team server needs an admin token; with a
  /// signing key the request is signed), and in this store (its entries are
  /// deleted; with `local`, a local tombstone is also kept, which refuses
  /// the keys from any remote until unrevoke). For each key, whether an
  /// entry was deleted (on the remote, or here with `local`). Errors:
  /// `usage` for a bad key or reason, no remote, or a remote that cannot
  /// revoke (an older server); `remote` for a refusal (token, signature).
  Result<std::vector<bool>> revoke(const RevokeOptions& options);

  /// Takes a revocation back (on the remote, or with `local` in this store):
  /// for each key, whether it was revoked.
  Result<std::vector<bool>> unrevoke(const RevokeOptions& options);

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace opcache
