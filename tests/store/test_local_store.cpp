// The local content-addressed store (store/local_store.hpp): round trips of
// real compiled kernels, replace policies, integrity checks on every read,
// verify/repair, crash leftovers, and many processes sharing one root.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/byte_stream.hpp"
#include "base/sha256.hpp"
#include "opcache/scenario.hpp"
#include "store/bundle_writer.hpp"
#include "store/key.hpp"
#include "store/local_store.hpp"
#include "store/scenario.hpp"
#include "tests/support/bundle_inputs.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::ErrorCode;
using opcache::ReplacePolicy;
using opcache::store::BundleInput;
using opcache::store::LocalStore;
using opcache::store::MemberSource;
using opcache::store::StoreOptions;
using opcache::test::input_for;
using opcache::test::KernelTriple;
using opcache::test::make_kernel;
using opcache::test::read_text;
using opcache::test::scenario_json;
using opcache::test::StoreFixture;
using opcache::test::TempDir;
using opcache::test::write_text;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_fixed_created = "2026-01-02T03:04:05Z";

std::string key_of(const BundleInput& input) {
  auto key = opcache::store::derive_key(input.descriptor, input.scenario);
  REQUIRE(key.ok());
  return *key;
}

// Every regular file and symbolic link under `dir`, recursively, sorted.
std::vector<fs::path> files_and_links_under(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file() || it->is_symlink()) {
      files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Every entry (file, link or directory) directly in `dir`.
std::vector<std::string> sorted_names_in(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::int64_t local_store_counter(LocalStore& store, const std::string& name) {
  auto stats = store.stats();
  REQUIRE(stats.ok());
  auto it = stats->counters.find(name);
  return it == stats->counters.end() ? 0 : it->second;
}

bool has_counter(LocalStore& store, const std::string& name) {
  auto stats = store.stats();
  REQUIRE(stats.ok());
  return stats->counters.count(name) != 0;
}

// A store opened as --mode disable opens it (NewIndex::on_first_use): no index until something uses it.
std::unique_ptr<LocalStore> open_without_index(const fs::path& root) {
  opcache::store::StoreOptions options;
  options.root = root;
  options.new_index = opcache::store::NewIndex::on_first_use;
  auto opened = LocalStore::open(options);
  REQUIRE_MESSAGE(opened.ok(), (opened.ok() ? "" : opened.error().message()));
  return std::move(*opened);
}

opcache::PutResult put_ok(LocalStore& store, const BundleInput& input,
                          ReplacePolicy policy = ReplacePolicy::keep_existing) {
  auto put = store.put(input, policy);
  REQUIRE_MESSAGE(put.ok(), (put.ok() ? "" : put.error().message()));
  return *put;
}

std::optional<opcache::GetResult> get_ok(LocalStore& store, const std::string& key, const fs::path& out) {
  auto got = store.get(key, out);
  REQUIRE_MESSAGE(got.ok(), (got.ok() ? "" : got.error().message()));
  return *got;
}

// The hit wrote exactly the kernel's three files into `out`, byte for byte.
void check_kernel_files(const opcache::GetResult& hit, const KernelTriple& kernel, const fs::path& out) {
  auto expected = kernel.files();
  REQUIRE(hit.files.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(hit.files[i] == out / expected[i].filename());
    CHECK(fs::is_regular_file(fs::symlink_status(hit.files[i])));
    CHECK(read_text(hit.files[i]) == read_text(expected[i]));
  }
}

std::int64_t total_size(const std::vector<fs::path>& files) {
  std::int64_t total = 0;
  for (const auto& file : files) {
    total += static_cast<std::int64_t>(fs::file_size(file));
  }
  return total;
}

void flip_byte(const fs::path& path, std::size_t position) {
  std::string bytes = read_text(path);
  REQUIRE(position < bytes.size());
  bytes[position] = static_cast<char>(bytes[position] ^ 0x5a);
  write_text(path, bytes);
}

// A pid that belonged to a process which has exited (and been reaped).
long dead_pid() {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return pid;
}

// The bundle bytes write_bundle produces for `input`, and its digest.
std::pair<std::string, std::string> encode_with_digest(const BundleInput& input) {
  opcache::base::StringSink sink;
  auto written = opcache::store::write_bundle(input, sink);
  REQUIRE_MESSAGE(written.ok(), (written.ok() ? "" : written.error().message()));
  return {sink.data(), written->digest};
}

struct Problem {
  std::string kind;
  std::string subject;
  bool repaired;
  bool operator<(const Problem& other) const {
    return std::tie(kind, subject, repaired) < std::tie(other.kind, other.subject, other.repaired);
  }
  bool operator==(const Problem& other) const = default;
};

std::set<Problem> problems_of(const opcache::VerifyReport& report) {
  std::set<Problem> problems;
  for (const auto& problem : report.problems) {
    problems.insert({problem.kind, problem.subject, problem.repaired});
  }
  return problems;
}

opcache::VerifyReport verify_ok(LocalStore& store, bool repair) {
  auto report = store.verify(repair);
  REQUIRE(report.ok());
  return *report;
}

}  // namespace

TEST_CASE("store::LocalStore put then get round-trips real kernels byte-exact and counts exactly") {
  TempDir temp;
  auto square = make_kernel(temp / "src", "square", 16);
  auto relu = make_kernel(temp / "src", "relu", 32);
  StoreFixture store(temp / "cache");

  auto square_input = input_for(square, opcache::test::k_test_scenario, 1500);
  auto relu_input = input_for(relu, opcache::test::k_test_scenario, 700);
  const std::int64_t created_at = store.now_ms;
  auto put_square = put_ok(*store, square_input);
  CHECK(put_square.stored);
  CHECK(put_square.key == key_of(square_input));
  CHECK(put_square.raw_bytes == total_size(square.files()));
  // Content addressing: the object is named by the SHA-256 of its bytes.
  auto object = store->layout().object_path(put_square.digest);
  REQUIRE(fs::is_regular_file(object));
  CHECK(opcache::base::sha256_hex(read_text(object)) == put_square.digest);
  CHECK(static_cast<std::int64_t>(fs::file_size(object)) == put_square.bundle_bytes);
  CHECK(object.parent_path().filename() == put_square.digest.substr(0, 2));

  auto put_relu = put_ok(*store, relu_input);
  CHECK(put_relu.stored);
  CHECK(put_relu.key != put_square.key);

  // Putting the same kernel again keeps the entry.
  auto again = put_ok(*store, square_input);
  CHECK_FALSE(again.stored);
  CHECK(again.key == put_square.key);
  CHECK(again.digest == put_square.digest);
  CHECK(again.bundle_bytes == put_square.bundle_bytes);

  auto stats = store->stats();
  REQUIRE(stats.ok());
  CHECK(stats->totals.entries == 2);
  CHECK(stats->totals.bundle_bytes == put_square.bundle_bytes + put_relu.bundle_bytes);
  CHECK(stats->totals.raw_bytes == put_square.raw_bytes + put_relu.raw_bytes);
  CHECK(stats->totals.pinned == 0);
  CHECK(stats->counters.at("stores") == 2);
  CHECK(stats->counters.at("already_present") == 1);
  CHECK(stats->counters.at("bytes_stored") == put_square.bundle_bytes + put_relu.bundle_bytes);
  CHECK(stats->counters.count("hits") == 0);
  CHECK(stats->counters.count("misses") == 0);

  // Hits.
  store.now_ms += 60'000;
  auto out = temp / "out";
  auto hit = get_ok(*store, put_square.key, out);
  REQUIRE(hit.has_value());
  check_kernel_files(*hit, square, out);
  CHECK(hit->entry.key == put_square.key);
  CHECK(hit->entry.digest == put_square.digest);
  CHECK(hit->entry.op_type == "square");
  CHECK(hit->entry.device_mode == "single");
  CHECK(hit->entry.phase == "train");
  CHECK(hit->entry.toolchain == "8.0.RC2");
  CHECK(hit->entry.soc == "Ascend910B1");
  CHECK(hit->entry.build_ms == 1500);
  CHECK(hit->entry.created_ms == created_at);
  CHECK(hit->entry.raw_size == put_square.raw_bytes);
  CHECK(hit->entry.bundle_size == put_square.bundle_bytes);
  CHECK(hit->entry.scenario == R"({"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC2"})");

  auto looked = store->lookup(put_square.key);
  REQUIRE(looked.ok());
  REQUIRE(looked->has_value());
  CHECK((*looked)->hits == 1);
  CHECK((*looked)->last_access_ms == store.now_ms);
  CHECK((*looked)->created_ms == created_at);

  auto out2 = temp / "out2";
  REQUIRE(get_ok(*store, put_square.key, out2).has_value());
  auto relu_hit = get_ok(*store, put_relu.key, out2);
  REQUIRE(relu_hit.has_value());
  check_kernel_files(*relu_hit, relu, out2);

  // A miss.
  auto miss = get_ok(*store, std::string(64, 'e'), temp / "out3");
  CHECK_FALSE(miss.has_value());

  stats = store->stats();
  REQUIRE(stats.ok());
  CHECK(stats->counters.at("hits") == 3);
  CHECK(stats->counters.at("misses") == 1);
  CHECK(stats->counters.at("stores") == 2);
  CHECK(stats->counters.at("already_present") == 1);
  CHECK(stats->counters.at("bytes_served") == 2 * put_square.raw_bytes + put_relu.raw_bytes);
  CHECK(stats->counters.at("compile_ms_saved") == 2 * 1500 + 700);
  CHECK(stats->counters.count("corrupt_entries") == 0);
  CHECK(stats->counters.count("missing_objects") == 0);
  CHECK(store.warnings.empty());
  CHECK(sorted_names_in(store->layout().tmp()).empty());
}

TEST_CASE("store::LocalStore opened with NewIndex::on_first_use creates no index until something uses it") {
  TempDir temp;
  auto square = make_kernel(temp / "src", "square", 16);
  {
    opcache::store::StoreOptions options;
    options.root = temp / "eager";
    auto eager = LocalStore::open(options);
    REQUIRE(eager.ok());
    CHECK(fs::is_regular_file((*eager)->layout().index()));  // the default: with the layout
  }
  auto opened = open_without_index(temp / "cache");
  LocalStore& store = *opened;
  // Opening makes the layout only: a run that never touches the index
  // (--mode disable) leaves no index.db.
  CHECK(fs::is_directory(store.layout().objects()));
  CHECK_FALSE(fs::exists(store.layout().index()));
  CHECK_FALSE(store.index_opened());
  auto put = put_ok(store, input_for(square, opcache::test::k_test_scenario, 10));
  CHECK(put.stored);
  CHECK(store.index_opened());
  CHECK(fs::is_regular_file(store.layout().index()));
  CHECK(local_store_counter(store, "stores") == 1);
}

namespace {

std::vector<fs::path> files_in(const fs::path& directory) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(directory)) {
    files.push_back(entry.path());
  }
  return files;
}

}  // namespace

