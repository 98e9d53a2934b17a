#include "tests/support/flight_team.hpp"

#include <sstream>
#include <thread>

#include <doctest/doctest.h>

#include "tests/support/files.hpp"
#include "tests/support/process.hpp"
#include "tests/support/single_flight.hpp"
#include "tests/support/tokens.hpp"

namespace opcache::test {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

std::string flight_build_script(double seconds, const std::string& hold_kernel_0_for) {
  std::ostringstream script;
  script << "printf '%s %s\\n' \"$1\" \"$$\" >> \"$0\"; ";
  if (!hold_kernel_0_for.empty()) {
    script << "if [ \"$1\" = 0 ]; then i=0; while [ $i -lt 1200 ] && ! curl -sf -H 'Authorization: Bearer " << k_write_token
           << "' " << hold_kernel_0_for
           << "/metrics | grep -q '^opcache_entry_waits[{ ].* [1-9]\\|^opcache_entry_waits [1-9]'; do sleep 0.1; "
              "i=$((i+1)); done; fi; ";
  }
  script << "sleep " << seconds << "; printf 'kernel %s built by %s\\n' \"$1\" \"$$\" > \"$2/kernel.o\"";
  return script.str();
}

FlightTeam::FlightTeam(int kernels) {
  write_text(dir / "tokens", token_line(k_write_token, "team", "read,write"));
  write_text(dir / "token", k_write_token);
  for (int i = 0; i < kernels; ++i) {
    descs.push_back(dir / ("kernel" + std::to_string(i) + ".desc.json"));
    write_text(descs.back(), descriptor_for("TeamOp", i));
  }
}

ServerProcess& FlightTeam::start_server(const fs::path& storage, std::vector<std::string> args) {
  args.insert(args.begin(), {"--tokens", (dir / "tokens").string()});
  servers.push_back(std::make_unique<ServerProcess>(storage, args));
  return *servers.back();
}

fs::path FlightTeam::cache(int machine) const { return dir / ("machine" + std::to_string(machine)); }

std::string FlightTeam::url(int machine) const {
  if (!front_url.empty()) {
    return front_url;
  }
  return servers[static_cast<std::size_t>(machine) % servers.size()]->base_url();
}

std::vector<std::string> FlightTeam::remote_args(int machine, const std::string& remote_attributes) const {
  return {"--remote", url(machine) + "|upload" + remote_attributes, "--token-file", (dir / "token").string()};
}

std::vector<std::string> FlightTeam::exec(int machine, int index, const fs::path& out, double build_seconds,
                                          std::vector<std::string> extra) const {
  if (extra.empty()) {
    extra = remote_args(machine);
  }
  return exec_argv(cache(machine), descs[static_cast<std::size_t>(index)], out, {"kernel.o"},
                   flight_build_script(build_seconds, hold_kernel_0 ? server().base_url() : ""),
                   {counter.string(), std::to_string(index), out.string()}, JsonOutput::yes, extra);
}

std::map<std::string, int> FlightTeam::builds() const {
  std::map<std::string, int> by_kernel;
  std::istringstream lines(fs::exists(counter) ? read_text(counter) : "");
  std::string kernel, pid;
  while (lines >> kernel >> pid) {
    ++by_kernel[kernel];
  }
  return by_kernel;
}

json FlightTeam::stats(int machine) const {
  auto result = run_cli({"--cache-dir", cache(machine).string(), "--no-remote", "--json", "stats"});
  return json::parse(result.out, nullptr, false);
}

json FlightTeam::status(const ServerProcess& server) const {
  return json::parse(
      http_request("GET", server.base_url() + "/v1/status", {std::string("Authorization: Bearer ") + k_write_token})
          .body,
      nullptr, false);
}

std::int64_t stats_counter(const json& stats, const std::string& name) {
  return stats.is_object() && stats["counters"].contains(name) ? stats["counters"][name].get<std::int64_t>() : 0;
}

std::int64_t run_flight(FlightTeam& team, int machines, int per_machine, double build_seconds,
                        const std::function<std::vector<std::string>(int machine)>& extra,
                        const std::function<void()>& meanwhile) {
  // One thread per process of the team, each running its execs one after
  // another (the execs are the processes that contend). Not fork(): a child
  // forked while another thread (the proxy's) holds a lock, such as the
  // sanitizer allocator's, waits for it forever.
  const auto started = Clock::now();
  const int kernels = static_cast<int>(team.descs.size());
  const auto run_one = [&](int m, int p) -> std::string {
    const int first = (m * per_machine + p) * 7 % kernels;
    for (int step = 0; step < kernels; ++step) {
      const int k = (first + step) % kernels;
      const auto out = team.dir / "out" / (std::to_string(m) + "-" + std::to_string(p)) / std::to_string(k);
      auto result = run_process(team.exec(m, k, out, build_seconds, extra(m)));
      if (result.exit_code != 0) {
        return "process " + std::to_string(m) + "-" + std::to_string(p) + ", kernel " + std::to_string(k) +
               ": exit " + std::to_string(result.exit_code) + "\n" + result.err;
      }
    }
    return "";
  };
  std::vector<std::string> failures(static_cast<std::size_t>(machines * per_machine));
  std::vector<std::jthread> processes;  // joined on the way out, a failed `meanwhile` too
  for (int m = 0; m < machines; ++m) {
    for (int p = 0; p < per_machine; ++p) {
      processes.emplace_back([&, m, p] {
        auto& failure = failures[static_cast<std::size_t>(m * per_machine + p)];
        try {
          failure = run_one(m, p);
        } catch (const std::exception& error) {
          failure = error.what();
        }
      });
    }
  }
  if (meanwhile) {
    meanwhile();
  }
  for (auto& process : processes) {
    process.join();
  }
  for (const auto& failure : failures) {
    CHECK_MESSAGE(failure.empty(), failure);
  }
  return ms_since(started);
}

std::map<int, std::set<std::string>> flight_outputs(const FlightTeam& team) {
  std::map<int, std::set<std::string>> by_kernel;
  for (const auto& process : fs::directory_iterator(team.dir / "out")) {
    for (const auto& kernel : fs::directory_iterator(process.path())) {
      by_kernel[std::stoi(kernel.path().filename().string())].insert(read_text(kernel.path() / "kernel.o"));
    }
  }
  return by_kernel;
}

pid_t start_flight_holder(FlightTeam& team, ChildGuard& guard, double build_seconds) {
  SpawnOptions own_group;
  own_group.group = ProcessGroup::own;
  const pid_t holder = spawn_background(guard, team.exec(0, 0, team.dir / "out-a", build_seconds), own_group);
  wait_until([&] { return team.builds()["0"] == 1; }, 20s, "the holder to start building");
  return holder;
}

}  // namespace opcache::test
