// Helpers shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp): a private
// scratch directory per process and splitting one input into several files.
// Used both by the fuzzers (build-fuzz, scripts/fuzz.sh) and by the replay
// drivers of the normal test suite (tests/fuzz/replay_main.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace opcache::fuzz {

/// The input of one fuzz run as text (not owned; valid during the run).
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// A directory private to this process, created on first use (under
/// $TMPDIR, else /tmp) and removed with everything in it at exit. Not thread-safe.
const std::filesystem::path& scratch_directory();

/// Writes `bytes` to `path` (replacing it), creating parent directories.
/// Aborts on failure: a fuzz run that cannot set up its files is a broken harness.
void write_file(const std::filesystem::path& path, std::string_view bytes);

/// The separator between the files of a multi-file input (seeds hold it).
inline constexpr std::string_view k_part_separator = "\n--opcache-fuzz-part--\n";

/// `text` cut at every k_part_separator; always at least one part.
std::vector<std::string_view> split_parts(std::string_view text);

/// With OPCACHE_FUZZ_TRACE set, prints `line` to stderr: shows how far a seed
/// gets (statuses, candidates) when a corpus is written or checked.
void trace(const std::string& line);

}  // namespace opcache::fuzz
