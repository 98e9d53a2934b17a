// Import from and export to the vendor cache layouts (layouts/*.cpp and
// `opcache import` / `opcache export`), on fixture trees that mimic what
// MindSpore, CANN and torchair leave on disk (tests/support/vendor_trees.hpp):
// multi-rank trees, partial and corrupt triples, unusual names, read-only
// sources, and symlinks planted in export targets.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layouts/layout.hpp"
#include "layouts/transfer.hpp"
#include "opcache/opcache.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/files.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"
#include "tests/support/vendor_trees.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::Store;
using opcache::StoreConfig;
using opcache::layouts::ExportOptions;
using opcache::layouts::ImportedItem;
using opcache::layouts::ImportReport;
using opcache::layouts::Layout;
using opcache::layouts::Skipped;
using opcache::test::CannCache;
using opcache::test::CannKernel;
using opcache::test::CliRunner;
using opcache::test::contains;
using opcache::test::entry_names;
using opcache::test::hermetic;
using opcache::test::k_infer_scenario;
using opcache::test::k_test_scenario;
using opcache::test::MindSporeKernel;
using opcache::test::MindSporeOp;
using opcache::test::MindSporeRun;
using opcache::test::MindSporeTree;
using opcache::test::ProcessOptions;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::TorchairOutputs;
using opcache::test::write_text;

namespace {

// ---------------------------------------------------------------------------
// Snapshots: every entry of a tree with its kind, bytes (or link target), mode
// and mtime, so "nothing was modified" can be asserted exactly.

struct NodeState {
  char kind = '?';      // f(ile), d(irectory), l(ink), o(ther)
  std::string content;  // file bytes or symlink target
  mode_t mode = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const NodeState& other) const = default;
};
using Snapshot = std::map<std::string, NodeState>;

NodeState state_of(const fs::path& path) {
  struct stat info {};
  REQUIRE_MESSAGE(::lstat(path.c_str(), &info) == 0, "lstat " << path);
  NodeState state;
  state.mode = info.st_mode;
  state.mtime_ns = static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
  if (S_ISREG(info.st_mode)) {
    state.kind = 'f';
    state.content = read_text(path);
  } else if (S_ISDIR(info.st_mode)) {
    state.kind = 'd';
  } else if (S_ISLNK(info.st_mode)) {
    state.kind = 'l';
    state.content = fs::read_symlink(path).string();
  } else {
    state.kind = 'o';
  }
  return state;
}

Snapshot snapshot_tree(const fs::path& root) {
  Snapshot snapshot;
  snapshot["."] = state_of(root);
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    snapshot[it->path().lexically_relative(root).string()] = state_of(it->path());
  }
  return snapshot;
}

// Reports the first difference between two snapshots (or "" when equal).
std::string snapshot_difference(const Snapshot& before, const Snapshot& after) {
  for (const auto& [path, state] : before) {
    auto found = after.find(path);
    if (found == after.end()) {
      return path + " disappeared";
    }
    if (!(found->second == state)) {
      return path + " changed (kind/bytes/mode/mtime)";
    }
  }
  for (const auto& [path, state] : after) {
    if (before.count(path) == 0) {
      return path + " appeared";
    }
  }
  return "";
}

// Makes a tree look old and partly read-only, so any write would show.
void age_tree(const fs::path& root) {
  const fs::file_time_type old_time = fs::file_time_type::clock::now() - std::chrono::hours(24 * 400);
  std::vector<fs::path> paths;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    paths.push_back(it->path());
  }
  std::sort(paths.rbegin(), paths.rend());  // children before their directory
  for (const auto& path : paths) {
    if (fs::is_symlink(path)) {
      continue;
    }
    if (fs::is_regular_file(path) && path.extension() == ".o") {
      fs::permissions(path, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    }
    fs::last_write_time(path, old_time);
  }
}

std::set<std::string> names_of(const std::vector<fs::path>& files) {
  std::set<std::string> names;
  for (const auto& file : files) {
    names.insert(file.filename().string());
  }
  return names;
}

// Files anywhere below `root` whose name marks an unfinished write.
std::vector<std::string> temp_files_below(const fs::path& root) {
  std::vector<std::string> found;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const auto name = it->path().filename().string();
    if (name.rfind(".opcache-", 0) == 0 || contains(name, ".tmp")) {
      found.push_back(it->path().string());
    }
  }
  return found;
}

struct stat stat_of(const fs::path& path) {
  struct stat info {};
  REQUIRE_MESSAGE(::lstat(path.c_str(), &info) == 0, "lstat " << path);
  return info;
}

// ---------------------------------------------------------------------------
// The store and the library.

opcache::Scenario scenario_of(const std::string& spec) {
  auto scenario = opcache::parse_scenario(spec);
  REQUIRE_MESSAGE(scenario.ok(), (scenario.ok() ? "" : scenario.error().message()));
  return *scenario;
}

// Opens the cache at `cache` with the built-in volatile fields, whatever
// OPCACHE_VOLATILE_FIELDS says; REQUIREs success.
Store open_store_builtin_fields(const fs::path& cache) {
  StoreConfig config;
  config.cache_dir = cache;
  config.volatile_fields = "";  // the built-in list, whatever the environment says
  auto store = Store::open(config);
  REQUIRE_MESSAGE(store.ok(), (store.ok() ? "" : store.error().message()));
  return std::move(store).value();
}

ImportReport import_ok(Store& store, const fs::path& dir, std::optional<Layout> layout = std::nullopt,
                       bool dry_run = false, const std::string& scenario = k_test_scenario) {
  auto report = opcache::layouts::import_directory(store, dir, scenario_of(scenario), layout, dry_run);
  REQUIRE_MESSAGE(report.ok(), (report.ok() ? "" : report.error().message()));
  return std::move(report).value();
}

std::vector<opcache::Entry> list_all(Store& store) {
  auto entries = store.list();
  REQUIRE(entries.ok());
  return *entries;
}

std::string key_of(const Store& store, const json& descriptor, const std::string& scenario = k_test_scenario) {
  auto key = store.key(descriptor.dump(), scenario_of(scenario));
  REQUIRE_MESSAGE(key.ok(), (key.ok() ? "" : key.error().message()));
  return *key;
}

std::vector<std::string> member_names(Store& store, const std::string& key) {
  auto names = store.member_names(key);
  REQUIRE(names.ok());
  REQUIRE(names->has_value());
  return **names;
}

const ImportedItem* find_item(const std::vector<ImportedItem>& items, const std::string& origin) {
  for (const auto& item : items) {
    if (item.origin == origin) {
      return &item;
    }
  }
  return nullptr;
}

// Every reason reported for `path`.
std::vector<std::string> reasons_for(const std::vector<Skipped>& skipped, const std::string& path) {
  std::vector<std::string> reasons;
  for (const auto& item : skipped) {
    if (item.path == path) {
      reasons.push_back(item.reason);
    }
  }
  return reasons;
}

std::string describe(const std::vector<Skipped>& skipped) {
  std::string text;
  for (const auto& item : skipped) {
    text += "\n  " + item.path + ": " + item.reason;
  }
  return text;
}

std::string origin_of(const MindSporeKernel& kernel) {
  return "rank_" + std::to_string(kernel.rank) + "/kernel_meta/" + kernel.stem;
}

const json* find_json_item(const json& items, const std::string& origin) {
  for (const auto& item : items) {
    if (item.value("origin", "") == origin) {
      return &item;
    }
  }
  return nullptr;
}

std::vector<std::string> json_reasons_for(const json& skipped, const std::string& path) {
  std::vector<std::string> reasons;
  for (const auto& item : skipped) {
    if (item.value("path", "") == path) {
      reasons.push_back(item.value("reason", ""));
    }
  }
  return reasons;
}

// Removes a hard-linked or read-only file and writes new bytes at its name.
void rewrite(const fs::path& path, const std::string& bytes) {
  fs::remove(path);
  write_text(path, bytes);
}

}  // namespace

// ===========================================================================
// MindSpore import

TEST_CASE("layouts::import_directory stores a kernel found under 8 ranks once") {
  TempDir temp;
  const auto ops = opcache::test::sample_mindspore_ops();
  const MindSporeTree tree = opcache::test::write_mindspore_tree(temp / "job", 8, ops);
  REQUIRE(tree.kernels.size() == 40);
  // Every rank has its own names (the device id is in the stem) and its own job ids.
  CHECK(tree.at(0, 0).stem == "square_12484080525657478220_0");
  CHECK(tree.at(7, 0).stem == "square_12484080525657478220_7");
  CHECK(read_text(tree.at(0, 0).info) != read_text(tree.at(7, 0).info));
  CHECK(read_text(tree.at(0, 0).object) == read_text(tree.at(7, 0).object));

  Store store = open_store_builtin_fields(temp / "cache");
  const ImportReport report = import_ok(store, tree.root);
  CHECK(report.layout == Layout::mindspore);
  CHECK_MESSAGE(report.skipped.empty(), describe(report.skipped));
  REQUIRE(report.imported.size() == 5);
  REQUIRE(report.duplicates.size() == 35);
  CHECK(report.already_present.empty());

  std::set<std::string> keys;
  for (std::size_t op = 0; op < ops.size(); ++op) {
    const auto& first = tree.at(0, op);
    const ImportedItem* imported = find_item(report.imported, origin_of(first));
    REQUIRE_MESSAGE(imported != nullptr, origin_of(first));
    CHECK(imported->op_type == ops[op].type);
    CHECK(imported->same_as.empty());
    keys.insert(imported->key);
    for (int rank = 1; rank < 8; ++rank) {
      const auto& copy = tree.at(rank, op);
      const ImportedItem* duplicate = find_item(report.duplicates, origin_of(copy));
      REQUIRE_MESSAGE(duplicate != nullptr, origin_of(copy));
      CHECK(duplicate->key == imported->key);
      CHECK(duplicate->same_as == origin_of(first));
    }
    // Stored with rank 0's names, .o first and the .info last.
    CHECK(member_names(store, imported->key) ==
          std::vector<std::string>{first.stem + ".o", first.stem + ".json", first.stem + ".info"});
    auto hit = store.get(imported->key, temp / "got" / first.stem);
    REQUIRE(hit.ok());
    REQUIRE(hit->has_value());
    for (const auto& file : first.files()) {
      CHECK(read_text(temp / "got" / first.stem / file.filename()) == read_text(file));
    }
  }
  CHECK(keys.size() == 5);
  CHECK(list_all(store).size() == 5);

  // A second import (through the CLI, same cache) finds all of it there.
  CliRunner cli(temp);
  json second = cli.run_json({"import", tree.root.string(), "--scenario", k_test_scenario});
  CHECK(second["layout"] == "mindspore");
  CHECK(second["dry_run"] == false);
  CHECK(second["imported"].empty());
  CHECK(second["skipped"].empty());
  REQUIRE(second["already_present"].size() == 5);
  CHECK(second["duplicates"].size() == 35);
  for (std::size_t op = 0; op < ops.size(); ++op) {
    const json* present = find_json_item(second["already_present"], origin_of(tree.at(0, op)));
    REQUIRE(present != nullptr);
    CHECK(keys.count((*present)["key"].get<std::string>()) == 1);
    const json* duplicate = find_json_item(second["duplicates"], origin_of(tree.at(3, op)));
    REQUIRE(duplicate != nullptr);
    CHECK((*duplicate)["same_as"] == origin_of(tree.at(0, op)));
  }
  CHECK(list_all(store).size() == 5);

  // The text report says the same.
  auto text = cli.run({"import", tree.root.string(), "--scenario", k_test_scenario});
  CHECK(text.exit_code == 0);
  CHECK(contains(text.out, "mindspore layout: imported 0, duplicates 35, already present 5, skipped 0"));
  CHECK(contains(text.out, "duplicate  " + origin_of(tree.at(1, 0)) + "  same kernel as " + origin_of(tree.at(0, 0))));
}

