#include "store/observed_inputs.hpp"

#include <dirent.h>
#include <sys/stat.h>


#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "base/sha256.hpp"
#include "base/try.hpp"
#include "store/exec_key.hpp"

namespace opcache::store {

namespace {

namespace fs = std::filesystem;
using trace::Access;

std::string absolute_out(const PathFrame& frame) {
  std::string out = fs::absolute(frame.out).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') {
    out.pop_back();
  }
  return out;
}

// `events` with the paths below --out spelled below `out` as given (made
// absolute): the tracee's relative paths come resolved through its working
// directory, symlinks and all, so `--out /link/out` arrives as /real/out.
std::vector<trace::PathEvent> spelled_below_out(const std::vector<trace::PathEvent>& events, const std::string& out) {
  std::error_code ec;
  const std::string real = fs::weakly_canonical(out, ec).string();
  if (ec || real == out || real.empty()) {
    return events;
  }
  std::vector<trace::PathEvent> spelled = events;
  for (auto& event : spelled) {
    if (event.path.compare(0, real.size(), real) == 0 &&
        (event.path.size() == real.size() || event.path[real.size()] == '/')) {
      event.path = out + event.path.substr(real.size());
    }
  }
  return spelled;
}

std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash == std::string::npos ? 0 : slash);
}

