// Exec manifests travelling to and from remotes (docs/remotes.md "Exec
// manifests"): RemoteSet::fetch_exec_manifests merges the remotes' (earlier
// remote first) and ignores a corrupt one, enqueue_exec_manifest_upload
// reaches a server after the entry queued before it, a read-only remote is
// never written, a server older than revision 7 costs nothing; file:// and
// s3:// (moto) keep and merge them; push and pull carry the manifests of
// the exec entries they move.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/environment.hpp"
#include "remote/remote_set.hpp"
#include "remote/s3/client.hpp"
#include "remote/transfer.hpp"
#include "store/exec_manifest.hpp"
#include "store/exec_manifest_file.hpp"
#include "tests/support/env_lookup.hpp"
#include "tests/support/exec_manifests.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tokens.hpp"

// A namespace of its own: the tests are compiled in unity batches.
namespace opcache::test::exec_manifest_travel {

namespace fs = std::filesystem;

namespace {

// `opcache serve` over a local store with a read and a write token.
struct ManifestTeamServer {
  TempDir dir;
  std::unique_ptr<ServerProcess> process;

  ManifestTeamServer() {
    write_text(dir / "tokens",
               token_line(k_write_token, "ci", "read,write") + token_line(k_read_token, "dev", "read"));
    process = std::make_unique<ServerProcess>(dir / "storage",
                                              std::vector<std::string>{"--tokens", (dir / "tokens").string()});
  }
  std::string url() const { return process->base_url(); }

  // The manifest the server keeps for `command_key`, or std::nullopt on 404.
  std::optional<store::ExecManifest> manifest(const std::string& command_key) const {
    const auto response = http_request("GET", url() + "/v1/manifests/" + command_key,
                                       {std::string("Authorization: Bearer ") + k_read_token});
    if (response.status == 404) {
      return std::nullopt;
    }
    REQUIRE_MESSAGE(response.status == 200, response.body);
    auto parsed = store::parse_exec_manifest(response.body, "GET body");
    REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message()));
    return *parsed;
  }

  bool has_entry(const std::string& key) const {
    return http_request("HEAD", url() + "/v1/entries/" + key, {std::string("Authorization: Bearer ") + k_read_token})
               .status == 200;
  }
};

// The remotes of `specs` over `local`; http(s) remotes get the write token.
// The uploader's last pass as the set closes may take a minute, not the
// product's 2 s: what it must send is sent however slow the machine (none of
// these remotes hangs, so closing still ends as soon as the pass does).
std::unique_ptr<remote::RemoteSet> open_manifest_remotes(store::LocalStore& local,
                                                          const std::vector<std::string>& specs) {
  std::vector<remote::RemoteOptions> options;
  for (const auto& spec : specs) {
    auto parsed = remote::parse_remote_spec(spec, "test");
    REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message()));
    parsed->token = k_write_token;
    options.push_back(*parsed);
  }
  remote::UploaderBounds patient;
  patient.last_pass = std::chrono::minutes(1);
  auto set = remote::RemoteSet::open(options, local, base::process_environment(), patient);
  REQUIRE_MESSAGE(set.ok(), (set.ok() ? "" : set.error().message()));
  return std::move(set).value();
}

// One remote of `spec`, opened alone.
std::unique_ptr<remote::RemoteStore> open_manifest_remote(const std::string& spec) {
  auto options = remote::parse_remote_spec(spec, "test");
  REQUIRE(options.ok());
  auto opened = remote::open_remote(*options, base::process_environment());
  REQUIRE_MESSAGE(opened.ok(), (opened.ok() ? "" : opened.error().message()));
  return std::move(opened).value();
}

// What `store` keeps for `command_key`, parsed (REQUIREs that it has a valid one).
store::ExecManifest remote_manifest(remote::RemoteStore& store, const std::string& command_key) {
  auto text = store.fetch_exec_manifest(command_key);
  REQUIRE_MESSAGE(text.ok(), (text.ok() ? "" : text.error().message()));
  REQUIRE(text->has_value());
  auto parsed = store::parse_exec_manifest(**text, store.name());
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message()));
  return *parsed;
}