TEST_CASE("layouts::import_directory keys a MindSpore job without its volatile fields, and by its shape") {
  TempDir temp;
  const auto ops = opcache::test::sample_mindspore_ops();
  Store store = open_store_builtin_fields(temp / "cache");

  SUBCASE("the same jobs with other ids, devices, paths and names get the same keys") {
    const MindSporeTree first = opcache::test::write_mindspore_tree(temp / "run1", 2, ops);
    MindSporeRun other;
    other.first_device = 4;
    other.first_job_id = 917;
    other.source_id_base = 77;
    other.debug_dir_prefix = "/home/user/jobs/bert-42/";
    other.full_name_scope = "Default/network-TrainOneStepCell/network-WithLossCell";
    other.py_module_path = "/opt/ascend-toolkit/latest/opp/built-in/op_impl/ai_core/tbe";
    const MindSporeTree second = opcache::test::write_mindspore_tree(temp / "run2", 3, ops, other);
    CHECK(second.at(0, 0).stem == "square_12484080525657478220_4");

    const ImportReport a = import_ok(store, first.root);
    REQUIRE(a.imported.size() == 5);
    const ImportReport b = import_ok(store, second.root);
    CHECK(b.imported.empty());
    CHECK_MESSAGE(b.skipped.empty(), describe(b.skipped));
    REQUIRE(b.already_present.size() == 5);
    CHECK(b.duplicates.size() == 10);
    for (std::size_t op = 0; op < ops.size(); ++op) {
      const ImportedItem* original = find_item(a.imported, origin_of(first.at(0, op)));
      const ImportedItem* again = find_item(b.already_present, origin_of(second.at(0, op)));
      REQUIRE(original != nullptr);
      REQUIRE(again != nullptr);
      CHECK(original->key == again->key);
    }
    CHECK(list_all(store).size() == 5);
  }

  SUBCASE("a kernel compiled for a different shape on one rank is a separate entry") {
    const MindSporeTree tree = opcache::test::write_mindspore_tree(temp / "job", 8, ops);
    // Rank 5 saw a wider ReLU: its own hash, its own object, its own job.
    MindSporeOp wider = ops[1];
    wider.shape = {32, 16};
    for (const auto& file : tree.at(5, 1).files()) {
      fs::remove(file);
    }
    const MindSporeKernel odd = opcache::test::write_mindspore_kernel(tree.kernel_meta(5), wider, 5, 5, 500);
    CHECK(odd.stem != tree.at(5, 1).stem);
    CHECK(read_text(odd.object) != read_text(tree.at(0, 1).object));

    const ImportReport report = import_ok(store, tree.root);
    CHECK_MESSAGE(report.skipped.empty(), describe(report.skipped));
    REQUIRE(report.imported.size() == 6);
    CHECK(report.duplicates.size() == 34);
    const ImportedItem* relu = find_item(report.imported, origin_of(tree.at(0, 1)));
    const ImportedItem* relu_wide = find_item(report.imported, origin_of(odd));
    REQUIRE(relu != nullptr);
    REQUIRE(relu_wide != nullptr);
    CHECK(relu->key != relu_wide->key);
    CHECK(relu_wide->op_type == "ReLU");
    int relu_duplicates = 0;
    for (const auto& item : report.duplicates) {
      relu_duplicates += item.key == relu->key ? 1 : 0;
      CHECK(item.key != relu_wide->key);
    }
    CHECK(relu_duplicates == 6);  // ranks 1-4, 6, 7
    CHECK(list_all(store).size() == 6);
  }
}

TEST_CASE("layouts::import_directory skips partial, corrupt and foreign MindSpore files with the reason") {
  TempDir temp;
  const fs::path dir = temp / "job";
  const fs::path meta = dir / "rank_0" / "kernel_meta";
  const fs::path outside = temp / "outside";
  auto op = [](const std::string& func, const std::string& type, std::vector<std::int64_t> shape) {
    MindSporeOp result;
    result.func_name = func;
    result.type = type;
    result.shape = std::move(shape);
    return result;
  };
  std::int64_t job = 1;
  auto kernel = [&](const MindSporeOp& o) { return opcache::test::write_mindspore_kernel(meta, o, 0, 0, job++); };

  const MindSporeKernel good = kernel(op("square", "Square", {3}));
  const MindSporeKernel no_object = kernel(op("relu", "ReLU", {16}));
  fs::remove(no_object.object);
  const MindSporeKernel no_metadata = kernel(op("neg", "Neg", {16}));
  fs::remove(no_metadata.metadata);
  const MindSporeKernel no_info = kernel(op("add", "Add", {16}));
  fs::remove(no_info.info);
  const MindSporeKernel torn_info = kernel(op("reduce_sum_d", "ReduceSumD", {16}));
  {
    const std::string text = read_text(torn_info.info);
    write_text(torn_info.info, text.substr(0, text.size() / 2));  // a half-written .info
  }
  const MindSporeKernel torn_metadata = kernel(op("exp", "Exp", {16}));
  write_text(torn_metadata.metadata, "{\"binFileName\":\"" + torn_metadata.stem + "\",\"sha256\":");
  const MindSporeKernel not_a_job = kernel(op("sqrt", "Sqrt", {16}));
  write_text(not_a_job.info, json{{"job_id", 3}, {"job_type", "Compile"}, {"source_id", 0}}.dump());
  const MindSporeKernel only_data = kernel(op("identity", "Identity", {16}));
  {
    json info = json::parse(read_text(only_data.info));
    auto& list = info["job_content"]["op_list"];
    list.erase(list.size() - 1);  // keep the Data op only
    REQUIRE(list.size() == 1);
    write_text(only_data.info, info.dump());
  }
  const MindSporeKernel altered = kernel(op("abs", "Abs", {16}));
  write_text(altered.object, read_text(good.object));  // a real object, but not the one the .json names
  // A symlink in kernel_meta pointing at a real object outside.
  const MindSporeKernel linked = kernel(op("sign", "Sign", {16}));
  fs::create_directories(outside);
  fs::rename(linked.object, outside / "sign.o");
  fs::create_symlink(outside / "sign.o", linked.object);
  write_text(meta / "compile_20250301.log", "[INFO] TBE(12345):compile done\n");
  // Planted directories: a rank directory and a kernel_meta that are symlinks to real kernels.
  const MindSporeTree elsewhere = opcache::test::write_mindspore_tree(outside / "other_job", 1, {op("tanh", "Tanh", {8})});
  fs::create_symlink(elsewhere.root / "rank_0", dir / "rank_1");
  fs::create_directories(dir / "rank_2");
  fs::create_symlink(elsewhere.kernel_meta(0), dir / "rank_2" / "kernel_meta");

  struct Expected {
    std::string path;
    std::string reason;
  };
  const std::vector<Expected> expected = {
      {origin_of(no_object), "partial triple: missing .o"},
      {origin_of(no_metadata), "partial triple: missing .json"},
      {origin_of(no_info), "partial triple: missing .info"},
      {origin_of(torn_info), torn_info.stem + ".info: invalid JSON"},
      {origin_of(torn_metadata), torn_metadata.stem + ".json: invalid JSON"},
      {origin_of(not_a_job), "has no \"job_content\" object"},
      {origin_of(only_data), "names no operator type in job_content.op_list"},
      {origin_of(altered), altered.stem + ".o does not match the sha256 in " + altered.stem + ".json"},
      {"rank_0/kernel_meta/" + linked.stem + ".o", "is a symlink (not followed)"},
      {origin_of(linked), "partial triple: missing .o"},
      {"rank_0/kernel_meta/compile_20250301.log", "not part of a .o/.json/.info triple"},
      {"rank_1", "is a symlink (not followed)"},
      {"rank_2/kernel_meta", "is a symlink (not followed)"},
  };

  Store store = open_store_builtin_fields(temp / "cache");
  SUBCASE("library") {
    const ImportReport report = import_ok(store, dir);
    INFO("skipped:", describe(report.skipped));
    REQUIRE(report.imported.size() == 1);
    CHECK(report.imported[0].origin == origin_of(good));
    CHECK(report.duplicates.empty());
    for (const auto& item : expected) {
      const auto reasons = reasons_for(report.skipped, item.path);
      CHECK_MESSAGE(reasons.size() == 1, item.path);
      if (reasons.size() == 1) {
        CHECK_MESSAGE(contains(reasons[0], item.reason), item.path, " -> ", reasons[0]);
      }
    }
    CHECK(report.skipped.size() == expected.size());
    CHECK(list_all(store).size() == 1);
  }
  SUBCASE("CLI --json and text") {
    CliRunner cli(temp);
    json report = cli.run_json({"import", dir.string(), "--scenario", k_test_scenario, "--layout", "mindspore"});
    INFO("report: ", report.dump(1));
    REQUIRE(report["imported"].size() == 1);
    CHECK(report["imported"][0]["origin"] == origin_of(good));
    CHECK(report["imported"][0]["op_type"] == "Square");
    for (const auto& item : expected) {
      const auto reasons = json_reasons_for(report["skipped"], item.path);
      CHECK_MESSAGE(reasons.size() == 1, item.path);
      if (reasons.size() == 1) {
        CHECK_MESSAGE(contains(reasons[0], item.reason), item.path, " -> ", reasons[0]);
      }
    }
    CHECK(report["skipped"].size() == expected.size());
    auto text = cli.run({"import", dir.string(), "--scenario", k_test_scenario});
    CHECK(text.exit_code == 0);
    CHECK(contains(text.out, "skipped   " + origin_of(no_object) + "  partial triple: missing .o"));
    CHECK(contains(text.out, "present   " + origin_of(good) + "  already in the cache"));
  }
  // Nothing was taken from the planted symlinks' targets.
  for (const auto& entry : list_all(store)) {
    CHECK(entry.op_type == "Square");
  }
}