std::string name_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// The entries of a directory, without "." and "..", sorted; std::nullopt when
// it cannot be listed.
std::optional<std::vector<std::string>> directory_names(const fs::path& directory) {
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) {
    return std::nullopt;
  }
  std::vector<std::string> names;
  while (const dirent* item = ::readdir(dir)) {
    const std::string_view name = item->d_name;
    if (name != "." && name != "..") {
      names.emplace_back(name);
    }
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

// "dir:" + SHA-256 of the names of `directory` less `ignored`, one a line.
std::optional<std::string> listing_state(const fs::path& directory, const std::vector<std::string>& ignored) {
  auto names = directory_names(directory);
  if (!names) {
    return std::nullopt;
  }
  std::string text;
  for (const auto& name : *names) {
    if (!std::binary_search(ignored.begin(), ignored.end(), name)) {
      text += name;
      text += '\n';
    }
  }
  return "dir:" + base::sha256_hex(text);
}

// A sticky directory that everyone may write (/tmp, /var/tmp, /dev/shm): a
// shared scratch space whose other entries come and go with every process
// on the machine. A compiler lists it to find its own temporaries (nvcc
// does), so its listing is no input.
bool is_shared_scratch(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && (info.st_mode & S_ISVTX) != 0 &&
         (info.st_mode & S_IWOTH) != 0;
}

bool is_regular(const std::string& path, bool follow) {
  struct stat info {};
  return (follow ? ::stat(path.c_str(), &info) : ::lstat(path.c_str(), &info)) == 0 && S_ISREG(info.st_mode);
}

// The events of a trace, grouped: what happened to each path first, and
// which paths the tree wrote.
struct EventIndex {
  std::map<std::string, const trace::PathEvent*> first;  // by path, its first event
  std::set<std::string> written;
  std::set<std::string> listed;
  std::set<std::string> opened;  // read by an open (not only executed)
  std::map<std::string, std::vector<std::string>> written_names;  // by directory, names written in it
};

EventIndex index_events(const std::vector<trace::PathEvent>& events) {
  EventIndex index;
  for (const auto& event : events) {
    index.first.emplace(event.path, &event);
    if (event.access == Access::written) {
      index.written.insert(event.path);
      index.written_names[parent_of(event.path)].push_back(name_of(event.path));
    } else if (event.access == Access::listed) {
      index.listed.insert(event.path);
    } else if (event.access == Access::read) {
      index.opened.insert(event.path);
    }
  }
  for (auto& [directory, names] : index.written_names) {
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
  }
  return index;
}

// The state of a file the tree read first: its digest now, or why it cannot
// stand for what the command read. `settled`: its identity, when a digest
// may be remembered by it.
Result<std::optional<std::string>> read_input_state(const trace::PathEvent& event, const base::DigestCache& cache,
                                                    std::optional<std::string>& uncacheable,
                                                    std::optional<std::string>& settled) {
  const auto now = trace::file_identity(event.path);
  if (!now) {
    uncacheable = event.path + " was read by the command, then removed";
    return std::optional<std::string>();
  }
  if (event.identity && !(*event.identity == *now)) {
    uncacheable = event.path + " changed while the command ran";
    return std::optional<std::string>();
  }
  if (!is_regular(event.path, true)) {
    return std::optional<std::string>();  // a directory opened for reading: its listing, if any, is the input
  }
  OPCACHE_TRY_ASSIGN(auto digest, cache.file_sha256(event.path));
  if (identity_settled(*now)) {
    settled = identity_text(*now);
  }
  return std::optional<std::string>("sha256:" + digest);
}

// The outputs: regular files the tree wrote directly in --out that exist now.
void collect_outputs(const EventIndex& index, const std::string& out, ObservedBuild& build) {
  for (const auto& path : index.written) {
    if (path.size() <= out.size() + 1 || path.compare(0, out.size(), out) != 0 || path[out.size()] != '/') {
      continue;
    }
    if (!is_regular(path, false)) {
      continue;  // a temporary file gone again, a directory, a symlink
    }
    if (path.find('/', out.size() + 1) != std::string::npos) {
      if (!build.uncacheable) {
        build.uncacheable = "the command wrote " + path + " in a subdirectory of --out; exec stores the files directly in --out";
      }
      continue;
    }
    build.outputs.emplace_back(path);
  }
}

// Room for identity_text: five 64-bit numbers (20 digits and a sign at most) and four spaces.
constexpr std::size_t k_identity_text_room = 5 * 21 + 4;

// Writes identity_text's characters at `out`; returns their end.
char* format_identity(const trace::FileIdentity& identity, char* out) {
  char* const end = out + k_identity_text_room;
  out = std::to_chars(out, end, identity.size).ptr;
  *out++ = ' ';
  out = std::to_chars(out, end, identity.mtime_ns).ptr;
  *out++ = ' ';
  out = std::to_chars(out, end, identity.ctime_ns).ptr;
  *out++ = ' ';
  out = std::to_chars(out, end, identity.inode).ptr;
  *out++ = ' ';
  return std::to_chars(out, end, identity.device).ptr;
}

// Whether identity_text(identity) is `text`, without making the string (a hit checks each file input).
bool has_identity_text(const trace::FileIdentity& identity, std::string_view text) {
  char buffer[k_identity_text_room];
  return std::string_view(buffer, static_cast<std::size_t>(format_identity(identity, buffer) - buffer)) == text;
}

}  // namespace

std::string identity_text(const trace::FileIdentity& identity) {
  char buffer[k_identity_text_room];
  return std::string(buffer, format_identity(identity, buffer));
}

bool identity_settled(const trace::FileIdentity& identity) { return base::DigestCache::settled(identity.ctime_ns); }