TEST_CASE("store::LocalStore::warm_for_put opens the index and makes the next temp file ahead of a put, from any thread") {
  TempDir temp;
  auto square = make_kernel(temp / "src", "square", 16);
  auto opened = open_without_index(temp / "cache");
  LocalStore& store = *opened;
  REQUIRE_FALSE(store.index_opened());
  std::thread warm([&store] { store.warm_for_put(); });  // as exec does while its command runs
  warm.join();
  CHECK(store.index_opened());
  CHECK(fs::is_regular_file(store.layout().index()));
  // The spare temp file is there already, and the next create_temp() is that file.
  const auto spare = files_in(store.layout().tmp());
  REQUIRE(spare.size() == 1);
  {
    auto temp_file = store.create_temp();
    REQUIRE(temp_file.ok());
    CHECK(temp_file->temp_path() == spare.front());
    auto another = store.create_temp();  // taken: a new one
    REQUIRE(another.ok());
    CHECK(another->temp_path() != spare.front());
  }
  CHECK(files_in(store.layout().tmp()).empty());  // temp files not finished are removed
  store.warm_for_put();  // the index once opened, again only makes a spare
  CHECK(put_ok(store, input_for(square, opcache::test::k_test_scenario, 10)).stored);
  CHECK(local_store_counter(store, "stores") == 1);
  CHECK(files_in(store.layout().tmp()).empty());  // the put wrote the spare and linked it
}

TEST_CASE("store::LocalStore::warm_for_put leaves an index it cannot open to the first use, which reports it") {
  TempDir temp;
  auto square = make_kernel(temp / "src", "square", 16);
  auto opened = open_without_index(temp / "cache");
  LocalStore& store = *opened;
  fs::create_directory(store.layout().index());  // index.db is a directory: SQLite cannot open it
  store.warm_for_put();
  CHECK_FALSE(store.index_opened());
  auto put = store.put(input_for(square, opcache::test::k_test_scenario, 10), ReplacePolicy::keep_existing);
  CHECK_FALSE(put.ok());
}

TEST_CASE("store::LocalStore record_miss_with_next_write counts the miss once, in the put's commit or when flushed") {
  TempDir temp;
  auto square = make_kernel(temp / "src", "square", 16);
  StoreFixture store(temp / "cache");
  auto input = input_for(square, opcache::test::k_test_scenario, 10);
  store->record_miss_with_next_write();
  CHECK(local_store_counter(*store, "misses") == 0);  // in memory until a write
  auto put = put_ok(*store, input);
  CHECK(put.stored);
  CHECK(local_store_counter(*store, "misses") == 1);  // committed with the row
  REQUIRE(store->flush_pending_misses().ok());
  CHECK(local_store_counter(*store, "misses") == 1);  // not twice
  // A put that writes no row (the key is there) leaves it to the flush.
  store->record_miss_with_next_write();
  auto again = put_ok(*store, input);
  CHECK_FALSE(again.stored);
  CHECK(local_store_counter(*store, "misses") == 1);
  REQUIRE(store->flush_pending_misses().ok());
  CHECK(local_store_counter(*store, "misses") == 2);
  CHECK(local_store_counter(*store, "already_present") == 1);
}