TEST_CASE("layouts::import_directory takes names with unusual characters and export writes them back unchanged") {
  TempDir temp;
  const fs::path meta = temp / "job" / "rank_0" / "kernel_meta";
  const std::vector<std::pair<std::string, std::string>> names = {
      {"my op", "MyOp"}, {"conv2d+relu", "Conv2D+ReLU"}, {"fused@bias", "FusedBias"},
      {"算子", "自定义算子"}, {"layer#4", "Layer4"}};
  std::vector<MindSporeKernel> kernels;
  std::int64_t job = 1;
  for (const auto& [func, type] : names) {
    MindSporeOp op;
    op.func_name = func;
    op.type = type;
    op.shape = {8};
    op.hash = std::to_string(job);
    kernels.push_back(opcache::test::write_mindspore_kernel(meta, op, 0, 0, job++));
  }
  CHECK(kernels[0].stem == "my op_1_0");
  CHECK(kernels[3].stem == "算子_4_0");
  CHECK(kernels[4].stem == "layer#4_5_0");

  CliRunner cli(temp);
  json report = cli.run_json({"import", (temp / "job").string(), "--scenario", k_test_scenario});
  CHECK(report["skipped"].empty());
  REQUIRE(report["imported"].size() == kernels.size());
  for (const auto& kernel : kernels) {
    const json* item = find_json_item(report["imported"], origin_of(kernel));
    REQUIRE_MESSAGE(item != nullptr, origin_of(kernel));
    CHECK((*item)["op_type"] == kernel.op_type);
  }

  const fs::path out = temp / "export";
  json exported = cli.run_json({"export", out.string(), "--layout", "mindspore", "--ranks", "2"});
  CHECK(exported["entries"] == kernels.size());
  CHECK(exported["skipped"].empty());
  std::set<std::string> expected_names;
  for (const auto& kernel : kernels) {
    for (const auto& file : kernel.files()) {
      expected_names.insert(file.filename().string());
    }
  }
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path exported_meta = out / ("rank_" + std::to_string(rank)) / "kernel_meta";
    CHECK(entry_names(exported_meta) == expected_names);
    for (const auto& kernel : kernels) {
      for (const auto& file : kernel.files()) {
        CHECK_MESSAGE(read_text(exported_meta / file.filename()) == read_text(file), file.filename());
      }
    }
  }
}

TEST_CASE("layouts::import_directory never modifies the directory it reads, and --dry-run stores nothing") {
  TempDir temp;
  const fs::path outside = temp / "outside";
  write_text(outside / "secret.o", "not a kernel");

  // MindSpore with everything that could tempt a writer: partial triples,
  // a corrupt .info, a read-only tree, a planted symlink.
  const auto ops = opcache::test::sample_mindspore_ops();
  const MindSporeTree ms = opcache::test::write_mindspore_tree(temp / "ms", 2, {ops[0], ops[1], ops[2]});
  fs::remove(ms.at(1, 2).metadata);
  write_text(ms.at(1, 1).info, "{\"job_content\":");
  fs::create_symlink(outside / "secret.o", ms.kernel_meta(0) / "planted_1_0.o");
  write_text(ms.kernel_meta(0) / "build.log", "log");

  // CANN with an interrupted write.
  const CannCache cann = opcache::test::write_cann_cache(temp / "cann", "Ascend910B1", opcache::test::sample_cann_ops());
  write_text(cann.soc_dir() / (cann.kernels[0].name + ".o.temp"), "partial");

  // torchair with two outputs directories.
  const auto stats = opcache::test::sample_torchair_stats();
  opcache::test::write_torchair_outputs(temp / "torchair", "20250301093000", 4242, "20250301093512", stats);
  opcache::test::write_torchair_outputs(temp / "torchair", "20250301110000", 5151, "20250301110431", stats);

  struct Case {
    fs::path dir;
    std::string layout;
    std::size_t imported;
  };
  const std::vector<Case> cases = {{ms.root, "mindspore", 3}, {cann.root, "cann", 3}, {temp / "torchair", "torchair", 1}};
  CliRunner cli(temp);
  for (const auto& c : cases) {
    CAPTURE(c.layout);
    age_tree(c.dir);
    const Snapshot before = snapshot_tree(c.dir);
    const Snapshot outside_before = snapshot_tree(outside);
    // The cache already holds what the earlier cases imported for real.
    std::vector<opcache::Entry> entries_before;
    {
      Store store = open_store_builtin_fields(temp / "cache");
      entries_before = list_all(store);
    }

    json dry = cli.run_json({"import", c.dir.string(), "--scenario", k_test_scenario, "--dry-run"});
    CHECK(dry["layout"] == c.layout);
    CHECK(dry["dry_run"] == true);
    CHECK(dry["imported"].size() == c.imported);
    CHECK(snapshot_difference(before, snapshot_tree(c.dir)) == "");
    {
      Store store = open_store_builtin_fields(temp / "cache");
      const auto entries_after = list_all(store);
      CHECK(entries_after.size() == entries_before.size());
      std::set<std::string> keys_before, keys_after;
      for (const auto& entry : entries_before) {
        keys_before.insert(entry.key);
      }
      for (const auto& entry : entries_after) {
        keys_after.insert(entry.key);
      }
      CHECK(keys_after == keys_before);
    }
    auto dry_text = cli.run({"import", c.dir.string(), "--scenario", k_test_scenario, "-n"});
    CHECK(dry_text.exit_code == 0);
    CHECK(contains(dry_text.out, c.layout + " layout: would import " + std::to_string(c.imported)));

    json real = cli.run_json({"import", c.dir.string(), "--scenario", k_test_scenario});
    CHECK(real["dry_run"] == false);
    CHECK(real["imported"].size() == c.imported);
    CHECK(snapshot_difference(before, snapshot_tree(c.dir)) == "");
    CHECK(snapshot_difference(outside_before, snapshot_tree(outside)) == "");
    // The dry run promised exactly what the real import did.
    for (std::size_t i = 0; i < c.imported; ++i) {
      CHECK(dry["imported"][i]["key"] == real["imported"][i]["key"]);
    }
  }
  Store store = open_store_builtin_fields(temp / "cache");
  CHECK(list_all(store).size() == 3 + 3 + 1);
}

TEST_CASE("layouts::detect_layout recognises each vendor layout and asks for --layout otherwise") {
  TempDir temp;
  const auto ops = opcache::test::sample_mindspore_ops();
  const MindSporeTree ms = opcache::test::write_mindspore_tree(temp / "ms", 2, {ops[0]});
  fs::create_directories(temp / "single");
  opcache::test::write_mindspore_kernel(temp / "single" / "kernel_meta", ops[0], 0, 0, 1);
  const CannCache cann = opcache::test::write_cann_cache(temp / "cann", "Ascend910B1", {opcache::test::sample_cann_ops()[0]});
  const TorchairOutputs outputs = opcache::test::write_torchair_outputs(
      temp / "torchair", "20250301093000", 4242, "20250301093512", opcache::test::sample_torchair_stats());

  const std::vector<std::pair<fs::path, Layout>> cases = {
      {ms.root, Layout::mindspore},
      {ms.kernel_meta(0), Layout::mindspore},
      {temp / "single", Layout::mindspore},
      {cann.root, Layout::cann},
      {cann.soc_dir(), Layout::cann},
      {temp / "torchair", Layout::torchair},
      {temp / "torchair" / "aclnn_static_shape_kernel_outputs", Layout::torchair},
      {outputs.dir, Layout::torchair},
  };
  Store store = open_store_builtin_fields(temp / "cache");
  for (const auto& [dir, layout] : cases) {
    CAPTURE(dir);
    auto detected = opcache::layouts::detect_layout(dir);
    REQUIRE_MESSAGE(detected.ok(), (detected.ok() ? "" : detected.error().message()));
    CHECK(*detected == layout);
    // And what was detected is usable: each holds exactly one kernel.
    const ImportReport report = import_ok(store, dir, std::nullopt, /*dry_run=*/true);
    CHECK(report.layout == layout);
    CHECK(report.imported.size() + report.already_present.size() == 1);
  }

  // A MindSpore job whose directory happens to end in "_outputs" (a common
  // name for a training run's output directory) is still MindSpore: it holds
  // rank_*/kernel_meta and nothing of torchair's.
  const MindSporeTree named = opcache::test::write_mindspore_tree(temp / "bert_train_outputs", 1, {ops[0]});
  auto detected_named = opcache::layouts::detect_layout(named.root);
  REQUIRE(detected_named.ok());
  CHECK_MESSAGE(*detected_named == Layout::mindspore,
                "detect_layout takes any directory named *_outputs for torchair, before looking inside");

  // Unrecognisable: a usage error (exit 2) that says to pass --layout.
  write_text(temp / "unknown" / "README.md", "notes\n");
  write_text(temp / "unknown" / "data" / "weights.bin", "0123");
  auto unknown = opcache::layouts::detect_layout(temp / "unknown");
  REQUIRE(!unknown.ok());
  CHECK(unknown.error().code() == opcache::ErrorCode::usage);
  CHECK(contains(unknown.error().message(), "pass --layout"));

  CliRunner cli(temp);
  auto result = cli.run({"import", (temp / "unknown").string(), "--scenario", k_test_scenario});
  CHECK(result.exit_code == 2);
  CHECK(contains(result.err, "cannot tell the layout of " + (temp / "unknown").string()));
  CHECK(contains(result.err, "pass --layout"));
  json failure = cli.run_json({"import", (temp / "unknown").string(), "--scenario", k_test_scenario}, 2);
  CHECK(failure["ok"] == false);
  CHECK(failure["error"] == "usage");
  // Not a directory at all.
  auto missing = cli.run({"import", (temp / "nowhere").string(), "--scenario", k_test_scenario});
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.err, "is not a directory"));
  // --layout wins over detection.
  json forced = cli.run_json({"import", ms.root.string(), "--scenario", k_test_scenario, "--layout", "mindspore", "-n"});
  CHECK(forced["layout"] == "mindspore");
}

