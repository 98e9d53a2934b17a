// RemoteSet::team_remote (remote/remote_set.cpp) leaves a read-only remote out
// through RemoteStore alone: a read-only remote lends no build leases
// (RemoteStore::leases() is null), the one place that refuses its writes.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/environment.hpp"
#include "remote/remote_config.hpp"
#include "remote/remote_set.hpp"
#include "tests/support/exec_manifests.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test::issue37_team_remote {

// The set of the remotes `specs` over `local` (http remotes open without I/O).
std::unique_ptr<remote::RemoteSet> open_specs(store::LocalStore& local, const std::vector<std::string>& specs) {
  std::vector<remote::RemoteOptions> options;
  for (const auto& spec : specs) {
    auto parsed = remote::parse_remote_spec(spec, "test");
    REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message()));
    options.push_back(*parsed);
  }
  auto set = remote::RemoteSet::open(options, local, base::process_environment());
  REQUIRE_MESSAGE(set.ok(), (set.ok() ? "" : set.error().message()));
  return std::move(set).value();
}

}  // namespace opcache::test::issue37_team_remote

TEST_CASE("remote::RemoteSet::team_remote skips a read-only upload remote, whose store lends no leases") {
  using opcache::test::issue37_team_remote::open_specs;
  opcache::test::TempDir temp;
  opcache::test::ExecStore local(temp / "cache");
  const std::string share = "file://" + (temp / "share").string();
  {
    auto set = open_specs(*local, {"http://127.0.0.1:9|upload|read-only", share + "|upload", "http://127.0.0.1:10|upload"});
    REQUIRE(set->remotes().size() == 3);
    CHECK(set->remotes()[0].store->leases() == nullptr);  // read-only: RemoteStore lends none
    CHECK(set->remotes()[1].store->leases() == nullptr);  // a directory has no server
    CHECK(set->remotes()[2].store->leases() != nullptr);
    const auto* team = set->team_remote();
    REQUIRE(team != nullptr);
    CHECK(team == &set->remotes()[2]);
  }
  {
    auto set = open_specs(*local, {"http://127.0.0.1:9|upload|read-only"});
    CHECK(set->team_remote() == nullptr);
  }
  {
    auto set = open_specs(*local, {"http://127.0.0.1:9"});  // writable, but not an upload remote
    CHECK(set->remotes()[0].store->leases() != nullptr);
    CHECK(set->team_remote() == nullptr);
  }
}