TEST_CASE("store::LocalStore keep_existing keeps an entry whose key record is gone without replacing it") {
  TempDir temp;
  auto square = make_kernel(temp / "src", "square", 16);
  StoreFixture store(temp / "cache");
  auto input = input_for(square, opcache::test::k_test_scenario, 10);
  auto first = put_ok(*store, input);
  REQUIRE(first.stored);
  // Without its record put skips the early look and encodes; the row is kept all the same.
  REQUIRE(fs::remove(store->layout().keys() / first.key.substr(0, 2) / first.key));
  store.now_ms += 1000;
  auto second = put_ok(*store, input);
  CHECK_FALSE(second.stored);
  CHECK(second.digest == first.digest);
  CHECK(local_store_counter(*store, "stores") == 1);
  CHECK(local_store_counter(*store, "already_present") == 1);
  auto entry = store->lookup(first.key);
  REQUIRE(entry.ok());
  REQUIRE(entry->has_value());
  CHECK((*entry)->created_ms == store.now_ms - 1000);
  CHECK(fs::is_regular_file(store->layout().object_path(first.digest)));
  CHECK(files_and_links_under(store->layout().tmp()).empty());
}

TEST_CASE("store::LocalStore get rejects a malformed key with a usage error") {
  TempDir temp;
  StoreFixture store(temp / "cache");
  const std::vector<std::string> bad_keys = {"", "abc", std::string(64, 'A'), std::string(63, 'a'),
                                             "../" + std::string(61, 'a')};
  for (const auto& bad : bad_keys) {
    auto got = store->get(bad, temp / "out");
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code() == ErrorCode::usage);
    auto contained = store->contains(bad);
    REQUIRE_FALSE(contained.ok());
    CHECK(contained.error().code() == ErrorCode::usage);
  }
  CHECK(local_store_counter(*store, "misses") == 0);
}

TEST_CASE("store::LocalStore with aging disabled (-1) counts hits but keeps last_access") {
  TempDir temp;
  auto kernel = make_kernel(temp / "src", "neg", 8);
  opcache::store::AgingPolicy no_aging;
  no_aging.max_bytes = -1;
  StoreFixture store(temp / "cache", no_aging);
  auto put = put_ok(*store, input_for(kernel));
  const std::int64_t stored_at = store.now_ms;
  store.now_ms += 3'600'000;
  REQUIRE(get_ok(*store, put.key, temp / "out").has_value());
  auto entry = store->lookup(put.key);
  REQUIRE(entry.ok());
  REQUIRE(entry->has_value());
  CHECK((*entry)->hits == 1);
  CHECK((*entry)->last_access_ms == stored_at);
}

TEST_CASE("store::LocalStore keep_existing keeps the stored bundle, replace swaps it and retires the old object") {
  TempDir temp;
  auto square = make_kernel(temp / "src", "square", 16);
  auto other = make_kernel(temp / "src", "relu", 16);
  StoreFixture store(temp / "cache");

  auto original = input_for(square, opcache::test::k_test_scenario, 100);
  // Same descriptor and scenario (same key), different bytes under the same member names.
  auto rebuilt = input_for(square, opcache::test::k_test_scenario, 200);
  rebuilt.members[0].path = other.object;

  auto first = put_ok(*store, original);
  REQUIRE(first.stored);
  REQUIRE(store->set_pinned(first.key, true).ok());

  auto kept = put_ok(*store, rebuilt, ReplacePolicy::keep_existing);
  CHECK_FALSE(kept.stored);
  CHECK(kept.digest == first.digest);
  auto hit = get_ok(*store, first.key, temp / "kept");
  REQUIRE(hit.has_value());
  check_kernel_files(*hit, square, temp / "kept");
  CHECK(files_and_links_under(store->layout().objects()) ==
        std::vector<fs::path>{store->layout().object_path(first.digest)});

  auto replaced = put_ok(*store, rebuilt, ReplacePolicy::replace);
  CHECK(replaced.stored);
  CHECK(replaced.key == first.key);
  CHECK(replaced.digest != first.digest);
  // Exactly one object for the key: the new one; the old one is gone.
  CHECK(files_and_links_under(store->layout().objects()) ==
        std::vector<fs::path>{store->layout().object_path(replaced.digest)});
  CHECK_FALSE(fs::exists(store->layout().object_path(first.digest)));

  auto out = temp / "replaced";
  hit = get_ok(*store, first.key, out);
  REQUIRE(hit.has_value());
  CHECK(hit->entry.digest == replaced.digest);
  CHECK(hit->entry.build_ms == 200);
  CHECK(hit->entry.pinned);  // replacing keeps the pin
  REQUIRE(hit->files.size() == 3);
  CHECK(hit->files[0] == out / square.object.filename());
  CHECK(read_text(hit->files[0]) == read_text(other.object));
  CHECK(read_text(hit->files[1]) == read_text(square.metadata));
  CHECK(read_text(hit->files[2]) == read_text(square.info));

  // Replacing with identical bytes stores again but never deletes the live object.
  auto same = put_ok(*store, rebuilt, ReplacePolicy::replace);
  CHECK(same.stored);
  if (same.digest == replaced.digest) {
    CHECK(fs::exists(store->layout().object_path(replaced.digest)));
  }
  CHECK(files_and_links_under(store->layout().objects()).size() == 1);
  CHECK(store->stats()->totals.entries == 1);
  CHECK(local_store_counter(*store, "already_present") == 1);
  CHECK(sorted_names_in(store->layout().tmp()).empty());
}