// A remote keeps and merges manifests: absent, stored, merged (the newer
// builds first), and a read-only one refuses to write.
void check_manifest_round_trip(const std::string& spec) {
  auto writer = open_manifest_remote(spec);
  const auto command_key = made_up_command_key("round trip " + spec);
  const std::string first(64, '1');
  const std::string second(64, '2');
  auto absent = writer->fetch_exec_manifest(command_key);
  REQUIRE(absent.ok());
  CHECK_FALSE(absent->has_value());

  REQUIRE(writer->store_exec_manifest(exec_manifest_of(command_key, {first})).ok());
  CHECK(same_manifest(remote_manifest(*writer, command_key), exec_manifest_of(command_key, {first})));
  REQUIRE(writer->store_exec_manifest(exec_manifest_of(command_key, {second})).ok());
  CHECK(entries_of(remote_manifest(*writer, command_key)) == std::vector<std::string>{second, first});
  // The same build again changes nothing.
  REQUIRE(writer->store_exec_manifest(exec_manifest_of(command_key, {first})).ok());
  CHECK(entries_of(remote_manifest(*writer, command_key)) == std::vector<std::string>{first, second});

  auto read_only = open_manifest_remote(spec + "|read-only");
  auto refused = read_only->store_exec_manifest(exec_manifest_of(command_key, {std::string(64, '3')}));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == ErrorCode::usage);
  CHECK(entries_of(remote_manifest(*read_only, command_key)).size() == 2);
}

// opcache_http_requests_total of the manifest routes with `method` and
// `status` in the /metrics text `metrics` (0 when it has no such series).
long requests_counted(const std::string& metrics, const std::string& method, int status) {
  const std::string series = "opcache_http_requests_total{route=\"manifest\",method=\"" + method + "\",status=\"" +
                             std::to_string(status) + "\"";
  const auto at = metrics.find(series);
  if (at == std::string::npos) {
    return 0;
  }
  const auto end = metrics.find('\n', at);
  const auto space = metrics.rfind(' ', end);
  return std::stol(metrics.substr(space + 1, end - space - 1));
}

}  // namespace

TEST_CASE("remote::exec manifests fetch_exec_manifests merges the remotes' (earlier first) and ignores a corrupt one") {
  ManifestTeamServer server;
  TempDir temp;
  const fs::path share = temp / "share";
  const auto command_key = made_up_command_key("lookup");
  const std::string on_server(64, 'a');
  const std::string on_share(64, 'b');
  const std::string on_both(64, 'c');
  {
    auto options = remote::parse_remote_spec(server.url(), "test").value();
    options.token = k_write_token;
    auto writer = remote::open_remote(options, base::process_environment()).value();
    REQUIRE(writer->store_exec_manifest(exec_manifest_of(command_key, {on_server, on_both})).ok());
  }
  auto shared = open_manifest_remote("file://" + share.string());
  REQUIRE(shared->store_exec_manifest(exec_manifest_of(command_key, {on_share, on_both})).ok());

  ExecStore local(temp / "cache");
  auto set = open_manifest_remotes(*local, {server.url(), "file://" + share.string()});
  auto merged = set->fetch_exec_manifests(command_key);
  REQUIRE(merged.ok());
  REQUIRE(merged->has_value());
  CHECK((*merged)->command_key == command_key);
  CHECK(entries_of(**merged) == std::vector<std::string>{on_server, on_both, on_share});
  // Nobody has one for another command: none, and no warning.
  auto none = set->fetch_exec_manifests(made_up_command_key("nobody's"));
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  CHECK(local.warnings.all().empty());

  // The share's file is damaged: reported, ignored, the server's still used.
  const fs::path file = share / "v1" / "manifests" / command_key.substr(0, 2) / (command_key + ".json");
  REQUIRE(fs::exists(file));
  write_text(file, "{\"format\": \"opcache-exec-manifest\", \"version\": 1, \"command_key\": 7}");
  auto without_share = set->fetch_exec_manifests(command_key);
  REQUIRE(without_share.ok());
  REQUIRE(without_share->has_value());
  CHECK(entries_of(**without_share) == std::vector<std::string>{on_server, on_both});
  CHECK(local.warnings.contains("ignored the exec manifest of " + command_key + " from remote file://"));
  CHECK(local->stats().value().counters.at("remote_corrupt") == 1);
  // A manifest of another command key where this one's should be: the same.
  const auto stranger = made_up_command_key("stranger");
  write_text(file, store::exec_manifest_to_json(exec_manifest_of(stranger, {on_share})));
  auto mislabelled = set->fetch_exec_manifests(command_key);
  REQUIRE(mislabelled.ok());
  CHECK(entries_of(mislabelled->value()) == std::vector<std::string>{on_server, on_both});
  CHECK(local.warnings.contains("is the manifest of " + stranger));
}