Result<ObservedBuild> observe_build(const trace::TraceOutcome& outcome, const PathFrame& frame,
                                    const base::DigestCache& cache, const ProgramInputs& programs) {
  ObservedBuild build;
  if (outcome.blind) {
    build.uncacheable = "the trace is incomplete: " + *outcome.blind;
  }
  const std::string out = absolute_out(frame);
  const auto events = spelled_below_out(outcome.events, out);
  const EventIndex index = index_events(events);
  collect_outputs(index, out, build);
  for (const auto& [path, event] : index.first) {
    std::optional<std::string> state;
    std::optional<std::string> settled;
    std::vector<std::string> ignored;
    const bool created = index.written.contains(path);
    const bool program_only = event->access == Access::executed && !index.opened.contains(path);
    const bool compiler = std::find(programs.compiler.begin(), programs.compiler.end(), path) != programs.compiler.end();
    if (!programs.digested && (program_only || compiler)) {
      continue;
    }
    if (event->access == Access::read || event->access == Access::executed) {
      // Also when the tree wrote it afterwards: the identity check tells whether it still holds what was read.
      OPCACHE_TRY_ASSIGN(state, read_input_state(*event, cache, build.uncacheable, settled));
    } else if (event->access == Access::absent && !created) {
      state = "absent";
    }
    if (index.listed.contains(path) && !state && !created && !is_shared_scratch(path)) {
      if (auto names = index.written_names.find(path); names != index.written_names.end()) {
        ignored = names->second;
      }
      state = listing_state(path, ignored);
    }
    if (state) {
      build.inputs.push_back({keyed_path(path, frame), *state, std::move(ignored)});
      if (settled) {
        build.seen.emplace(build.inputs.back().path, std::move(*settled));
      }
    }
  }
  std::sort(build.inputs.begin(), build.inputs.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  // Two absolute paths cannot key alike; a duplicate means a marker collided with a real path: refuse to guess.
  for (std::size_t i = 1; i < build.inputs.size(); ++i) {
    if (build.inputs[i].path == build.inputs[i - 1].path && !build.uncacheable) {
      build.uncacheable = "two inputs key as " + build.inputs[i].path;
    }
  }
  return build;
}

namespace {

std::string for_display(const fs::path& path) {
  std::error_code ec;
  const auto cwd = fs::current_path(ec);
  if (!ec) {
    const auto relative = path.lexically_relative(cwd);
    if (!relative.empty() && *relative.begin() != "..") {
      return relative.string();
    }
  }
  return path.string();
}

// Whether the file at `path` still has the identity `seen` recorded.
bool still_seen(const std::string& path, const std::map<std::string, std::string>& seen, const std::string& keyed) {
  const auto recorded = seen.find(keyed);
  if (recorded == seen.end()) {
    return false;
  }
  const auto now = trace::file_identity(path);
  return now && has_identity_text(*now, recorded->second);
}

std::optional<std::string> input_difference(const ObservedInput& input, const std::string& path,
                                            const base::DigestCache& cache) {
  if (input.state == "absent") {
    struct stat info {};
    return ::lstat(path.c_str(), &info) == 0 ? std::optional<std::string>(for_display(path) + " now exists")
                                             : std::nullopt;
  }
  if (input.state.rfind("dir:", 0) == 0) {
    const auto state = listing_state(path, input.ignored);
    if (!state) {
      return for_display(path) + " is no longer a directory";
    }
    return *state == input.state ? std::nullopt
                                 : std::optional<std::string>(for_display(path) + "/ has other entries");
  }
  auto digest = cache.file_sha256(path);
  if (!digest) {
    return for_display(path) + (digest.error().code() == ErrorCode::not_found ? " was removed" : " cannot be read");
  }
  return "sha256:" + *digest == input.state ? std::nullopt : std::optional<std::string>(for_display(path) + " changed");
}

}  // namespace

std::optional<std::string> first_changed_input(const ManifestBuild& build, const PathFrame& frame,
                                               const base::DigestCache& cache,
                                               std::map<std::string, std::string>* seen_now) {
  for (const auto& input : build.inputs) {
    const auto path = unkeyed_path(input.path, frame);
    if (!path) {
      return input.path + (input.path.rfind("{cann}", 0) == 0 ? " is in a CANN install, and none is set here"
                                                                : " is below base_dir, which is not set here");
    }
    const bool file = input.state.starts_with("sha256:");
    if (file && still_seen(*path, build.seen, input.path)) {
      continue;
    }
    // Taken before the digest: a change while it is read makes it differ next time.
    const auto before = file && seen_now ? trace::file_identity(*path) : std::nullopt;
    if (auto difference = input_difference(input, *path, cache)) {
      return difference;
    }
    if (before && identity_settled(*before)) {
      (*seen_now)[input.path] = identity_text(*before);
    }
  }
  return std::nullopt;
}

}  // namespace opcache::store