TEST_CASE("store::LocalStore contains, lookup, remove and list with filters and pagination") {
  TempDir temp;
  auto square = make_kernel(temp / "src", "square", 8);
  auto relu = make_kernel(temp / "src", "relu", 8);
  auto neg = make_kernel(temp / "src", "neg", 8);
  auto add = make_kernel(temp / "src", "add", 8);
  StoreFixture store(temp / "cache");

  auto k_square = put_ok(*store, input_for(square, "device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1")).key;
  auto k_relu = put_ok(*store, input_for(relu, "device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1")).key;
  auto k_neg = put_ok(*store, input_for(neg, "device=single,phase=infer,toolchain=8.0.RC2,soc=Ascend310P3")).key;
  auto k_add = put_ok(*store, input_for(add, "device=single,phase=train,toolchain=7.0.0,soc=Ascend910B1")).key;

  auto keys = [&](const opcache::ListFilter& filter) {
    auto listed = store->list(filter);
    REQUIRE(listed.ok());
    std::vector<std::string> result;
    for (const auto& entry : *listed) {
      result.push_back(entry.key);
    }
    return result;
  };
  auto sorted = [](std::vector<std::string> values) {
    std::sort(values.begin(), values.end());
    return values;
  };
  using Keys = std::vector<std::string>;

  const Keys all = sorted({k_square, k_relu, k_neg, k_add});
  CHECK(keys({}) == all);
  opcache::ListFilter filter;
  filter.op_type = "relu";
  CHECK(keys(filter) == Keys{k_relu});
  filter = {};
  filter.device_mode = "single";
  CHECK(keys(filter) == sorted({k_square, k_neg, k_add}));
  filter = {};
  filter.phase = "infer";
  CHECK(keys(filter) == Keys{k_neg});
  filter = {};
  filter.toolchain = "7.0.0";
  CHECK(keys(filter) == Keys{k_add});
  filter = {};
  filter.soc = "Ascend910B1";
  CHECK(keys(filter) == sorted({k_square, k_relu, k_add}));
  filter.phase = "train";
  filter.device_mode = "single";
  CHECK(keys(filter) == sorted({k_square, k_add}));
  filter = {};
  filter.op_type = "MatMul";
  CHECK(keys(filter).empty());

  filter = {};
  filter.limit = 3;
  CHECK(keys(filter) == Keys(all.begin(), all.begin() + 3));
  filter.after_key = all[2];
  CHECK(keys(filter) == Keys{all[3]});
  filter.after_key = all[3];
  CHECK(keys(filter).empty());
  filter = {};
  filter.after_key = all[0];
  filter.limit = 2;
  CHECK(keys(filter) == Keys{all[1], all[2]});

  // The listed entry describes the kernel.
  auto listed = store->list({});
  REQUIRE(listed.ok());
  for (const auto& entry : *listed) {
    if (entry.key == k_neg) {
      CHECK(entry.op_type == "neg");
      CHECK(entry.device_mode == "single");
      CHECK(entry.phase == "infer");
      CHECK(entry.soc == "Ascend310P3");
      CHECK(entry.raw_size == total_size(neg.files()));
    }
  }

  const std::string absent(64, '0');
  CHECK(*store->contains(k_relu));
  CHECK_FALSE(*store->contains(absent));
  auto looked = store->lookup(k_relu);
  REQUIRE(looked.ok());
  REQUIRE(looked->has_value());
  CHECK((*looked)->op_type == "relu");
  CHECK((*looked)->device_mode == "multi");
  CHECK_FALSE(store->lookup(absent)->has_value());

  // remove: row and object go, a second remove finds nothing.
  auto relu_object = store->layout().object_path((*looked)->digest);
  REQUIRE(fs::exists(relu_object));
  auto removed = store->remove(k_relu);
  REQUIRE(removed.ok());
  CHECK(*removed);
  CHECK_FALSE(*store->contains(k_relu));
  CHECK_FALSE(store->lookup(k_relu)->has_value());
  CHECK_FALSE(fs::exists(relu_object));
  removed = store->remove(k_relu);
  REQUIRE(removed.ok());
  CHECK_FALSE(*removed);
  CHECK(local_store_counter(*store, "removals") == 1);
  CHECK(keys({}) == sorted({k_square, k_neg, k_add}));
  CHECK_FALSE(get_ok(*store, k_relu, temp / "out").has_value());
  CHECK(store->stats()->totals.entries == 3);
  CHECK(files_and_links_under(store->layout().objects()).size() == 3);

  // contains() also requires the object file, not just the row.
  auto neg_entry = store->lookup(k_neg);
  REQUIRE(neg_entry->has_value());
  fs::remove(store->layout().object_path((*neg_entry)->digest));
  CHECK_FALSE(*store->contains(k_neg));
  CHECK(store->lookup(k_neg)->has_value());
}

TEST_CASE("store::LocalStore get replaces a symlink at a member's name and leaves its target untouched") {
  TempDir temp;
  auto kernel = make_kernel(temp / "src", "square", 16);
  StoreFixture store(temp / "cache");
  auto key = put_ok(*store, input_for(kernel)).key;

  auto out = temp / "out";
  fs::create_directories(out);
  auto victim = temp / "victim.txt";
  write_text(victim, "precious user data");
  auto member_path = out / kernel.object.filename();
  fs::create_symlink(victim, member_path);
  // A dangling symlink at another member's name.
  fs::create_symlink(temp / "does-not-exist", out / kernel.info.filename());

  auto hit = get_ok(*store, key, out);
  REQUIRE(hit.has_value());
  check_kernel_files(*hit, kernel, out);
  CHECK_FALSE(fs::is_symlink(member_path));
  CHECK_FALSE(fs::is_symlink(out / kernel.info.filename()));
  CHECK(read_text(victim) == "precious user data");
  CHECK_FALSE(fs::exists(temp / "does-not-exist"));
  CHECK(sorted_names_in(out) == std::vector<std::string>{kernel.info.filename().string(),
                                                         kernel.metadata.filename().string(),
                                                         kernel.object.filename().string()});
}

TEST_CASE("store::LocalStore get creates a fresh nested output directory and overwrites stale files") {
  TempDir temp;
  auto kernel = make_kernel(temp / "src", "relu", 16);
  StoreFixture store(temp / "cache");
  auto key = put_ok(*store, input_for(kernel)).key;

  auto out = temp / "a" / "b" / "c" / "kernel_meta";
  REQUIRE_FALSE(fs::exists(temp / "a"));
  auto hit = get_ok(*store, key, out);
  REQUIRE(hit.has_value());
  check_kernel_files(*hit, kernel, out);
  CHECK(sorted_names_in(out).size() == 3);

  // A second get over stale copies replaces them.
  write_text(out / kernel.object.filename(), "stale");
  hit = get_ok(*store, key, out);
  REQUIRE(hit.has_value());
  check_kernel_files(*hit, kernel, out);
  CHECK(sorted_names_in(out).size() == 3);
}