TEST_CASE("remote::exec manifests a queued manifest reaches the server after the entry queued before it") {
  ManifestTeamServer server;
  // A proxy in front of the server that remembers the order of the requests.
  FaultServer proxy([&server](const FaultRequest& request) { return forward_to(request, server.url()); });
  TempDir temp;
  ExecStore local(temp / "cache");
  const auto built = store_exec_entry(*local, temp / "src", 1, "int x = 1;");
  {
    auto set = open_manifest_remotes(*local, {proxy.url() + "|upload"});
    set->enqueue_upload(built.entry_key);
    set->enqueue_exec_manifest_upload(built.command_key);
    set->enqueue_exec_manifest_upload("not a key");  // ignored
  }  // the uploader's last pass sends both before the set is gone
  CHECK(server.has_entry(built.entry_key));
  const auto kept = server.manifest(built.command_key);
  REQUIRE(kept.has_value());
  CHECK(entries_of(*kept) == std::vector<std::string>{built.entry_key});
  std::vector<std::string> puts;
  for (const auto& request : proxy.requests()) {
    if (request.method == "PUT") {
      puts.push_back(request.target);
    }
  }
  CHECK(puts == std::vector<std::string>{"/v1/entries/" + built.entry_key, "/v1/manifests/" + built.command_key});
  std::vector<std::string> markers;  // left in the queue, but for its lock file
  for (const auto& item : fs::recursive_directory_iterator(temp / "cache" / "outbox")) {
    if (item.is_regular_file() && item.path().filename() != ".lock") {
      markers.push_back(item.path().filename().string());
    }
  }
  CHECK(markers.empty());
  CHECK(local.warnings.all().empty());
}

TEST_CASE("remote::exec manifests the uploader reads the manifest when it sends it, and skips a read-only remote") {
  ManifestTeamServer server;
  TempDir temp;
  ExecStore local(temp / "cache");
  const auto first = store_exec_entry(*local, temp / "src", 2, "variant one");
  const auto second = store_exec_entry(*local, temp / "src", 2, "variant two");
  REQUIRE(first.command_key == second.command_key);
  {
    // The read-only remote takes no upload even when asked to.
    auto set = open_manifest_remotes(*local, {server.url() + "|upload|read-only"});
    set->enqueue_exec_manifest_upload(first.command_key);
  }
  CHECK_FALSE(server.manifest(first.command_key).has_value());
  {
    auto set = open_manifest_remotes(*local, {server.url() + "|upload"});
    set->enqueue_exec_manifest_upload(first.command_key);
  }
  // One upload, of the manifest as it is when sent: both builds, the newer first.
  const auto kept = server.manifest(first.command_key);
  REQUIRE(kept.has_value());
  CHECK(entries_of(*kept) == std::vector<std::string>{second.entry_key, first.entry_key});
}

