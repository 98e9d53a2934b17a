#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>

#include "base/file_io.hpp"
#include "base/safe_directory.hpp"
#include "base/value_parse.hpp"
#include "base/try.hpp"
#include "base/utc_time.hpp"
#include "layouts/transfer.hpp"

namespace opcache::layouts {

namespace {

namespace fs = std::filesystem;
using base::SafeDirectory;

bool is_mindspore_triple(const std::vector<fs::path>& files) {
  if (files.size() != 3) {
    return false;
  }
  std::set<std::string> extensions;
  std::set<std::string> stems;
  for (const auto& file : files) {
    extensions.insert(file.extension().string());
    stems.insert(file.stem().string());
  }
  return stems.size() == 1 && extensions == std::set<std::string>{".o", ".json", ".info"};
}

bool is_cann_pair(const std::vector<fs::path>& files) {
  if (files.size() != 2) {
    return false;
  }
  return files[0].extension() == ".o" && files[1].extension() == ".json" && files[0].stem() == files[1].stem() &&
         files[0].stem().string().rfind("te_", 0) == 0;
}

// The .run package of a torchair entry's members (*.json statistics, at
// least one, and exactly one .run), or std::nullopt when they are not one.
std::optional<fs::path> torchair_package(const std::vector<fs::path>& files) {
  std::optional<fs::path> package;
  std::size_t statistics = 0;
  for (const auto& file : files) {
    if (file.extension() == ".json") {
      ++statistics;
    } else if (file.extension() == ".run" && !package) {
      package = file;
    } else {
      return std::nullopt;
    }
  }
  return statistics > 0 ? package : std::nullopt;
}

// The entry's member names (from its manifest, before anything is written),
// or std::nullopt when it vanished meanwhile.
Result<std::optional<std::vector<fs::path>>> member_paths(Store& store, const std::string& key) {
  OPCACHE_TRY_ASSIGN(auto names, store.member_names(key));
  if (!names) {
    return std::optional<std::vector<fs::path>>();
  }
  return std::optional<std::vector<fs::path>>(std::vector<fs::path>(names->begin(), names->end()));
}

Result<std::vector<Entry>> matching_entries(Store& store, const ListFilter& filter) {
  return store.list(filter);
}

Result<ExportReport> export_mindspore(Store& store, const ExportOptions& options) {
  ExportReport report;
  OPCACHE_TRY_ASSIGN(auto root, SafeDirectory::open_root(options.dir, /*create=*/true));
  std::vector<SafeDirectory> ranks;
  for (int rank : options.ranks) {
    OPCACHE_TRY_ASSIGN(auto rank_dir, root.child("rank_" + std::to_string(rank), /*create=*/true));
    OPCACHE_TRY_ASSIGN(auto meta, rank_dir.child("kernel_meta", /*create=*/true));
    report.directories.push_back(meta.display_path().string());
    ranks.push_back(std::move(meta));
  }
  OPCACHE_TRY_ASSIGN(auto entries, matching_entries(store, options.filter));
  for (const auto& entry : entries) {
    OPCACHE_TRY_ASSIGN(auto names, member_paths(store, entry.key));
    if (names && !is_mindspore_triple(*names)) {
      report.skipped.push_back({entry.key, "not a MindSpore .o/.json/.info triple (" + entry.op_type + ")"});
      continue;
    }
    // Decompressed once, into the first rank, verified on the way.
    OPCACHE_TRY_ASSIGN(auto hit, store.get(entry.key, ranks.front().fd_path()));
    if (!names || !hit) {
      report.skipped.push_back({entry.key, "disappeared or failed verification while exporting"});
      continue;
    }
    ++report.entries;
    report.files_written += static_cast<std::int64_t>(hit->files.size());
    for (std::size_t i = 1; i < ranks.size(); ++i) {
      for (const auto& file : hit->files) {
        const auto name = file.filename().string();
        OPCACHE_TRY(ranks[i].link_or_copy_from(ranks.front(), name, name));
        ++report.files_linked;
      }
    }
  }
  return report;
}

Result<ExportReport> export_cann(Store& store, const ExportOptions& options) {
  ExportReport report;
  OPCACHE_TRY_ASSIGN(auto root, SafeDirectory::open_root(options.dir, /*create=*/true));
  OPCACHE_TRY_ASSIGN(auto cache, root.child("kernel_cache", /*create=*/true));
  std::map<std::string, SafeDirectory> by_soc;
  OPCACHE_TRY_ASSIGN(auto entries, matching_entries(store, options.filter));
  for (const auto& entry : entries) {
    if (entry.soc.empty() || entry.soc.find('/') != std::string::npos || entry.soc == "." || entry.soc == "..") {
      report.skipped.push_back({entry.key, "its soc \"" + entry.soc + "\" cannot name a directory"});
      continue;
    }
    OPCACHE_TRY_ASSIGN(auto names, member_paths(store, entry.key));
    if (names && !is_cann_pair(*names)) {
      report.skipped.push_back({entry.key, "not a CANN te_*.o/.json pair (" + entry.op_type + ")"});
      continue;
    }
    auto soc = by_soc.find(entry.soc);
    if (soc == by_soc.end()) {
      OPCACHE_TRY_ASSIGN(auto directory, cache.child(entry.soc, /*create=*/true));
      report.directories.push_back(directory.display_path().string());
      soc = by_soc.emplace(entry.soc, std::move(directory)).first;
    }
    OPCACHE_TRY_ASSIGN(auto hit, store.get(entry.key, soc->second.fd_path()));
    if (!names || !hit) {
      report.skipped.push_back({entry.key, "disappeared or failed verification while exporting"});
      continue;
    }
    ++report.entries;
    report.files_written += 2;
  }
  return report;
}

// torchair: every entry becomes its own <timestamp>_<pid>_outputs directory,
// filled under a hidden staging name and renamed into place only when
// complete, never onto anything that is there (a directory of an earlier
// export, a file, a symlink): then the next number is tried.

constexpr int k_torchair_name_attempts = 1000;

// "YYYYMMDDhhmmss" in UTC, as torchair stamps its outputs directories.
std::string torchair_timestamp(std::int64_t unix_ms) { return base::utc_text(unix_ms, "%Y%m%d%H%M%S"); }

// Removes a staging directory and its contents when the scope ends, unless
// it was renamed into place (dismiss()): an entry that fails leaves nothing.
class StagingGuard {
 public:
  StagingGuard(const SafeDirectory& parent, std::string name) : m_parent(parent), m_name(std::move(name)) {}
  StagingGuard(const StagingGuard&) = delete;
  StagingGuard& operator=(const StagingGuard&) = delete;
  ~StagingGuard() {
    if (m_armed) {
      (void)m_parent.remove_tree(m_name);  // best effort: a hidden name is all a failure leaves
    }
  }
  void dismiss() noexcept { m_armed = false; }