// ===========================================================================
// CANN

TEST_CASE("layouts::import_directory takes CANN te_ pairs, skips unfinished writes and exports them back") {
  TempDir temp;
  const CannCache cann = opcache::test::write_cann_cache(temp / "op_cache", "Ascend910B1", opcache::test::sample_cann_ops());
  // An interrupted write: the .o is there, the .json (the commit marker) is not.
  const CannKernel interrupted = opcache::test::write_cann_kernel(cann.soc_dir(), {"Relu", {64}, "float16"}, cann.soc);
  fs::remove(interrupted.metadata);
  // A leftover of the .temp + rename protocol.
  const CannKernel leftover = opcache::test::write_cann_kernel(temp / "scratch", {"Neg", {64}, "float16"}, cann.soc);
  const std::string temp_name = leftover.name + ".o.temp";
  fs::copy_file(leftover.object, cann.soc_dir() / temp_name);
  // A pair whose .o is not the one its .json names.
  const CannKernel tampered = opcache::test::write_cann_kernel(cann.soc_dir(), {"Sqrt", {64}, "float16"}, cann.soc);
  rewrite(tampered.object, read_text(cann.kernels[0].object));
  // A planted symlink next to op_cache.ini.
  write_text(temp / "elsewhere" / "x", "x");
  fs::create_symlink(temp / "elsewhere", cann.root / "stale_cache");
  const Snapshot before = snapshot_tree(cann.root);
  const std::string ini_text = read_text(cann.ini);
  CHECK(contains(ini_text, "adk_version=8.0.RC2"));

  Store store = open_store_builtin_fields(temp / "cache");
  const ImportReport report = import_ok(store, cann.root);
  INFO("skipped:", describe(report.skipped));
  CHECK(report.layout == Layout::cann);
  REQUIRE(report.imported.size() == 3);
  const std::string prefix = "kernel_cache/" + cann.soc + "/";
  for (const auto& kernel : cann.kernels) {
    const ImportedItem* item = find_item(report.imported, prefix + kernel.name);
    REQUIRE_MESSAGE(item != nullptr, kernel.name);
    CHECK(item->op_type == kernel.op_type);
    // Keyed by the te_ name (which CANN derives from the stripped op JSON) and its SoC directory.
    CHECK(item->key == key_of(store, {{"op_type", kernel.op_type},
                                      {"framework", "cann"},
                                      {"cann_kernel", kernel.name},
                                      {"soc_dir", cann.soc}}));
    CHECK(member_names(store, item->key) == std::vector<std::string>{kernel.name + ".o", kernel.name + ".json"});
  }
  const auto interrupted_reasons = reasons_for(report.skipped, prefix + interrupted.name);
  REQUIRE(interrupted_reasons.size() == 1);
  CHECK(contains(interrupted_reasons[0], "no .json (the commit marker): an interrupted write"));
  const auto temp_reasons = reasons_for(report.skipped, prefix + temp_name);
  REQUIRE(temp_reasons.size() == 1);
  CHECK(contains(temp_reasons[0], "an unfinished write (.temp)"));
  const auto tampered_reasons = reasons_for(report.skipped, prefix + tampered.name);
  REQUIRE(tampered_reasons.size() == 1);
  CHECK(contains(tampered_reasons[0], "does not match the sha256"));
  const auto symlink_reasons = reasons_for(report.skipped, "stale_cache");
  CHECK_MESSAGE(symlink_reasons.size() == 1, "a planted symlink at the top of a CANN cache is reported ",
                symlink_reasons.size(), " times");
  CHECK(reasons_for(report.skipped, "op_cache.ini").empty());  // left alone, not an error
  CHECK(report.skipped.size() - symlink_reasons.size() == 3);
  // op_cache.ini (and everything else) untouched.
  CHECK(snapshot_difference(before, snapshot_tree(cann.root)) == "");
  CHECK(read_text(cann.ini) == ini_text);

  // Through the CLI: everything is there already; export writes the pairs back.
  CliRunner cli(temp);
  json again = cli.run_json({"import", cann.root.string(), "--scenario", k_test_scenario});
  CHECK(again["layout"] == "cann");
  CHECK(again["imported"].empty());
  CHECK(again["already_present"].size() == 3);

  const fs::path out = temp / "exported";
  json exported = cli.run_json({"export", out.string(), "--layout", "cann"});
  CHECK(exported["entries"] == 3);
  CHECK(exported["files_written"] == 6);
  CHECK(exported["skipped"].empty());
  CHECK(entry_names(out) == std::set<std::string>{"kernel_cache"});
  CHECK(entry_names(out / "kernel_cache") == std::set<std::string>{cann.soc});
  std::set<std::string> expected;
  for (const auto& kernel : cann.kernels) {
    for (const auto& file : kernel.files()) {
      expected.insert(file.filename().string());
      CHECK(read_text(out / "kernel_cache" / cann.soc / file.filename()) == read_text(file));
    }
  }
  CHECK(entry_names(out / "kernel_cache" / cann.soc) == expected);
  CHECK(temp_files_below(out).empty());

  // And the export is itself a CANN cache that imports to the same keys.
  json round = cli.run_json({"import", out.string(), "--scenario", k_test_scenario, "--layout", "cann"});
  CHECK(round["imported"].empty());
  CHECK(round["already_present"].size() == 3);

  // export --layout cann needs a DIR.
  auto no_dir = cli.run({"export", "--layout", "cann"});
  CHECK(no_dir.exit_code == 2);
  CHECK(contains(no_dir.err, "needs a DIR"));
}

// ===========================================================================
// torchair

TEST_CASE("layouts::import_directory takes one entry per torchair outputs directory") {
  TempDir temp;
  const fs::path build = temp / "static_kernels";
  const auto stats = opcache::test::sample_torchair_stats();
  const TorchairOutputs first = opcache::test::write_torchair_outputs(build, "20250301093000", 4242, "20250301093512", stats);
  // The same model compiled again by another process: identical statistics.
  const TorchairOutputs rerun = opcache::test::write_torchair_outputs(build, "20250301110000", 5151, "20250301110431", stats);
  // A model with a longer sequence: other shapes.
  auto longer = stats;
  longer[0].content["inputs"][0]["shape"] = {1, 4096};
  const TorchairOutputs other = opcache::test::write_torchair_outputs(build, "20250302080000", 6161, "20250302080301", longer);
  // Compilation interrupted before the package was written.
  const TorchairOutputs no_run = opcache::test::write_torchair_outputs(build, "20250302090000", 7171, "20250302090107", stats);
  fs::remove(no_run.run);
  // A statistics file cut short.
  const TorchairOutputs corrupt = opcache::test::write_torchair_outputs(build, "20250302100000", 8181, "20250302100220", stats);
  write_text(corrupt.stats[0], "{\"op_type\": \"Add\", \"inputs\": [");

  const std::string root = "aclnn_static_shape_kernel_outputs/";
  auto origin = [&](const TorchairOutputs& outputs) { return root + outputs.dir.filename().string(); };

  CliRunner cli(temp);
  json report = cli.run_json({"import", build.string(), "--scenario", k_test_scenario});
  INFO("report: ", report.dump(1));
  CHECK(report["layout"] == "torchair");
  REQUIRE(report["imported"].size() == 2);
  const json* imported = find_json_item(report["imported"], origin(first));
  const json* imported_other = find_json_item(report["imported"], origin(other));
  REQUIRE(imported != nullptr);
  REQUIRE(imported_other != nullptr);
  CHECK((*imported)["key"] != (*imported_other)["key"]);
  REQUIRE(report["duplicates"].size() == 1);
  CHECK(report["duplicates"][0]["origin"] == origin(rerun));
  CHECK(report["duplicates"][0]["same_as"] == origin(first));
  CHECK(report["duplicates"][0]["key"] == (*imported)["key"]);
  const auto no_run_reasons = json_reasons_for(report["skipped"], origin(no_run));
  REQUIRE(no_run_reasons.size() == 1);
  CHECK(contains(no_run_reasons[0], "no static_kernel_*.run package"));
  const auto corrupt_reasons = json_reasons_for(report["skipped"], origin(corrupt));
  REQUIRE(corrupt_reasons.size() == 1);
  CHECK(contains(corrupt_reasons[0], corrupt.stats[0].filename().string()));
  CHECK(contains(corrupt_reasons[0], "invalid JSON"));
  CHECK(report["skipped"].size() == 2);

  // Run again: nothing new.
  json again = cli.run_json({"import", build.string(), "--scenario", k_test_scenario, "--layout", "torchair"});
  CHECK(again["imported"].empty());
  CHECK(again["already_present"].size() == 2);
  CHECK(again["duplicates"].size() == 1);

  // The entry gives back the statistics and the package, byte for byte.
  const fs::path got = temp / "got";
  const std::string key = (*imported)["key"];
  json hit = cli.run_json({"get", key, "--out", got.string()});
  CHECK(hit["hit"] == true);
  CHECK(hit["op_type"] == "TorchairStaticKernels");
  std::vector<fs::path> members = first.stats;
  members.push_back(first.run);
  CHECK(entry_names(got) == names_of(members));
  for (const auto& file : members) {
    CHECK_MESSAGE(read_text(got / file.filename()) == read_text(file), file.filename());
  }
  // The _debug copy (every operator of the model) is not part of the entry.
  CHECK(entry_names(got).count("Cast_float16_ND_1_2048_0.json") == 0);
}