TEST_CASE("store::LocalStore treats a corrupt object as a miss and drops the entry") {
  TempDir temp;
  auto kernel = make_kernel(temp / "src", "square", 64);
  StoreFixture store(temp / "cache");
  auto put = put_ok(*store, input_for(kernel, opcache::test::k_test_scenario, 1500));
  auto object = store->layout().object_path(put.digest);
  std::string bytes = read_text(object);
  REQUIRE(bytes.size() > 64);
  const std::uint32_t manifest_length = static_cast<std::uint8_t>(bytes[12]) |
                                        (static_cast<std::uint8_t>(bytes[13]) << 8) |
                                        (static_cast<std::uint8_t>(bytes[14]) << 16) |
                                        (static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[15])) << 24);
  const std::size_t payload_start = opcache::store::k_bundle_header_size + manifest_length;
  REQUIRE(payload_start < bytes.size());
  const std::string original = bytes;

  SUBCASE("a flipped byte in the header") { flip_byte(object, 0); }
  SUBCASE("a flipped byte in the manifest") { flip_byte(object, opcache::store::k_bundle_header_size + 1); }
  SUBCASE("a flipped byte in the compressed payload") {
    flip_byte(object, payload_start + (bytes.size() - payload_start) / 2);
  }
  SUBCASE("a flipped last byte") { flip_byte(object, bytes.size() - 1); }
  SUBCASE("a manifest edited to stay valid (build_ms)") {
    // Still a well-formed bundle for the same key, but not the bytes the index names.
    auto at = bytes.find("\"build_ms\":1500");
    REQUIRE(at != std::string::npos);
    bytes.replace(at, 15, "\"build_ms\":9500");
    write_text(object, bytes);
  }
  REQUIRE(read_text(object).size() == original.size());
  REQUIRE(read_text(object) != original);

  // A previous build's file sits at a member's name; a failed get must not touch it.
  auto out = temp / "out";
  auto previous = out / kernel.object.filename();
  write_text(previous, "previous build");

  auto got = get_ok(*store, put.key, out);
  CHECK_FALSE(got.has_value());
  REQUIRE(store.warnings.size() == 1);
  CHECK(store.warnings[0].find(put.key) != std::string::npos);
  CHECK_FALSE(store->lookup(put.key)->has_value());
  CHECK_FALSE(*store->contains(put.key));
  CHECK(local_store_counter(*store, "corrupt_entries") == 1);
  CHECK(local_store_counter(*store, "misses") == 1);
  CHECK(local_store_counter(*store, "hits") == 0);
  CHECK(local_store_counter(*store, "compile_ms_saved") == 0);
  CHECK_FALSE(fs::exists(object));  // the bad object is dropped with its row
  // Nothing was written: no member files, no temp files, the old file intact.
  CHECK(sorted_names_in(out) == std::vector<std::string>{kernel.object.filename().string()});
  CHECK(read_text(previous) == "previous build");
  CHECK(sorted_names_in(store->layout().tmp()).empty());

  // The next get is a plain miss; a fresh put heals the entry.
  CHECK_FALSE(get_ok(*store, put.key, out).has_value());
  CHECK(store.warnings.size() == 1);
  CHECK(local_store_counter(*store, "misses") == 2);
  CHECK(put_ok(*store, input_for(kernel, opcache::test::k_test_scenario, 1500)).stored);
  auto hit = get_ok(*store, put.key, out);
  REQUIRE(hit.has_value());
  check_kernel_files(*hit, kernel, out);
}

TEST_CASE("store::LocalStore treats a missing object as a miss and counts missing_objects") {
  TempDir temp;
  auto kernel = make_kernel(temp / "src", "neg", 16);
  StoreFixture store(temp / "cache");
  auto put = put_ok(*store, input_for(kernel));
  REQUIRE(fs::remove(store->layout().object_path(put.digest)));

  auto out = temp / "out";
  auto got = get_ok(*store, put.key, out);
  CHECK_FALSE(got.has_value());
  REQUIRE(store.warnings.size() == 1);
  CHECK(store.warnings[0].find(put.key) != std::string::npos);
  CHECK_FALSE(store->lookup(put.key)->has_value());
  CHECK(local_store_counter(*store, "missing_objects") == 1);
  CHECK(local_store_counter(*store, "misses") == 1);
  CHECK_FALSE(has_counter(*store, "corrupt_entries"));
  CHECK(sorted_names_in(out).empty());
  CHECK(sorted_names_in(store->layout().tmp()).empty());
}

TEST_CASE("store::LocalStore treats a truncated object as a corrupt miss") {
  TempDir temp;
  auto kernel = make_kernel(temp / "src", "relu", 16);
  StoreFixture store(temp / "cache");
  auto put = put_ok(*store, input_for(kernel));
  auto object = store->layout().object_path(put.digest);
  std::string bytes = read_text(object);

  SUBCASE("to half its size") { write_text(object, bytes.substr(0, bytes.size() / 2)); }
  SUBCASE("to one byte short") { write_text(object, bytes.substr(0, bytes.size() - 1)); }
  SUBCASE("to the header only") { write_text(object, bytes.substr(0, opcache::store::k_bundle_header_size)); }
  SUBCASE("to nothing") { write_text(object, ""); }

  auto out = temp / "out";
  auto got = get_ok(*store, put.key, out);
  CHECK_FALSE(got.has_value());
  REQUIRE(store.warnings.size() == 1);
  CHECK(store.warnings[0].find(put.key) != std::string::npos);
  CHECK_FALSE(store->lookup(put.key)->has_value());
  CHECK(local_store_counter(*store, "corrupt_entries") == 1);
  CHECK(local_store_counter(*store, "misses") == 1);
  CHECK(sorted_names_in(out).empty());
  CHECK(sorted_names_in(store->layout().tmp()).empty());
}

TEST_CASE("store::LocalStore adopt stores a verified bundle from a temp file") {
  TempDir temp;
  auto kernel = make_kernel(temp / "src", "square", 16);
  StoreFixture store(temp / "cache");
  auto input = input_for(kernel, opcache::test::k_test_scenario, 42);
  const auto key = key_of(input);

  auto adopt_bundle = [&](ReplacePolicy policy) {
    auto file = store->create_temp();
    REQUIRE(file.ok());
    CHECK(file->temp_path().parent_path() == store->layout().tmp());
    opcache::base::FdSink sink(file->fd(), file->temp_path());
    REQUIRE(opcache::store::write_bundle(input, sink).ok());
    auto adopted = store->adopt(std::move(*file), key, policy);
    REQUIRE_MESSAGE(adopted.ok(), (adopted.ok() ? "" : adopted.error().message()));
    return *adopted;
  };

  auto adopted = adopt_bundle(ReplacePolicy::keep_existing);
  CHECK(adopted.stored);
  CHECK(adopted.key == key);
  CHECK(opcache::base::sha256_hex(read_text(store->layout().object_path(adopted.digest))) == adopted.digest);
  CHECK(sorted_names_in(store->layout().tmp()).empty());
  auto hit = get_ok(*store, key, temp / "out");
  REQUIRE(hit.has_value());
  check_kernel_files(*hit, kernel, temp / "out");
  CHECK(hit->entry.build_ms == 42);

  auto again = adopt_bundle(ReplacePolicy::keep_existing);
  CHECK_FALSE(again.stored);
  CHECK(again.digest == adopted.digest);
  CHECK(local_store_counter(*store, "already_present") == 1);
  CHECK(local_store_counter(*store, "stores") == 1);
  CHECK(sorted_names_in(store->layout().tmp()).empty());
}

