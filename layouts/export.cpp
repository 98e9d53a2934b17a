#include <cstdlib>
#include <map>
#include <set>

#include "base/safe_directory.hpp"
#include "base/value_parse.hpp"
#include "layouts/transfer.hpp"
#include "base/try.hpp"

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
      return Error::usage("export to the torchair layout is not supported (import it, then `opcache get` its entry)");
  }
  return Error::usage("export: unknown layout");  // not reached: every Layout is a case above
}

}  // namespace opcache::layouts