// ===========================================================================
// torchair export

namespace {

const char* const k_torchair_outputs = "aclnn_static_shape_kernel_outputs";

// The members of `key` as `get` writes them (into `dir`): name -> bytes.
std::map<std::string, std::string> member_bytes(Store& store, const std::string& key, const fs::path& dir) {
  auto hit = store.get(key, dir);
  REQUIRE_MESSAGE(hit.ok(), (hit.ok() ? "" : hit.error().message()));
  REQUIRE(hit->has_value());
  std::map<std::string, std::string> bytes;
  for (const auto& file : (*hit)->files) {
    bytes[file.filename().string()] = read_text(file);
  }
  return bytes;
}

// "<14 digits>_<digits>_outputs": the <pid> part, or -1 when the name is not of that form.
long torchair_outputs_pid(const std::string& name) {
  const std::string suffix = "_outputs";
  if (name.size() < 14 + 1 + 1 + suffix.size() ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0 || name[14] != '_') {
    return -1;
  }
  const std::string timestamp = name.substr(0, 14);
  const std::string pid = name.substr(15, name.size() - 15 - suffix.size());
  auto digits = [](const std::string& text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  return digits(timestamp) && digits(pid) ? std::stol(pid) : -1;
}

// Checks one exported outputs directory: <pid>/ with exactly the statistics
// of `source` (not its _debug copy) and its .run beside it, byte for byte.
void check_torchair_export(const fs::path& dir, const TorchairOutputs& source) {
  CAPTURE(dir);
  const long pid = torchair_outputs_pid(dir.filename().string());
  REQUIRE(pid > 0);
  const std::string pid_text = std::to_string(pid);
  CHECK(entry_names(dir) == std::set<std::string>{pid_text, source.run.filename().string()});
  CHECK(entry_names(dir / pid_text) == names_of(source.stats));
  for (const auto& file : source.stats) {
    CHECK_MESSAGE(read_text(dir / pid_text / file.filename()) == read_text(file), file.filename());
  }
  CHECK(read_text(dir / source.run.filename()) == read_text(source.run));
}

// The UTC "YYYYMMDDhhmmss" of a Unix time in ms (what torchair's names start
// with), from the C++20 calendar rather than the C library the export uses.
std::string utc_timestamp(std::int64_t unix_ms) {
  using namespace std::chrono;
  const sys_seconds moment{seconds(unix_ms / 1000)};
  const auto day = floor<days>(moment);
  const year_month_day date(day);
  const hh_mm_ss clock(moment - day);
  char text[32];
  std::snprintf(text, sizeof text, "%04d%02u%02u%02d%02d%02d", static_cast<int>(date.year()),
                static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
                static_cast<int>(clock.seconds().count()));
  return text;
}

// One torchair package (seed 003's shape) imported into `store`, and its index entry.
struct StoredTorchair {
  TorchairOutputs source;
  std::string key;
  opcache::Entry entry;
};

StoredTorchair store_torchair_package(Store& store, const fs::path& build) {
  StoredTorchair stored;
  stored.source = opcache::test::write_torchair_outputs(build, "20250301093000", 4242, "20250301093512",
                                                        opcache::test::sample_torchair_stats());
  const ImportReport imported = import_ok(store, build);
  REQUIRE(imported.imported.size() == 1);
  stored.key = imported.imported[0].key;
  auto entry = store.lookup(stored.key);
  REQUIRE(entry.ok());
  REQUIRE(entry->has_value());
  stored.entry = **entry;
  return stored;
}

opcache::layouts::ExportReport export_torchair_ok(Store& store, const fs::path& dir) {
  ExportOptions options;
  options.layout = Layout::torchair;
  options.dir = dir;
  auto report = opcache::layouts::export_entries(store, options);
  REQUIRE_MESSAGE(report.ok(), (report.ok() ? "" : report.error().message()));
  return std::move(report).value();
}

// What is in `dir`, one snapshot per child: a directory's whole tree, or a
// file's or symlink's own state (a symlink is not followed).
std::map<std::string, Snapshot> snapshot_children(const fs::path& dir) {
  std::map<std::string, Snapshot> children;
  for (const auto& name : entry_names(dir)) {
    const fs::path path = dir / name;
    children[name] = fs::is_directory(fs::symlink_status(path)) ? snapshot_tree(path) : Snapshot{{".", state_of(path)}};
  }
  return children;
}

// The first child of `dir` in `before` that is gone or differs in any way
// (a file added, changed or removed below it), or "": new children may have appeared.
std::string changed_child(const std::map<std::string, Snapshot>& before, const fs::path& dir) {
  const auto after = snapshot_children(dir);
  for (const auto& [name, snapshot] : before) {
    auto found = after.find(name);
    if (found == after.end()) {
      return name + " disappeared";
    }
    if (auto difference = snapshot_difference(snapshot, found->second); !difference.empty()) {
      return name + ": " + difference;
    }
  }
  return "";
}

}  // namespace

TEST_CASE("layouts::export_entries writes torchair packages back as outputs directories that import to the same keys and bytes") {
  TempDir temp;
  const fs::path build = temp / "static_kernels";
  const auto stats = opcache::test::sample_torchair_stats();
  const TorchairOutputs first =
      opcache::test::write_torchair_outputs(build, "20250301093000", 4242, "20250301093512", stats);
  auto longer = stats;
  longer[0].content["inputs"][0]["shape"] = {1, 4096};
  const TorchairOutputs other =
      opcache::test::write_torchair_outputs(build, "20250302080000", 6161, "20250302080301", longer);
  REQUIRE(fs::is_directory(first.debug_dir));  // import drops it: the round trip is by content

  CliRunner cli(temp);
  json imported = cli.run_json({"import", build.string(), "--scenario", k_test_scenario});
  REQUIRE(imported["imported"].size() == 2);
  std::map<std::string, const TorchairOutputs*> source_of;  // key -> the tree it came from
  for (const auto& item : imported["imported"]) {
    source_of[item["key"]] = item["origin"].get<std::string>().find(first.dir.filename().string()) != std::string::npos
                                 ? &first
                                 : &other;
  }
  REQUIRE(source_of.size() == 2);

  const fs::path out = temp / "out";
  json report = cli.run_json({"export", out.string(), "--layout", "torchair"});
  INFO("report: ", report.dump(1));
  CHECK(report["layout"] == "torchair");
  CHECK(report["entries"] == 2);
  CHECK(report["files_written"] == 2 * (stats.size() + 1));
  CHECK(report["files_linked"] == 0);
  CHECK(report["skipped"].empty());
  REQUIRE(report["directories"].size() == 2);
  CHECK(entry_names(out) == std::set<std::string>{k_torchair_outputs});
  CHECK(entry_names(out / k_torchair_outputs).size() == 2);
  std::set<std::string> reported;
  for (const auto& directory : report["directories"]) {
    reported.insert(fs::path(directory.get<std::string>()).filename().string());
    CHECK(fs::path(directory.get<std::string>()).parent_path() == out / k_torchair_outputs);
  }
  CHECK(reported == entry_names(out / k_torchair_outputs));
  CHECK(temp_files_below(out).empty());

  // A fresh store takes the export in: the same keys, the same member bytes.
  Store original = open_store_builtin_fields(temp / "cache");
  Store fresh = open_store_builtin_fields(temp / "fresh_cache");
  const ImportReport again = import_ok(fresh, out);
  CHECK(again.layout == Layout::torchair);
  CHECK_MESSAGE(again.skipped.empty(), describe(again.skipped));
  REQUIRE(again.imported.size() == 2);
  for (const auto& item : again.imported) {
    CAPTURE(item.origin);
    REQUIRE(source_of.count(item.key) == 1);
    const auto bytes = member_bytes(fresh, item.key, temp / "got_fresh" / item.key);
    CHECK(bytes == member_bytes(original, item.key, temp / "got_original" / item.key));
    CHECK(bytes.size() == stats.size() + 1);
    // On disk: <pid>/ holds the statistics (no _debug copy), the .run sits beside it.
    check_torchair_export(out / item.origin, *source_of[item.key]);
  }

  // The text report names every directory it wrote.
  const fs::path out_text = temp / "out_text";
  auto text = cli.run({"export", out_text.string(), "--layout", "torchair"});
  CHECK(text.exit_code == 0);
  for (const auto& name : entry_names(out_text / k_torchair_outputs)) {
    CHECK(contains(text.out, "wrote    " + (out_text / k_torchair_outputs / name).string() + "\n"));
  }
  CHECK(contains(text.out, "exported 2 entries into 2 directories (8 files written, 0 linked)"));

  // --help says what it writes; a DIR is needed.
  auto help = cli.run({"export", "--help"});
  CHECK(help.exit_code == 0);
  CHECK(contains(help.out, "--layout TEXT:{mindspore,cann,torchair}=mindspore"));
  CHECK(contains(help.out, "<timestamp>_<pid>_outputs/ with <pid>/*.json"));
  auto no_dir = cli.run({"export", "--layout", "torchair"});
  CHECK(no_dir.exit_code == 2);
  CHECK(contains(no_dir.err, "export --layout torchair needs a DIR"));
}

TEST_CASE("layouts::export_entries gives every torchair package a directory name of its own and never writes into one that exists") {
  TempDir temp;
  Store store = open_store_builtin_fields(temp / "cache");
  const StoredTorchair stored = store_torchair_package(store, temp / "torchair");
  const TorchairOutputs& source = stored.source;

  // The first name tried: the entry's creation time and this process's pid.
  const std::string first_name = utc_timestamp(stored.entry.created_ms) + "_" + std::to_string(::getpid()) + "_outputs";
  const auto probe = export_torchair_ok(store, temp / "probe");
  REQUIRE(probe.directories.size() == 1);
  CHECK(probe.directories[0] == (temp / "probe" / k_torchair_outputs / first_name).string());
  check_torchair_export(temp / "probe" / k_torchair_outputs / first_name, source);

  SUBCASE("two exports into the same DIR, from this process and from two CLI processes") {
    const fs::path out = temp / "out";
    const fs::path outputs = out / k_torchair_outputs;
    const auto one = export_torchair_ok(store, out);
    const auto after_one = snapshot_children(outputs);
    const auto two = export_torchair_ok(store, out);  // the same first name: it steps past it
    REQUIRE(one.directories.size() == 1);
    REQUIRE(two.directories.size() == 1);
    CHECK(one.directories[0] != two.directories[0]);
    CHECK(changed_child(after_one, outputs) == "");
    CliRunner cli(temp);
    const auto after_two = snapshot_children(outputs);
    cli.run_json({"export", out.string(), "--layout", "torchair"});
    cli.run_json({"export", out.string(), "--layout", "torchair"});
    CHECK(changed_child(after_two, outputs) == "");
    const auto names = entry_names(outputs);
    CHECK(names.size() == 4);
    for (const auto& name : names) {
      check_torchair_export(out / k_torchair_outputs / name, source);
    }
    CHECK(temp_files_below(out).empty());
    // All four import as the same kernel.
    Store fresh = open_store_builtin_fields(temp / "fresh_cache");
    const ImportReport again = import_ok(fresh, out);
    CHECK(again.imported.size() == 1);
    CHECK(again.duplicates.size() == 3);
    REQUIRE(!again.imported.empty());
    CHECK(again.imported[0].key == stored.key);
  }

  SUBCASE("taken names: a directory with files, a file and a symlink are left exactly as they are") {
    const fs::path out = temp / "out";
    const fs::path outputs = out / k_torchair_outputs;
    const long pid = ::getpid();
    auto name_with = [&](long number) {
      return utc_timestamp(stored.entry.created_ms) + "_" + std::to_string(number) + "_outputs";
    };
    // <pid>: someone's directory, holding a statistics file of the same name with other bytes.
    const std::string member = source.stats[0].filename().string();
    write_text(outputs / name_with(pid) / std::to_string(pid) / member, "{\"someone\":\"else\"}");
    // <pid + 1>: a file.
    write_text(outputs / name_with(pid + 1), "a file");
    // <pid + 2>: a symlink to a directory outside, and <pid + 3> one to a name outside that does not exist.
    const fs::path outside = temp / "outside";
    write_text(outside / "keep.txt", "precious");
    fs::create_directory_symlink(outside, outputs / name_with(pid + 2));
    fs::create_symlink(temp / "outside_new", outputs / name_with(pid + 3));
    age_tree(out);
    age_tree(outside);
    const auto before = snapshot_children(outputs);
    REQUIRE(before.size() == 4);
    const Snapshot outside_before = snapshot_tree(outside);

    const auto report = export_torchair_ok(store, out);
    REQUIRE(report.directories.size() == 1);
    CHECK(report.directories[0] == (outputs / name_with(pid + 4)).string());
    check_torchair_export(outputs / name_with(pid + 4), source);
    CHECK(changed_child(before, outputs) == "");
    CHECK(snapshot_difference(outside_before, snapshot_tree(outside)) == "");
    CHECK(!fs::exists(temp / "outside_new"));
    CHECK(entry_names(outputs).size() == 5);
    CHECK(temp_files_below(out).empty());
  }

  SUBCASE("DIR/aclnn_static_shape_kernel_outputs -> outside is refused") {
    const fs::path outside = temp / "outside";
    write_text(outside / "keep.txt", "precious");
    const Snapshot outside_before = snapshot_tree(outside);
    const fs::path out = temp / "out";
    fs::create_directories(out);
    fs::create_directory_symlink(outside, out / k_torchair_outputs);
    ExportOptions options;
    options.layout = Layout::torchair;
    options.dir = out;
    auto report = opcache::layouts::export_entries(store, options);
    REQUIRE(!report.ok());
    CHECK(report.error().code() == opcache::ErrorCode::usage);
    CHECK(contains(report.error().message(), (out / k_torchair_outputs).string() + " is a symlink"));
    CliRunner cli(temp);
    auto result = cli.run({"export", out.string(), "--layout", "torchair"});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, (out / k_torchair_outputs).string() + " is a symlink; refusing to follow it"));
    CHECK(snapshot_difference(outside_before, snapshot_tree(outside)) == "");
  }
}