 private:
  const SafeDirectory& m_parent;
  std::string m_name;
  bool m_armed = true;
};

// Where the torchair export writes and the next <pid> number to try.
struct TorchairTarget {
  SafeDirectory outputs;  // DIR/aclnn_static_shape_kernel_outputs
  long next_number = 0;
};

// Renames the filled staging directory, whose statistics directory is
// <number>/, to the first free <timestamp>_<number>_outputs, counting
// <number> up (and renaming <number>/ along) past names taken; returns the
// name it took.
Result<std::string> place_staged(TorchairTarget& target, const std::string& staging_name, const SafeDirectory& staging,
                                 const std::string& timestamp, long number) {
  for (int attempt = 0; attempt < k_torchair_name_attempts; ++attempt) {
    const std::string name = timestamp + "_" + std::to_string(number) + "_outputs";
    OPCACHE_TRY_ASSIGN(bool placed, target.outputs.rename_if_absent(staging_name, target.outputs, name));
    if (placed) {
      target.next_number = number + 1;
      return name;
    }
    OPCACHE_TRY_ASSIGN(bool renamed,
                       staging.rename_if_absent(std::to_string(number), staging, std::to_string(number + 1)));
    if (!renamed) {
      return Error::io("cannot rename the statistics directory in " + staging.display_path().string());
    }
    ++number;
  }
  return Error::io("no free name " + timestamp + "_<pid>_outputs in " + target.outputs.display_path().string() +
                   " after " + std::to_string(k_torchair_name_attempts) + " tries; export into an emptier directory");
}

// Writes one entry; a skip reason when it is not a torchair package or
// vanished (or failed verification) meanwhile, with nothing left behind.
Result<std::optional<std::string>> export_torchair_entry(Store& store, const Entry& entry, TorchairTarget& target,
                                                         ExportReport& report) {
  const std::string not_a_package = "not a torchair package of *.json statistics and one .run (" + entry.op_type + ")";
  OPCACHE_TRY_ASSIGN(auto names, member_paths(store, entry.key));
  if (names && !torchair_package(*names)) {
    return std::optional<std::string>(not_a_package);
  }
  const std::string staging_name = ".opcache-" + base::random_token() + ".tmp";
  OPCACHE_TRY_ASSIGN(auto staging, target.outputs.child(staging_name, /*create=*/true));
  StagingGuard guard(target.outputs, staging_name);
  const long number = target.next_number;
  OPCACHE_TRY_ASSIGN(auto statistics, staging.child(std::to_string(number), /*create=*/true));
  OPCACHE_TRY_ASSIGN(auto hit, store.get(entry.key, statistics.fd_path()));
  if (!names || !hit) {
    return std::optional<std::string>("disappeared or failed verification while exporting");
  }
  // What was written decides (the entry may have been replaced since its names were read).
  const auto package = torchair_package(hit->files);
  if (!package) {
    return std::optional<std::string>(not_a_package);
  }
  const std::string package_name = package->filename().string();
  OPCACHE_TRY_ASSIGN(bool moved, statistics.rename_if_absent(package_name, staging, package_name));
  if (!moved) {
    return Error::io("cannot move " + package_name + " up in " + staging.display_path().string());
  }
  OPCACHE_TRY_ASSIGN(auto name,
                     place_staged(target, staging_name, staging, torchair_timestamp(entry.created_ms), number));
  guard.dismiss();
  report.directories.push_back((target.outputs.display_path() / name).string());
  ++report.entries;
  report.files_written += static_cast<std::int64_t>(hit->files.size());
  return std::optional<std::string>();
}

Result<ExportReport> export_torchair(Store& store, const ExportOptions& options) {
  ExportReport report;
  OPCACHE_TRY_ASSIGN(auto root, SafeDirectory::open_root(options.dir, /*create=*/true));
  OPCACHE_TRY_ASSIGN(auto outputs, root.child("aclnn_static_shape_kernel_outputs", /*create=*/true));
  // Numbers from this process's pid on, like torchair's own: two exports
  // start apart, and place_staged steps past any name taken all the same.
  TorchairTarget target{std::move(outputs), static_cast<long>(::getpid())};
  OPCACHE_TRY_ASSIGN(auto entries, matching_entries(store, options.filter));
  for (const auto& entry : entries) {
    OPCACHE_TRY_ASSIGN(auto skipped, export_torchair_entry(store, entry, target, report));
    if (skipped) {
      report.skipped.push_back({entry.key, *skipped});
    }
  }
  return report;
}

}  // namespace

Result<ExportOptions> mindspore_destination(const std::optional<fs::path>& dir, int ranks,
                                            const base::EnvLookup& env) {
  ExportOptions options;
  options.layout = Layout::mindspore;
  if (dir) {
    options.dir = *dir;
  } else if (auto base = env("MS_COMPILER_CACHE_PATH"); base && !base->empty()) {
    options.dir = *base;
  } else {
    options.dir = ".";
  }
  if (ranks > 0) {
    for (int rank = 0; rank < ranks; ++rank) {
      options.ranks.push_back(rank);
    }
    return options;
  }
  int rank = 0;
  if (auto rank_id = env("RANK_ID"); rank_id && !rank_id->empty()) {
    auto value = base::parse_integer(*rank_id, 0, 1000000);
    if (!value) {
      return Error::usage("RANK_ID=\"" + *rank_id + "\" is not a rank number (" + value.error().message() + ")");
    }
    rank = static_cast<int>(*value);
  }
  options.ranks.push_back(rank);
  return options;
}

Result<ExportReport> export_entries(Store& store, const ExportOptions& options) {
  switch (options.layout) {  // no default: -Wswitch names the next layout here
    case Layout::mindspore:
      if (options.ranks.empty()) {
        return Error::usage("export: no ranks to write");
      }
      return export_mindspore(store, options);
    case Layout::cann:
      return export_cann(store, options);
    case Layout::torchair:
      return export_torchair(store, options);
  }
  return Error::usage("export: unknown layout");  // not reached: every Layout is a case above
}

}  // namespace opcache::layouts
