// What the single-flight end-to-end tests (tests/e2e/test_single_flight*.cpp)
// share: distinct descriptors, a small real object to build, `opcache exec`
// command lines and the paths of the per-key locks they wait on.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "opcache/opcache.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test {

/// The clock the tests measure durations with.
using Clock = std::chrono::steady_clock;

/// Milliseconds since `start`.
std::int64_t ms_since(Clock::time_point start);

/// Sleeps `ms` milliseconds: for scenarios (a build that takes a while), never
/// as synchronisation (use wait_until).
void sleep_ms(int ms);

/// A descriptor JSON for `op_type`, distinct for each `index`.
std::string descriptor_for(const std::string& op_type, int index);

/// Compiles a small real object file under `dir`/src shared by the builds
/// (their .json makes each build distinct); throws when cc fails.
std::filesystem::path compile_shared_object(const TempDir& dir);

/// "hit", "built" or "bypassed".
const char* source_name(BuildSource source);

/// A StoreConfig for the cache directory `cache` and `mode` (none: the
/// default), everything else default.
StoreConfig config_for(const std::filesystem::path& cache, std::optional<std::string> mode = std::nullopt);

/// Whether exec_argv asks for --json output.
enum class JsonOutput { yes, no };

/// `opcache --cache-dir CACHE [--json] [extra...] exec --desc DESC --scenario S
/// --out OUT --key-on descriptor [--output NAME]... -- sh -c SCRIPT args...`
/// (the documented order: the --output options directly before "--"). Keyed
/// on the descriptor only, so that processes running different scripts (a
/// builder that hangs, waiters that copy) and `opcache has/get --desc` or
/// the library's get_or_build meet on one key: these tests are about single
/// flight and storing; tests/e2e/test_exec_key.cpp covers exec's own keying.
std::vector<std::string> exec_argv(const std::filesystem::path& cache, const std::filesystem::path& desc,
                                   const std::filesystem::path& out, const std::vector<std::string>& outputs,
                                   const std::string& script, const std::vector<std::string>& script_args,
                                   JsonOutput json_output = JsonOutput::yes, const std::vector<std::string>& extra = {});

/// The "source" field of `opcache --json exec` output; "?" without it and
/// "unparsable" when it is not a JSON object.
std::string json_source(const std::string& stdout_text);

/// The lock file single flight takes for the descriptor in `desc` (the
/// CLI's `key`): `<cache>/locks/<key>.lock`. REQUIREs that `key` succeeds.
std::filesystem::path flight_lock(const std::filesystem::path& cache, const std::filesystem::path& desc);

}  // namespace opcache::test