TEST_CASE("store::LocalStore adopt rejects a bundle for another key and leaves neither object nor row") {
  TempDir temp;
  auto wanted = make_kernel(temp / "src", "square", 16);
  auto delivered = make_kernel(temp / "src", "relu", 16);
  StoreFixture store(temp / "cache");
  const auto wanted_key = key_of(input_for(wanted));
  const auto delivered_key = key_of(input_for(delivered));

  auto file = store->create_temp();
  REQUIRE(file.ok());
  SUBCASE("a valid bundle of another kernel") {
    opcache::base::FdSink sink(file->fd(), file->temp_path());
    REQUIRE(opcache::store::write_bundle(input_for(delivered), sink).ok());
  }
  SUBCASE("bytes that are not a bundle") {
    const std::string garbage = "this is not a bundle at all";
    REQUIRE(file->write(garbage.data(), garbage.size()).ok());
  }
  auto adopted = store->adopt(std::move(*file), wanted_key, ReplacePolicy::keep_existing);
  REQUIRE_FALSE(adopted.ok());
  CHECK(adopted.error().code() == ErrorCode::corrupt);
  CHECK_FALSE(store->lookup(wanted_key)->has_value());
  CHECK_FALSE(store->lookup(delivered_key)->has_value());
  CHECK(store->stats()->totals.entries == 0);
  CHECK(files_and_links_under(store->layout().objects()).empty());
  CHECK(sorted_names_in(store->layout().tmp()).empty());
  CHECK(local_store_counter(*store, "stores") == 0);
}

TEST_CASE("store::LocalStore verify reports corrupt, missing, orphan and stale temp files and repairs them") {
  TempDir temp;
  auto a = make_kernel(temp / "src", "square", 16);
  auto b = make_kernel(temp / "src", "relu", 16);
  auto c = make_kernel(temp / "src", "neg", 16);
  StoreFixture store(temp / "cache");
  auto put_a = put_ok(*store, input_for(a));
  auto put_b = put_ok(*store, input_for(b));
  auto put_c = put_ok(*store, input_for(c));
  const auto& layout = store->layout();

  auto clean = verify_ok(*store, false);
  CHECK(clean.problems.empty());
  CHECK(clean.entries_checked == 3);
  CHECK(clean.objects_checked == 3);
  CHECK(clean.bytes_checked == put_a.bundle_bytes + put_b.bundle_bytes + put_c.bundle_bytes);

  // a: corrupt object; b: object gone; an orphan object; temp files of a dead and a live writer.
  flip_byte(layout.object_path(put_a.digest), read_text(layout.object_path(put_a.digest)).size() / 2);
  REQUIRE(fs::remove(layout.object_path(put_b.digest)));
  std::string orphan_name = "ab" + opcache::base::sha256_hex("orphan").substr(2);
  auto orphan = layout.objects() / "ab" / orphan_name;
  write_text(orphan, read_text(layout.object_path(put_c.digest)));
  const std::string stale_name = std::to_string(dead_pid()) + "-0123456789abcdef.tmp";
  write_text(layout.tmp() / stale_name, "half a bundle");
  const std::string live_name = std::to_string(::getpid()) + "-fedcba9876543210.tmp";
  write_text(layout.tmp() / live_name, "a bundle being written right now");

  auto report = verify_ok(*store, false);
  CHECK(problems_of(report) == std::set<Problem>{{"corrupt_entry", put_a.key, false},
                                                 {"missing_object", put_b.key, false},
                                                 {"orphan_object", orphan_name, false},
                                                 {"stale_temp", stale_name, false}});
  CHECK(report.entries_checked == 3);
  // Without repair nothing changes.
  CHECK(fs::exists(layout.object_path(put_a.digest)));
  CHECK(store->lookup(put_a.key)->has_value());
  CHECK(store->lookup(put_b.key)->has_value());
  CHECK(fs::exists(orphan));
  CHECK(fs::exists(layout.tmp() / stale_name));

  auto repaired = verify_ok(*store, true);
  CHECK(problems_of(repaired) == std::set<Problem>{{"corrupt_entry", put_a.key, true},
                                                   {"missing_object", put_b.key, true},
                                                   {"orphan_object", orphan_name, true},
                                                   {"stale_temp", stale_name, true}});
  CHECK_FALSE(store->lookup(put_a.key)->has_value());
  CHECK_FALSE(store->lookup(put_b.key)->has_value());
  CHECK_FALSE(fs::exists(layout.object_path(put_a.digest)));
  CHECK_FALSE(fs::exists(orphan));
  CHECK_FALSE(fs::exists(layout.tmp() / stale_name));
  // A live writer's temp file is never touched.
  CHECK(read_text(layout.tmp() / live_name) == "a bundle being written right now");

  auto after = verify_ok(*store, false);
  CHECK(after.problems.empty());
  CHECK(after.entries_checked == 1);
  CHECK(after.objects_checked == 1);
  auto hit = get_ok(*store, put_c.key, temp / "out");
  REQUIRE(hit.has_value());
  check_kernel_files(*hit, c, temp / "out");
}

TEST_CASE("store::LocalStore crash leftovers (temp file, orphan object) do not change what get returns") {
  TempDir temp;
  auto a = make_kernel(temp / "src", "square", 16);
  auto b = make_kernel(temp / "src", "relu", 16);
  auto other = make_kernel(temp / "src", "neg", 16);
  StoreFixture store(temp / "cache");
  const auto& layout = store->layout();

  auto input_a = input_for(a);
  input_a.created = k_fixed_created;
  auto put_a = put_ok(*store, input_a);

  // A replace of a that crashed after linking its object but before the index commit ...
  auto rebuilt_a = input_a;
  rebuilt_a.members[0].path = other.object;
  auto [rebuilt_bytes, rebuilt_digest] = encode_with_digest(rebuilt_a);
  write_text(layout.object_path(rebuilt_digest), rebuilt_bytes);
  // ... and one that crashed halfway through writing its temp file.
  const std::string stale_name = std::to_string(dead_pid()) + "-00112233aabbccdd.tmp";
  write_text(layout.tmp() / stale_name, rebuilt_bytes.substr(0, rebuilt_bytes.size() / 2));
  // A put of b that crashed after linking, before the index knew about it.
  auto input_b = input_for(b);
  input_b.created = k_fixed_created;
  auto [b_bytes, b_digest] = encode_with_digest(input_b);
  write_text(layout.object_path(b_digest), b_bytes);

  auto hit = get_ok(*store, put_a.key, temp / "out_a");
  REQUIRE(hit.has_value());
  CHECK(hit->entry.digest == put_a.digest);
  check_kernel_files(*hit, a, temp / "out_a");
  CHECK_FALSE(get_ok(*store, key_of(input_b), temp / "out_b").has_value());
  CHECK_FALSE(*store->contains(key_of(input_b)));
  CHECK(store->list({})->size() == 1);
  CHECK(store.warnings.empty());

  // Retrying the interrupted put of b completes it (the object is reused).
  auto put_b = put_ok(*store, input_b);
  CHECK(put_b.stored);
  CHECK(put_b.digest == b_digest);
  hit = get_ok(*store, put_b.key, temp / "out_b2");
  REQUIRE(hit.has_value());
  check_kernel_files(*hit, b, temp / "out_b2");

  // verify --repair clears what the crashes left; a is still the original.
  auto repaired = verify_ok(*store, true);
  CHECK(problems_of(repaired) == std::set<Problem>{{"orphan_object", rebuilt_digest, true},
                                                   {"stale_temp", stale_name, true}});
  CHECK(verify_ok(*store, false).problems.empty());
  hit = get_ok(*store, put_a.key, temp / "out_a2");
  REQUIRE(hit.has_value());
  check_kernel_files(*hit, a, temp / "out_a2");
}