TEST_CASE("layouts::export_entries skips a torchair entry that fails verification and leaves nothing of it") {
  TempDir temp;
  Store store = open_store_builtin_fields(temp / "cache");
  const StoredTorchair stored = store_torchair_package(store, temp / "torchair");
  // The bundle's last bytes flipped: the members before them may already be written when it is found out.
  const std::string& digest = stored.entry.digest;
  const fs::path object = temp / "cache" / "objects" / digest.substr(0, 2) / digest;
  std::string bytes = read_text(object);
  REQUIRE(bytes.size() > 16);
  for (std::size_t i = bytes.size() - 8; i < bytes.size(); ++i) {
    bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  }
  rewrite(object, bytes);

  const fs::path out = temp / "out";
  const auto report = export_torchair_ok(store, out);
  CHECK(report.entries == 0);
  CHECK(report.directories.empty());
  REQUIRE(report.skipped.size() == 1);
  CHECK(report.skipped[0].path == stored.key);
  CHECK(contains(report.skipped[0].reason, "disappeared or failed verification while exporting"));
  CHECK(entry_names(out) == std::set<std::string>{k_torchair_outputs});
  CHECK(entry_names(out / k_torchair_outputs).empty());
}

// ===========================================================================
// MindSpore export

namespace {

// A store holding one 2-rank MindSpore job (5 kernels), imported through the library.
struct ImportedJob {
  MindSporeTree tree;
  std::vector<std::string> keys;  // per op
};

ImportedJob import_sample_job(Store& store, const fs::path& root, int ranks = 2) {
  ImportedJob job;
  job.tree = opcache::test::write_mindspore_tree(root, ranks, opcache::test::sample_mindspore_ops());
  const ImportReport report = import_ok(store, root);
  REQUIRE(report.imported.size() == 5);
  for (std::size_t op = 0; op < 5; ++op) {
    const ImportedItem* item = find_item(report.imported, origin_of(job.tree.at(0, op)));
    REQUIRE(item != nullptr);
    job.keys.push_back(item->key);
  }
  return job;
}

std::set<std::string> rank0_names(const MindSporeTree& tree) {
  std::set<std::string> names;
  for (std::size_t op = 0; op < tree.kernels.size() / static_cast<std::size_t>(tree.ranks); ++op) {
    for (const auto& file : tree.at(0, op).files()) {
      names.insert(file.filename().string());
    }
  }
  return names;
}

fs::path rank_meta(const fs::path& dir, int rank) {
  return dir / ("rank_" + std::to_string(rank)) / "kernel_meta";
}

}  // namespace

TEST_CASE("layouts::export_entries writes MindSpore ranks from one decompression and hard links") {
  TempDir temp;
  Store store = open_store_builtin_fields(temp / "cache");
  const ImportedJob job = import_sample_job(store, temp / "job");
  const auto names = rank0_names(job.tree);
  REQUIRE(names.size() == 15);

  auto check_ranks = [&](const fs::path& out, int ranks) {
    CHECK(entry_names(out).size() == static_cast<std::size_t>(ranks));
    for (const auto& name : names) {
      CAPTURE(name);
      const struct stat first = stat_of(rank_meta(out, 0) / name);
      CHECK(S_ISREG(first.st_mode));
      CHECK(first.st_nlink >= static_cast<nlink_t>(ranks));
      for (int rank = 0; rank < ranks; ++rank) {
        const struct stat info = stat_of(rank_meta(out, rank) / name);
        CHECK(info.st_ino == first.st_ino);
        CHECK(info.st_dev == first.st_dev);
      }
    }
    for (int rank = 0; rank < ranks; ++rank) {
      CHECK(entry_names(rank_meta(out, rank)) == names);
      for (std::size_t op = 0; op < 5; ++op) {
        for (const auto& file : job.tree.at(0, op).files()) {
          CHECK(read_text(rank_meta(out, rank) / file.filename()) == read_text(file));
        }
      }
    }
    CHECK(temp_files_below(out).empty());
  };

  SUBCASE("CLI --ranks 4 into a fresh directory") {
    CliRunner cli(temp);
    const fs::path out = temp / "fresh";
    json report = cli.run_json({"export", out.string(), "--layout", "mindspore", "--ranks", "4"});
    CHECK(report["layout"] == "mindspore");
    CHECK(report["entries"] == 5);
    CHECK(report["files_written"] == 15);  // decompressed once ...
    CHECK(report["files_linked"] == 45);   // ... and linked into ranks 1-3
    CHECK(report["directories"].size() == 4);
    CHECK(report["skipped"].empty());
    check_ranks(out, 4);
    auto text = cli.run({"export", (temp / "fresh_text").string(), "--ranks", "4"});
    CHECK(text.exit_code == 0);
    CHECK(contains(text.out, "exported 5 entries into 4 directories (15 files written, 45 linked)"));
  }
  SUBCASE("library, ranks 0-7") {
    ExportOptions options;
    options.layout = Layout::mindspore;
    options.dir = temp / "lib";
    for (int rank = 0; rank < 8; ++rank) {
      options.ranks.push_back(rank);
    }
    auto report = opcache::layouts::export_entries(store, options);
    REQUIRE_MESSAGE(report.ok(), (report.ok() ? "" : report.error().message()));
    CHECK(report->entries == 5);
    CHECK(report->files_written == 15);
    CHECK(report->files_linked == 15 * 7);
    CHECK(report->skipped.empty());
    check_ranks(temp / "lib", 8);
  }
}

