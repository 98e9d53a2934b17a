#include <map>

#include "layouts/transfer.hpp"
#include "base/try.hpp"

namespace opcache::layouts {

namespace {

// The scanner of `layout`. No default: -Wswitch names the next layout here.
Scan scan_layout(Layout layout, const std::filesystem::path& dir) {
  switch (layout) {
    case Layout::mindspore:
      return scan_mindspore(dir);
    case Layout::cann:
      return scan_cann(dir);
    case Layout::torchair:
      return scan_torchair(dir);
  }
  return {};  // not reached: every Layout is a case above
}

}  // namespace

Result<ImportReport> import_directory(Store& store, const std::filesystem::path& dir, const Scenario& scenario,
                                      std::optional<Layout> layout, bool dry_run) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Error::usage(dir.string() + " is not a directory");
  }
  ImportReport report;
  report.dry_run = dry_run;
  if (layout) {
    report.layout = *layout;
  } else {
    OPCACHE_TRY_ASSIGN(report.layout, detect_layout(dir));
  }
  Scan scan = scan_layout(report.layout, dir);
  report.skipped = std::move(scan.skipped);
  std::map<std::string, std::string> first_origin;  // key -> origin stored first in this import
  for (auto& candidate : scan.candidates) {
    auto key = store.key(candidate.descriptor_json, scenario);
    if (!key) {
      report.skipped.push_back({candidate.origin, key.error().message()});
      continue;
    }
    ImportedItem item{candidate.origin, *key, candidate.op_type, ""};
    if (auto first = first_origin.find(*key); first != first_origin.end()) {
      item.same_as = first->second;
      report.duplicates.push_back(std::move(item));
      continue;
    }
    OPCACHE_TRY_ASSIGN(bool present, store.contains(*key));
    if (present) {
      first_origin[*key] = candidate.origin;
      report.already_present.push_back(std::move(item));
      continue;
    }
    if (!dry_run) {
      auto stored = store.put(candidate.descriptor_json, scenario, candidate.files);
      if (!stored) {
        if (stored.error().code() == ErrorCode::io && stored.error().message().find("changed") == std::string::npos) {
          return stored.error();  // the store itself failed (disk full, ...): stop
        }
        report.skipped.push_back({candidate.origin, stored.error().message()});
        continue;
      }
    }
    first_origin[*key] = candidate.origin;
    report.imported.push_back(std::move(item));
  }
  return report;
}

}  // namespace opcache::layouts
