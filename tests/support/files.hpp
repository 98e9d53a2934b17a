// Reading and writing the small files end-to-end tests compare and count:
// whole directories by member name, counter files with one line per event.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace opcache::test {

/// File name → bytes.
using Files = std::map<std::string, std::string>;

/// Bytes of every regular file directly in `dir`, by name; empty when `dir`
/// does not exist.
Files directory_contents(const std::filesystem::path& dir);

/// Bytes of each of `paths`, by file name.
Files read_files(const std::vector<std::filesystem::path>& paths);

/// The names of the entries (files, links, directories) directly in `dir`.
/// Throws std::filesystem::filesystem_error when `dir` cannot be listed.
std::set<std::string> entry_names(const std::filesystem::path& dir);

/// Appends `line` and a newline to `path` (created) with a single write() on
/// an O_APPEND descriptor, so lines from concurrent processes never
/// interleave. Returns false when it cannot. Safe in forked children.
bool append_line(const std::filesystem::path& path, const std::string& line);

/// The non-empty lines of `text`.
std::vector<std::string> lines_of(const std::string& text);

/// Waits until files written before the call are older than
/// base::DigestCache's "too new" window, so that their digests may be
/// remembered. Not a measure of speed: only time passing makes a file old.
void age_past_digest_too_new();

/// How many non-empty lines `path` has (0 when it does not exist).
std::size_t count_lines(const std::filesystem::path& path);

/// Counter lines are "<name> <pid>": how many lines each name has.
std::map<std::string, int> builds_per_name(const std::filesystem::path& counter);

}  // namespace opcache::test