TEST_CASE("layouts::export_entries replaces existing files atomically and leaves no temp files") {
  TempDir temp;
  Store store = open_store_builtin_fields(temp / "cache");
  const ImportedJob job = import_sample_job(store, temp / "job");
  CliRunner cli(temp);
  const fs::path out = temp / "out";
  cli.run_json({"export", out.string(), "--ranks", "4"});

  const MindSporeKernel& square = job.tree.at(0, 0);
  const fs::path exported_json = rank_meta(out, 0) / (square.stem + ".json");
  const fs::path stale_object = rank_meta(out, 2) / (square.stem + ".o");
  const fs::path stale_info = rank_meta(out, 0) / (square.stem + ".info");
  // A stale object on rank 2 (different bytes) and a stale .info on rank 0.
  rewrite(stale_object, "stale object bytes");
  rewrite(stale_info, "{\"job_content\":{}}");
  // Readers holding the old files open.
  const int json_fd = ::open(exported_json.c_str(), O_RDONLY | O_CLOEXEC);
  const int object_fd = ::open(stale_object.c_str(), O_RDONLY | O_CLOEXEC);
  const int info_fd = ::open(stale_info.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(json_fd >= 0);
  REQUIRE(object_fd >= 0);
  REQUIRE(info_fd >= 0);
  const ino_t json_inode = stat_of(exported_json).st_ino;

  json report = cli.run_json({"export", out.string(), "--ranks", "4"});
  CHECK(report["entries"] == 5);

  auto read_fd = [](int fd) {
    std::string bytes;
    char buffer[4096];
    ssize_t n;
    while ((n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(bytes.size()))) > 0) {
      bytes.append(buffer, static_cast<std::size_t>(n));
    }
    return bytes;
  };
  // The old files, as their readers see them, are intact ...
  CHECK(read_fd(object_fd) == "stale object bytes");
  CHECK(read_fd(info_fd) == "{\"job_content\":{}}");
  CHECK(read_fd(json_fd) == read_text(square.metadata));
  // ... and the paths now hold new files with the stored bytes.
  CHECK(read_text(stale_object) == read_text(square.object));
  CHECK(read_text(stale_info) == read_text(square.info));
  CHECK(read_text(exported_json) == read_text(square.metadata));
  CHECK(stat_of(exported_json).st_ino != json_inode);  // replaced, not rewritten in place
  struct stat open_info {};
  REQUIRE(::fstat(object_fd, &open_info) == 0);
  CHECK(open_info.st_nlink == 0);  // the stale file was unlinked by the rename, never truncated
  ::close(json_fd);
  ::close(object_fd);
  ::close(info_fd);
  // All ranks share the new inode again.
  for (int rank = 1; rank < 4; ++rank) {
    CHECK(stat_of(rank_meta(out, rank) / (square.stem + ".o")).st_ino == stat_of(rank_meta(out, 0) / (square.stem + ".o")).st_ino);
  }
  CHECK(temp_files_below(out).empty());
  CHECK(entry_names(rank_meta(out, 2)) == rank0_names(job.tree));
}

TEST_CASE("layouts::mindspore_destination (export without DIR) honours MS_COMPILER_CACHE_PATH and RANK_ID") {
  TempDir temp;
  {
    Store store = open_store_builtin_fields(temp / "cache");
    import_sample_job(store, temp / "job", 1);
  }
  CliRunner cli(temp);
  const fs::path ms_cache = temp / "ms_cache";

  json report = cli.run_json({"export", "--layout", "mindspore"}, 0,
                             hermetic({{"MS_COMPILER_CACHE_PATH", ms_cache.string()}, {"RANK_ID", "3"}}));
  CHECK(report["entries"] == 5);
  CHECK(report["files_linked"] == 0);
  CHECK(entry_names(ms_cache) == std::set<std::string>{"rank_3"});
  CHECK(entry_names(ms_cache / "rank_3") == std::set<std::string>{"kernel_meta"});
  CHECK(entry_names(rank_meta(ms_cache, 3)).size() == 15);

  // --ranks overrides RANK_ID; MS_COMPILER_CACHE_PATH still names the root.
  const fs::path ms_all = temp / "ms_all";
  cli.run_json({"export", "--ranks", "2"}, 0,
               hermetic({{"MS_COMPILER_CACHE_PATH", ms_all.string()}, {"RANK_ID", "3"}}));
  CHECK(entry_names(ms_all) == std::set<std::string>{"rank_0", "rank_1"});

  // A DIR given wins over MS_COMPILER_CACHE_PATH.
  const fs::path given = temp / "given";
  cli.run_json({"export", given.string()}, 0, hermetic({{"MS_COMPILER_CACHE_PATH", ms_all.string()}, {"RANK_ID", "1"}}));
  CHECK(entry_names(given) == std::set<std::string>{"rank_1"});

  // Neither: ./rank_0/kernel_meta in the working directory.
  fs::create_directories(temp / "cwd");
  ProcessOptions in_cwd = hermetic();
  in_cwd.cwd = (temp / "cwd").string();
  cli.run_json({"export"}, 0, in_cwd);
  CHECK(entry_names(temp / "cwd") == std::set<std::string>{"rank_0"});
  CHECK(entry_names(rank_meta(temp / "cwd", 0)).size() == 15);

  // A malformed RANK_ID is a usage error and writes nothing.
  for (const std::string bad : {"abc", "-1", "3x", "1.5"}) {
    CAPTURE(bad);
    const fs::path nowhere = temp / "bad_rank";
    auto result = cli.run({"export", "--layout", "mindspore"},
                          hermetic({{"MS_COMPILER_CACHE_PATH", nowhere.string()}, {"RANK_ID", bad}}));
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "RANK_ID=\"" + bad + "\" is not a rank number"));
    CHECK(!fs::exists(nowhere));
  }

  // The same rules through the library, with an injected environment.
  auto env = [](std::map<std::string, std::string> values) -> opcache::base::EnvLookup {
    return [values](const char* name) -> std::optional<std::string> {
      auto found = values.find(name);
      return found == values.end() ? std::nullopt : std::optional<std::string>(found->second);
    };
  };
  auto one = opcache::layouts::mindspore_destination(std::nullopt, 0, env({{"MS_COMPILER_CACHE_PATH", "/x"}, {"RANK_ID", "7"}}));
  REQUIRE(one.ok());
  CHECK(one->dir == fs::path("/x"));
  CHECK(one->ranks == std::vector<int>{7});
  auto defaults = opcache::layouts::mindspore_destination(std::nullopt, 0, env({}));
  REQUIRE(defaults.ok());
  CHECK(defaults->dir == fs::path("."));
  CHECK(defaults->ranks == std::vector<int>{0});
  auto empty_rank = opcache::layouts::mindspore_destination(fs::path("/d"), 0, env({{"RANK_ID", ""}}));
  REQUIRE(empty_rank.ok());
  CHECK(empty_rank->dir == fs::path("/d"));
  CHECK(empty_rank->ranks == std::vector<int>{0});
  auto several = opcache::layouts::mindspore_destination(fs::path("/d"), 3, env({{"RANK_ID", "abc"}}));
  REQUIRE(several.ok());
  CHECK(several->ranks == std::vector<int>{0, 1, 2});
  auto bad = opcache::layouts::mindspore_destination(std::nullopt, 0, env({{"RANK_ID", "abc"}}));
  REQUIRE(!bad.ok());
  CHECK(bad.error().code() == opcache::ErrorCode::usage);
}