TEST_CASE("remote::exec manifests a server older than revision 7 (404 not_found) has none and takes none") {
  FaultServer old_server([](const FaultRequest&) {
    return FaultReply::status(404, "{\"error\":\"not_found\",\"message\":\"no such endpoint\"}",
                              "Content-Type: application/json\r\n");
  });
  TempDir temp;
  ExecStore local(temp / "cache");
  auto set = open_manifest_remotes(*local, {old_server.url()});
  const auto command_key = made_up_command_key("old server");
  auto fetched = set->fetch_exec_manifests(command_key);
  REQUIRE(fetched.ok());
  CHECK_FALSE(fetched->has_value());
  CHECK(set->remotes().front().breaker->allows());
  auto options = remote::parse_remote_spec(old_server.url(), "test").value();
  auto old_remote = remote::open_remote(options, base::process_environment()).value();
  CHECK(old_remote->store_exec_manifest(exec_manifest_of(command_key, {std::string(64, 'e')})).ok());
  CHECK(local.warnings.all().empty());
}

TEST_CASE("remote::exec manifests file:// keeps them under v1/manifests, merged, and replaces a damaged one") {
  TempDir temp;
  const fs::path share = temp / "share";
  check_manifest_round_trip("file://" + share.string());
  auto writer = open_manifest_remote("file://" + share.string());
  const auto command_key = made_up_command_key("damaged");
  const fs::path file = share / "v1" / "manifests" / command_key.substr(0, 2) / (command_key + ".json");
  write_text(file, "not json");
  REQUIRE(writer->store_exec_manifest(exec_manifest_of(command_key, {std::string(64, '4')})).ok());
  CHECK(entries_of(remote_manifest(*writer, command_key)) == std::vector<std::string>{std::string(64, '4')});
  CHECK(count_files(share / "tmp") == 0);
}

TEST_CASE("remote::exec manifests s3:// keeps them as v1/manifests/<key>.json, merged (moto)") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  use_moto_test_credentials();
  const std::string url = "s3://opcache-exec-manifests/team?endpoint=" + MotoServer::shared().endpoint();
  {
    // The bucket, as an operator (or the server) creates it.
    auto location = remote::parse_s3_url(url);
    REQUIRE(location.ok());
    auto credentials = remote::load_s3_credentials(base::process_environment());
    REQUIRE(credentials.ok());
    remote::S3Client client(*location, *credentials);
    REQUIRE(client.create_bucket_if_missing().ok());
    check_manifest_round_trip(url);
    const auto command_key = made_up_command_key("round trip " + url);
    auto object = client.head("v1/manifests/" + command_key + ".json");
    REQUIRE(object.ok());
    CHECK(object->has_value());
  }
}