// ---------------------------------------------------------------------------
// Many processes on one root.

TEST_CASE("store::LocalStore can be opened by many processes at once on a fresh root") {
  // Eight ranks starting together on an empty cache directory: every one of
  // them must get a working store (the busy timeout covers the set-up races).
  TempDir temp;
  constexpr int k_rounds = 40;
  constexpr int k_openers = 8;
  int failed_opens = 0;
  std::string first_failure;
  for (int round = 0; round < k_rounds; ++round) {
    const auto root = temp / ("root" + std::to_string(round));
    const auto report = temp / ("report" + std::to_string(round));
    fs::create_directories(report);
    int gate[2];
    REQUIRE(::pipe(gate) == 0);
    std::vector<pid_t> pids;
    for (int child = 0; child < k_openers; ++child) {
      pid_t pid = ::fork();
      if (pid == 0) {
        ::close(gate[1]);
        char byte = 0;
        while (::read(gate[0], &byte, 1) < 0 && errno == EINTR) {
        }
        int code = 0;
        try {
          StoreOptions options;
          options.root = root;
          options.warn = [](const std::string&) {};
          auto opened = LocalStore::open(options);
          if (!opened) {
            std::ofstream(report / std::to_string(child)) << opened.error().message();
            code = 1;
          } else if (!(*opened)->stats().ok()) {
            code = 2;
          }
        } catch (...) {
          code = 3;
        }
        ::_exit(code);
      }
      if (pid > 0) {
        pids.push_back(pid);
      }
    }
    ::close(gate[1]);
    ::close(gate[0]);
    for (pid_t pid : pids) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ++failed_opens;
      }
    }
    for (const auto& name : sorted_names_in(report)) {
      if (first_failure.empty()) {
        first_failure = read_text(report / name);
      }
    }
    CHECK(pids.size() == static_cast<std::size_t>(k_openers));
  }
  CHECK_MESSAGE(failed_opens == 0, failed_opens << " of " << k_rounds * k_openers
                                                << " concurrent opens failed; first: " << first_failure);
}