TEST_CASE("layouts::export_entries filters by scenario and op type and skips entries that are not triples") {
  TempDir temp;
  Store store = open_store_builtin_fields(temp / "cache");
  const ImportedJob train = import_sample_job(store, temp / "train", 1);
  // An inference job with two other kernels.
  MindSporeOp exp_op;
  exp_op.func_name = "exp";
  exp_op.type = "Exp";
  exp_op.shape = {256};
  MindSporeOp sqrt_op;
  sqrt_op.func_name = "sqrt";
  sqrt_op.type = "Sqrt";
  sqrt_op.shape = {256};
  const MindSporeTree infer = opcache::test::write_mindspore_tree(temp / "infer", 1, {exp_op, sqrt_op});
  REQUIRE(import_ok(store, infer.root, std::nullopt, false, k_infer_scenario).imported.size() == 2);
  // A CANN pair in the training scenario.
  const CannCache cann = opcache::test::write_cann_cache(temp / "cann", "Ascend910B1", {opcache::test::sample_cann_ops()[0]});
  const ImportReport cann_report = import_ok(store, cann.root);
  REQUIRE(cann_report.imported.size() == 1);
  const std::string cann_key = cann_report.imported[0].key;
  // A torchair entry too.
  opcache::test::write_torchair_outputs(temp / "torchair", "20250301093000", 4242, "20250301093512",
                                        opcache::test::sample_torchair_stats());
  const ImportReport torchair_report = import_ok(store, temp / "torchair");
  REQUIRE(torchair_report.imported.size() == 1);
  const std::string torchair_key = torchair_report.imported[0].key;
  REQUIRE(list_all(store).size() == 5 + 2 + 1 + 1);

  CliRunner cli(temp);
  SUBCASE("--scenario") {
    const fs::path out = temp / "out_infer";
    json report = cli.run_json({"export", out.string(), "--ranks", "2", "--scenario", k_infer_scenario});
    CHECK(report["entries"] == 2);
    CHECK(report["skipped"].empty());
    for (int rank = 0; rank < 2; ++rank) {
      CHECK(entry_names(rank_meta(out, rank)) ==
            names_of({infer.at(0, 0).object, infer.at(0, 0).metadata, infer.at(0, 0).info, infer.at(0, 1).object,
                      infer.at(0, 1).metadata, infer.at(0, 1).info}));
    }
  }
  SUBCASE("--op-type") {
    const fs::path out = temp / "out_square";
    json report = cli.run_json({"export", out.string(), "--ranks", "2", "--op-type", "Square"});
    CHECK(report["entries"] == 1);
    CHECK(entry_names(rank_meta(out, 1)) == names_of(train.tree.at(0, 0).files()));
    CHECK(read_text(rank_meta(out, 1) / train.tree.at(0, 0).object.filename()) == read_text(train.tree.at(0, 0).object));
  }
  SUBCASE("--scenario and --op-type that match nothing") {
    const fs::path out = temp / "out_none";
    json report = cli.run_json({"export", out.string(), "--scenario", k_infer_scenario, "--op-type", "Square"});
    CHECK(report["entries"] == 0);
    CHECK(entry_names(rank_meta(out, 0)).empty());
  }
  SUBCASE("everything: the CANN pair and the torchair entry are skipped with the reason") {
    const fs::path out = temp / "out_all";
    json report = cli.run_json({"export", out.string(), "--ranks", "2"});
    CHECK(report["entries"] == 7);
    REQUIRE(report["skipped"].size() == 2);
    const auto cann_reasons = json_reasons_for(report["skipped"], cann_key);
    REQUIRE(cann_reasons.size() == 1);
    CHECK(contains(cann_reasons[0], "not a MindSpore .o/.json/.info triple"));
    const auto torchair_reasons = json_reasons_for(report["skipped"], torchair_key);
    REQUIRE(torchair_reasons.size() == 1);
    CHECK(contains(torchair_reasons[0], "not a MindSpore .o/.json/.info triple"));
    for (int rank = 0; rank < 2; ++rank) {
      const auto written = entry_names(rank_meta(out, rank));
      CHECK(written.size() == 7 * 3);
      for (const auto& file : cann.kernels[0].files()) {
        CHECK(written.count(file.filename().string()) == 0);
      }
      for (const auto& name : written) {
        CHECK_MESSAGE(name.rfind("te_", 0) != 0, name);
        CHECK_MESSAGE(fs::path(name).extension() != ".run", name);
      }
    }
    auto text = cli.run({"export", out.string(), "--ranks", "2"});
    CHECK(contains(text.out, "skipped  " + cann_key + "  not a MindSpore .o/.json/.info triple"));
  }
  SUBCASE("--layout torchair exports only the torchair entry and says why not the others") {
    const fs::path out = temp / "out_torchair";
    json report = cli.run_json({"export", out.string(), "--layout", "torchair"});
    CHECK(report["entries"] == 1);
    CHECK(report["files_written"] == 4);
    REQUIRE(report["directories"].size() == 1);
    REQUIRE(report["skipped"].size() == 8);
    for (const auto& skipped_key : {train.keys[0], train.keys[4], cann_key}) {
      const auto reasons = json_reasons_for(report["skipped"], skipped_key);
      REQUIRE(reasons.size() == 1);
      CHECK(contains(reasons[0], "not a torchair package of *.json statistics and one .run"));
    }
    CHECK(json_reasons_for(report["skipped"], torchair_key).empty());
    CHECK(entry_names(out / "aclnn_static_shape_kernel_outputs").size() == 1);
    auto text = cli.run({"export", temp.path().string() + "/out_torchair_text", "--layout", "torchair"});
    CHECK(contains(text.out, "skipped  " + cann_key + "  not a torchair package of *.json statistics and one .run (" +
                                 cann.kernels[0].op_type + ")"));
  }
  SUBCASE("--layout cann exports only the CANN pair") {
    const fs::path out = temp / "out_cann";
    json report = cli.run_json({"export", out.string(), "--layout", "cann"});
    CHECK(report["entries"] == 1);
    CHECK(report["skipped"].size() == 8);
    const auto reasons = json_reasons_for(report["skipped"], train.keys[0]);
    REQUIRE(reasons.size() == 1);
    CHECK(contains(reasons[0], "not a CANN te_*.o/.json pair"));
    CHECK(entry_names(out / "kernel_cache" / "Ascend910B1") == names_of(cann.kernels[0].files()));
  }
}

TEST_CASE("layouts::export_entries refuses directory symlinks planted in the target and writes nothing outside") {
  TempDir temp;
  Store store = open_store_builtin_fields(temp / "cache");
  import_sample_job(store, temp / "job", 1);
  const CannCache cann = opcache::test::write_cann_cache(temp / "cann", "Ascend910B1", {opcache::test::sample_cann_ops()[1]});
  REQUIRE(import_ok(store, cann.root).imported.size() == 1);
  // The outside: what a planted symlink points at. It must stay exactly as it is.
  const fs::path outside = temp / "outside";
  write_text(outside / "keep.txt", "precious");
  fs::create_directories(outside / "kernel_meta");
  write_text(outside / "kernel_meta" / "other.o", "someone else's object");
  age_tree(outside);
  const Snapshot outside_before = snapshot_tree(outside);
  CliRunner cli(temp);

  SUBCASE("DIR/rank_1 -> outside") {
    const fs::path out = temp / "out";
    fs::create_directories(out);
    fs::create_symlink(outside, out / "rank_1");
    auto result = cli.run({"export", out.string(), "--ranks", "4"});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, (out / "rank_1").string() + " is a symlink; refusing to follow it"));
    CHECK(fs::is_symlink(out / "rank_1"));
    // The library says the same, with a usage error.
    ExportOptions options;
    options.dir = out;
    options.ranks = {0, 1, 2, 3};
    auto report = opcache::layouts::export_entries(store, options);
    REQUIRE(!report.ok());
    CHECK(report.error().code() == opcache::ErrorCode::usage);
    CHECK(contains(report.error().message(), "rank_1 is a symlink"));
  }
  SUBCASE("DIR/rank_0/kernel_meta -> outside") {
    const fs::path out = temp / "out";
    fs::create_directories(out / "rank_0");
    fs::create_symlink(outside, out / "rank_0" / "kernel_meta");
    json failure = cli.run_json({"export", out.string(), "--ranks", "2"}, 2);
    CHECK(failure["error"] == "usage");
    CHECK(contains(failure["message"].get<std::string>(),
                   (out / "rank_0" / "kernel_meta").string() + " is a symlink; refusing to follow it"));
    CHECK(fs::is_symlink(out / "rank_0" / "kernel_meta"));
    CHECK(!fs::exists(out / "rank_1"));  // stopped before writing anything
  }
  SUBCASE("DIR/rank_0/kernel_meta -> outside, without DIR: through MS_COMPILER_CACHE_PATH") {
    const fs::path out = temp / "ms_cache";
    fs::create_directories(out / "rank_0");
    fs::create_symlink(outside / "kernel_meta", out / "rank_0" / "kernel_meta");
    auto result = cli.run({"export"}, hermetic({{"MS_COMPILER_CACHE_PATH", out.string()}, {"RANK_ID", "0"}}));
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, "kernel_meta is a symlink"));
  }
  SUBCASE("CANN: DIR/kernel_cache -> outside and DIR/kernel_cache/<soc> -> outside") {
    const fs::path out = temp / "out_cann";
    fs::create_directories(out);
    fs::create_symlink(outside, out / "kernel_cache");
    auto result = cli.run({"export", out.string(), "--layout", "cann"});
    CHECK(result.exit_code == 2);
    CHECK(contains(result.err, (out / "kernel_cache").string() + " is a symlink"));
    const fs::path out2 = temp / "out_cann2";
    fs::create_directories(out2 / "kernel_cache");
    fs::create_symlink(outside, out2 / "kernel_cache" / "Ascend910B1");
    auto result2 = cli.run({"export", out2.string(), "--layout", "cann"});
    CHECK(result2.exit_code == 2);
    CHECK(contains(result2.err, (out2 / "kernel_cache" / "Ascend910B1").string() + " is a symlink"));
  }
  SUBCASE("DIR itself may be reached through a symlink (the caller's choice)") {
    const fs::path real = temp / "real_out";
    fs::create_directories(real);
    fs::create_symlink(real, temp / "link_out");
    json report = cli.run_json({"export", (temp / "link_out").string(), "--ranks", "1"});
    CHECK(report["entries"] == 5);
    CHECK(entry_names(rank_meta(real, 0)).size() == 15);
  }
  CHECK(snapshot_difference(outside_before, snapshot_tree(outside)) == "");
}

TEST_CASE("layouts::export_entries replaces a symlink planted at a member name and leaves its target alone") {
  TempDir temp;
  Store store = open_store_builtin_fields(temp / "cache");
  const ImportedJob job = import_sample_job(store, temp / "job", 1);
  const MindSporeKernel& square = job.tree.at(0, 0);
  REQUIRE(square.stem == "square_12484080525657478220_0");

  const fs::path outside = temp / "outside";
  write_text(outside / "file.o", "the outside file");
  write_text(outside / "file.json", "{\"outside\":true}");
  age_tree(outside);
  const Snapshot outside_before = snapshot_tree(outside);

  const fs::path out = temp / "out";
  fs::create_directories(rank_meta(out, 0));
  fs::create_directories(rank_meta(out, 1));
  // On rank 0 (written by decompression) and on rank 1 (written by linking).
  fs::create_symlink(outside / "file.o", rank_meta(out, 0) / (square.stem + ".o"));
  fs::create_symlink(outside / "file.json", rank_meta(out, 1) / (square.stem + ".json"));
  // A dangling one too: following it would create a file outside.
  fs::create_symlink(outside / "created_through_link.info", rank_meta(out, 0) / (square.stem + ".info"));

  CliRunner cli(temp);
  json report = cli.run_json({"export", out.string(), "--ranks", "2"});
  CHECK(report["entries"] == 5);
  for (int rank = 0; rank < 2; ++rank) {
    for (const auto& file : square.files()) {
      const fs::path path = rank_meta(out, rank) / file.filename();
      CAPTURE(path);
      CHECK(!fs::is_symlink(path));
      CHECK(S_ISREG(stat_of(path).st_mode));
      CHECK(read_text(path) == read_text(file));
    }
  }
  CHECK(snapshot_difference(outside_before, snapshot_tree(outside)) == "");
  CHECK(!fs::exists(outside / "created_through_link.info"));
  CHECK(temp_files_below(out).empty());

  // The library path too, over a fresh planted link.
  fs::remove(rank_meta(out, 1) / (square.stem + ".o"));
  fs::create_symlink(outside / "file.o", rank_meta(out, 1) / (square.stem + ".o"));
  ExportOptions options;
  options.dir = out;
  options.ranks = {0, 1};
  auto again = opcache::layouts::export_entries(store, options);
  REQUIRE_MESSAGE(again.ok(), (again.ok() ? "" : again.error().message()));
  CHECK(!fs::is_symlink(rank_meta(out, 1) / (square.stem + ".o")));
  CHECK(read_text(rank_meta(out, 1) / (square.stem + ".o")) == read_text(square.object));
  CHECK(snapshot_difference(outside_before, snapshot_tree(outside)) == "");
}