TEST_CASE("remote::exec manifests push sends and pull merges the manifests of the exec entries they move") {
  ManifestTeamServer server;
  TempDir temp;
  ExecStore from(temp / "from");
  const auto one = store_exec_entry(*from, temp / "src", 3, "first");
  const auto two = store_exec_entry(*from, temp / "src", 3, "second");
  const auto other = store_exec_entry(*from, temp / "src", 4, "other command");
  const auto plain = make_cheap_kernel(temp / "plain", 1);  // not an exec entry: no manifest
  {
    auto file = from->create_temp();
    REQUIRE(file.ok());
    REQUIRE(file->write(plain.bundle.data(), plain.bundle.size()).ok());
    REQUIRE(from->adopt(std::move(*file), plain.key, ReplacePolicy::keep_existing,
                        base::Durability::deferred, store::Provenance{})
                .ok());
  }
  auto from_set = open_manifest_remotes(*from, {server.url()});
  const remote::Remote& team = from_set->remotes().front();
  // Push the first entry only: its manifest goes with it (both builds, as kept locally).
  remote::TransferRequest first_push;
  first_push.keys = {one.entry_key};
  auto pushed = remote::push(*from, team, first_push);
  REQUIRE_MESSAGE(pushed.ok(), (pushed.ok() ? "" : pushed.error().message()));
  CHECK(pushed->transferred == 1);
  CHECK(pushed->manifests == 1);
  CHECK(pushed->failed == 0);
  REQUIRE(server.manifest(one.command_key).has_value());
  CHECK(entries_of(*server.manifest(one.command_key)) == std::vector<std::string>{two.entry_key, one.entry_key});
  CHECK_FALSE(server.manifest(other.command_key).has_value());
  // Everything: the present entry's manifest is sent again, each command key once.
  auto all = remote::push(*from, team, remote::TransferRequest{});
  REQUIRE(all.ok());
  CHECK(all->transferred == 3);
  CHECK(all->skipped == 1);
  CHECK(all->manifests == 2);
  REQUIRE(server.manifest(other.command_key).has_value());

  // Another machine pulls everything: the entries, then the manifests of their commands.
  ExecStore to(temp / "to");
  // It already knows a build of command 3 the server does not.
  const auto local_only = exec_manifest_of(one.command_key, {std::string(64, 'f')});
  REQUIRE(store::merge_into_exec_manifest(to->layout(), local_only).ok());
  auto to_set = open_manifest_remotes(*to, {server.url()});
  auto pulled = remote::pull(*to, to_set->remotes().front(), remote::TransferRequest{});
  REQUIRE_MESSAGE(pulled.ok(), (pulled.ok() ? "" : pulled.error().message()));
  CHECK(pulled->transferred == 4);
  CHECK(pulled->manifests == 2);
  CHECK(pulled->failed == 0);
  auto merged = store::read_exec_manifest(to->layout(), one.command_key);
  REQUIRE(merged.ok());
  REQUIRE(merged->has_value());
  CHECK(entries_of(**merged) == std::vector<std::string>{two.entry_key, one.entry_key, std::string(64, 'f')});
  auto other_here = store::read_exec_manifest(to->layout(), other.command_key);
  REQUIRE(other_here.ok());
  REQUIRE(other_here->has_value());
  CHECK(entries_of(**other_here) == std::vector<std::string>{other.entry_key});
  // Both manifests came in one POST /v1/manifests/fetch (API v1 revision 10), none by its own GET:
  // the GETs the server counted are this test's 3 reads above (and 1 of them a 404).
  const auto metrics = http_request("GET", server.url() + "/metrics",
                                    {std::string("Authorization: Bearer ") + k_read_token}).body;
  CHECK(requests_counted(metrics, "POST", 200) == 1);
  CHECK(requests_counted(metrics, "GET", 200) == 3);
  // A second pull moves no entry, so no manifest either.
  auto again = remote::pull(*to, to_set->remotes().front(), remote::TransferRequest{});
  REQUIRE(again.ok());
  CHECK(again->transferred == 0);
  CHECK(again->manifests == 0);
}

TEST_CASE("remote::exec manifests push and pull carry them through a file:// remote too") {
  TempDir temp;
  const std::string share = "file://" + (temp / "share").string();
  ExecStore from(temp / "from");
  const auto built = store_exec_entry(*from, temp / "src", 5, "file remote");
  auto from_set = open_manifest_remotes(*from, {share});
  auto pushed = remote::push(*from, from_set->remotes().front(), remote::TransferRequest{});
  REQUIRE(pushed.ok());
  CHECK(pushed->manifests == 1);
  ExecStore to(temp / "to");
  auto to_set = open_manifest_remotes(*to, {share});
  remote::TransferRequest keys;
  keys.keys = {built.entry_key};  // a file:// remote lists no scenario: by key
  auto pulled = remote::pull(*to, to_set->remotes().front(), keys);
  REQUIRE(pulled.ok());
  CHECK(pulled->transferred == 1);
  CHECK(pulled->manifests == 1);
  auto here = store::read_exec_manifest(to->layout(), built.command_key);
  REQUIRE(here.ok());
  REQUIRE(here->has_value());
  CHECK(same_manifest(**here, built.manifest));
}

}  // namespace opcache::test::exec_manifest_travel