namespace {

constexpr int k_children = 4;
constexpr int k_child_keys = 40;
constexpr int k_shared_keys = 16;   // put by every child
constexpr int k_replaced_keys = 8;  // of the shared keys, put with replace in two versions
constexpr auto k_child_run_time = std::chrono::milliseconds(2000);

struct KeyVersion {
  std::vector<MemberSource> members;
  std::map<std::string, std::string> bytes;  // member name -> contents
};

struct KeySpec {
  int index = 0;
  nlohmann::json descriptor;
  std::string key;
  bool replaced = false;
  std::vector<KeyVersion> versions;
  std::set<int> owners;
};

// 40 keys over 8 real kernels. Every key has distinct member bytes per
// version; the .json member names key and version so mixed-up hits show.
std::vector<KeySpec> make_workload(const fs::path& dir, const nlohmann::json& scenario) {
  const char* const ops[] = {"square", "relu", "neg", "add"};
  std::vector<KernelTriple> kernels;
  for (int i = 0; i < 8; ++i) {
    kernels.push_back(make_kernel(dir / "kernels", ops[i % 4], 16 * (1 + i / 4)));
  }
  std::vector<KeySpec> specs;
  for (int k = 0; k < k_child_keys; ++k) {
    KeySpec spec;
    spec.index = k;
    spec.descriptor = nlohmann::json::parse(kernels[k % 8].descriptor_json);
    spec.descriptor["attrs"]["variant"] = k;
    auto key = opcache::store::derive_key(spec.descriptor, scenario);
    REQUIRE(key.ok());
    spec.key = *key;
    spec.replaced = k < k_replaced_keys;
    const int versions = spec.replaced ? 2 : 1;
    const std::string stem = "k" + std::to_string(k);
    for (int v = 0; v < versions; ++v) {
      KeyVersion version;
      auto version_dir = dir / stem / ("v" + std::to_string(v));
      std::string object = read_text(kernels[(k + v) % 8].object);
      version.bytes[stem + ".o"] = object;
      version.bytes[stem + ".json"] =
          nlohmann::json{{"key", k}, {"version", v}, {"sha256", opcache::base::sha256_hex(object)}}.dump();
      version.bytes[stem + ".info"] = read_text(kernels[k % 8].info);
      for (const char* suffix : {".o", ".json", ".info"}) {
        const std::string name = stem + suffix;
        write_text(version_dir / name, version.bytes[name]);
        version.members.push_back(MemberSource{name, version_dir / name, ""});
      }
      spec.versions.push_back(std::move(version));
    }
    if (k < k_shared_keys) {
      for (int child = 0; child < k_children; ++child) {
        spec.owners.insert(child);
      }
    } else {
      spec.owners = {k % k_children, (k + 1) % k_children};
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

// Which version of `spec` the files of a hit are, or -1 if none matches exactly.
int matching_version(const KeySpec& spec, const std::vector<fs::path>& files) {
  std::map<std::string, std::string> seen;
  for (const auto& file : files) {
    seen[file.filename().string()] = read_text(file);
  }
  for (std::size_t v = 0; v < spec.versions.size(); ++v) {
    if (spec.versions[v].bytes == seen) {
      return static_cast<int>(v);
    }
  }
  return -1;
}

// Child exit codes.
constexpr int k_exit_open_failed = 2;
constexpr int k_exit_put_failed = 3;
constexpr int k_exit_get_failed = 4;
constexpr int k_exit_wrong_bytes = 5;
constexpr int k_exit_lost_key = 6;
constexpr int k_exit_warning = 7;

// One child's workload. Uses no doctest assertions (they belong to the
// parent); failures are written to a log and returned as the exit code.
int run_child(int child, const fs::path& root, const fs::path& work, const std::vector<KeySpec>& specs,
              const nlohmann::json& scenario) {
  std::ofstream log(work / ("child-" + std::to_string(child) + ".log"));
  int result = 0;
  auto fail = [&](int code, const std::string& what) {
    log << what << "\n";
    if (result == 0) {
      result = code;
    }
  };
  int warnings = 0;
  StoreOptions options;
  options.root = root;
  options.warn = [&](const std::string& message) {
    ++warnings;
    log << "warning: " << message << "\n";
  };
  // Opening a fresh root from several processes at once can fail with
  // "database is locked" (see the test "... opened by many processes at once
  // on a fresh root"); retry here so this test checks puts and gets.
  auto opened = LocalStore::open(options);
  for (int attempt = 1; !opened && opened.error().code() == ErrorCode::timeout && attempt < 100; ++attempt) {
    log << "open attempt " << attempt << ": " << opened.error().message() << "\n";
    ::usleep(10000);
    opened = LocalStore::open(options);
  }
  if (!opened) {
    log << "open: " << opened.error().message() << "\n";
    return k_exit_open_failed;
  }
  LocalStore& store = **opened;

  std::mt19937 rng(static_cast<unsigned>(7919 * (child + 1)));
  std::set<int> put_by_me;
  int puts = 0, gets = 0, hits = 0;
  auto do_put = [&](const KeySpec& spec, int version) {
    BundleInput input;
    input.descriptor = spec.descriptor;
    input.scenario = scenario;
    input.members = spec.versions[version].members;
    input.created = k_fixed_created;
    auto put = store.put(input, spec.replaced ? ReplacePolicy::replace : ReplacePolicy::keep_existing);
    ++puts;
    if (!put) {
      fail(k_exit_put_failed, "put k" + std::to_string(spec.index) + ": " + put.error().message());
      return;
    }
    if (put->key != spec.key) {
      fail(k_exit_put_failed, "put k" + std::to_string(spec.index) + " returned key " + put->key);
    }
    put_by_me.insert(spec.index);
  };
  auto do_get = [&](const KeySpec& spec) {
    auto out = work / ("out-" + std::to_string(child)) / std::to_string(gets++);
    auto got = store.get(spec.key, out);
    const std::string name = "k" + std::to_string(spec.index);
    if (!got) {
      fail(k_exit_get_failed, "get " + name + ": " + got.error().message());
      return;
    }
    if (!*got) {
      if (put_by_me.count(spec.index) != 0) {
        fail(k_exit_lost_key, "get " + name + ": miss after this process stored it");
      }
    } else {
      ++hits;
      if (matching_version(spec, (*got)->files) < 0) {
        fail(k_exit_wrong_bytes, "get " + name + ": files match no version that was ever stored");
      }
      if (sorted_names_in(out).size() != spec.versions[0].bytes.size()) {
        fail(k_exit_wrong_bytes,
             "get " + name + ": output directory holds " + std::to_string(sorted_names_in(out).size()) + " entries");
      }
      if ((*got)->entry.key != spec.key) {
        fail(k_exit_wrong_bytes, "get " + name + ": entry for key " + (*got)->entry.key);
      }
    }
    std::error_code ec;
    fs::remove_all(out, ec);
  };

  // First pass: every owned key once, in the same order in every child, so
  // the shared keys are put by all children at the same time.
  for (const auto& spec : specs) {
    if (spec.owners.count(child) != 0) {
      do_put(spec, spec.replaced ? child % 2 : 0);
    }
  }
  // Then a random mix of gets and puts (replacing versions back and forth).
  const auto deadline = std::chrono::steady_clock::now() + k_child_run_time;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto& spec = specs[rng() % specs.size()];
    if (spec.owners.count(child) != 0 && rng() % 3 == 0) {
      do_put(spec, spec.replaced ? static_cast<int>(rng() % 2) : 0);
    } else {
      do_get(spec);
    }
  }
  for (int index : put_by_me) {
    do_get(specs[static_cast<std::size_t>(index)]);
  }
  if (warnings != 0) {
    fail(k_exit_warning, std::to_string(warnings) + " warnings although nothing was corrupted");
  }
  log << "puts=" << puts << " gets=" << gets << " hits=" << hits << "\n";
  return result;
}

}  // namespace

TEST_CASE("store::LocalStore is shared safely by concurrent processes putting and getting overlapping keys") {
  TempDir temp;
  const auto scenario = scenario_json(opcache::test::k_test_scenario);
  const auto work = temp / "work";
  const auto specs = make_workload(work, scenario);
  const auto root = temp / "cache";

  // Fork before this process creates any store object. The children wait on
  // a pipe so they all start at once.
  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  std::vector<pid_t> pids;
  for (int child = 0; child < k_children; ++child) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      char byte = 0;
      while (::read(gate[0], &byte, 1) < 0 && errno == EINTR) {
      }
      int code = 99;
      try {
        code = run_child(child, root, work, specs, scenario);
      } catch (...) {
        code = 98;
      }
      ::_exit(code);
    }
    CHECK(pid > 0);
    if (pid > 0) {
      pids.push_back(pid);
    }
  }
  ::close(gate[1]);
  ::close(gate[0]);
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  REQUIRE(codes.size() == static_cast<std::size_t>(k_children));
  for (int child = 0; child < k_children; ++child) {
    const auto log = read_text(work / ("child-" + std::to_string(child) + ".log"));
    CHECK_MESSAGE(codes[child] == 0, "child " << child << " exited " << codes[child] << ":\n" << log);
  }

  StoreFixture store(root);
  auto report = verify_ok(*store, false);
  for (const auto& problem : report.problems) {
    CHECK_MESSAGE(problem.kind != "corrupt_entry", problem.subject << ": " << problem.detail);
    CHECK_MESSAGE(problem.kind != "missing_object", problem.subject << ": " << problem.detail);
    CHECK_MESSAGE(problem.kind != "orphan_object", problem.subject << ": " << problem.detail);
    CHECK_MESSAGE(problem.kind != "stale_temp", problem.subject << ": " << problem.detail);
  }
  CHECK(report.problems.empty());
  CHECK(report.entries_checked == k_child_keys);

  // Every key was put by at least one child and decodes byte-exact.
  for (const auto& spec : specs) {
    REQUIRE_FALSE(spec.owners.empty());
    auto out = temp / "final" / std::to_string(spec.index);
    auto hit = get_ok(*store, spec.key, out);
    REQUIRE_MESSAGE(hit.has_value(), "key k" << spec.index << " is missing");
    const int version = matching_version(spec, hit->files);
    CHECK_MESSAGE(version >= 0, "key k" << spec.index << " decodes to bytes no child stored");
    if (!spec.replaced) {
      CHECK(version == 0);
    }
    CHECK(sorted_names_in(out).size() == 3);
  }
  CHECK(files_and_links_under(store->layout().objects()).size() == static_cast<std::size_t>(k_child_keys));
  CHECK(sorted_names_in(store->layout().tmp()).empty());
  auto stats = store->stats();
  REQUIRE(stats.ok());
  CHECK(stats->totals.entries == k_child_keys);
  CHECK(stats->counters["stores"] >= k_child_keys);
  CHECK(stats->counters["hits"] > 0);
  CHECK(stats->counters.count("corrupt_entries") == 0);
  CHECK(stats->counters.count("missing_objects") == 0);
  CHECK(store.warnings.empty());
}
