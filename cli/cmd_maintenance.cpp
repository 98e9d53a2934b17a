// opcache stats / verify: how the store is doing, and whether it is sound.
#include "cli/context.hpp"
#include "cli/remote_stats.hpp"

namespace opcache::cli {

namespace {

std::int64_t counter_value(const StoreStats& stats, const char* name) {
  auto it = stats.counters.find(name);
  return it == stats.counters.end() ? 0 : it->second;
}

// --window: which summary of a server (stats --remote).
struct StatsArgs {
  std::string window = "day";
  bool window_given = false;
};

int run_stats(const Context& context, const StatsArgs& args) {
  if (!context.options.store_config().remotes.empty()) {
    return run_remote_stats(context, args.window);
  }
  if (args.window_given) {
    return context.fail(Error::usage("--window is a window of a server's statistics: give --remote URL too"));
  }
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto stats = store->stats();
  if (!stats) {
    return context.fail(stats.error());
  }
  const auto& totals = stats->totals;
  std::int64_t hits = counter_value(*stats, "hits");
  std::int64_t misses = counter_value(*stats, "misses");
  if (context.options.json) {
    context.print_json({{"cache_dir", store->root().string()},
                        {"entries", totals.entries},
                        {"bundle_bytes", totals.bundle_bytes},
                        {"raw_bytes", totals.raw_bytes},
                        {"pinned", totals.pinned},
                        {"counters", stats->counters}});
    return k_exit_ok;
  }
  auto row = [&context](const std::string& label, const std::string& value) {
    context.print_text(format_row(label, value));
  };
  row("cache directory", store->root().string());
  row("entries", std::to_string(totals.entries) + (totals.pinned ? " (" + std::to_string(totals.pinned) + " pinned)" : ""));
  row("size on disk", format_bytes(totals.bundle_bytes) + " (" + format_bytes(totals.raw_bytes) + " uncompressed)");
  const auto rate =
      hits + misses > 0 ? std::optional<double>(static_cast<double>(hits) / (hits + misses)) : std::nullopt;
  row("hits / misses",
      std::to_string(hits) + " / " + std::to_string(misses) + " (hit rate " + format_hit_rate(rate) + ")");
  row("stores", std::to_string(counter_value(*stats, "stores")) + " (already present: " +
                    std::to_string(counter_value(*stats, "already_present")) + ")");
  row("evictions", std::to_string(counter_value(*stats, "evictions")));
  row("removals", std::to_string(counter_value(*stats, "removals")));
  row("bytes stored / served", format_bytes(counter_value(*stats, "bytes_stored")) + " / " +
                                   format_bytes(counter_value(*stats, "bytes_served")));
  row("corrupt / missing", std::to_string(counter_value(*stats, "corrupt_entries")) + " / " +
                               std::to_string(counter_value(*stats, "missing_objects")) + " (dropped on read)");
  row("refused (untrusted)", std::to_string(counter_value(*stats, "refused_untrusted")) +
                                 " (require_signature=" + store->signature_requirement() + ")");
  row("team single flight", std::to_string(counter_value(*stats, "team_builds")) + " built here (" +
                                std::to_string(counter_value(*stats, "team_takeovers")) + " taken over), " +
                                std::to_string(counter_value(*stats, "team_waits")) + " from other machines (" +
                                format_duration_ms(counter_value(*stats, "team_wait_ms")) + " waited)");
  row("compile time saved", format_duration_ms(counter_value(*stats, "compile_ms_saved")));
  return k_exit_ok;
}

int run_verify(const Context& context, bool repair) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto report = store->verify(repair);
  if (!report) {
    return context.fail(report.error());
  }
  bool unrepaired = false;
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& problem : report->problems) {
    unrepaired = unrepaired || !problem.repaired;
    problems.push_back({{"kind", problem.kind},
                        {"subject", problem.subject},
                        {"detail", problem.detail},
                        {"repaired", problem.repaired}});
    context.print_text(problem.kind + " " + problem.subject + ": " + problem.detail +
                       (problem.repaired ? " [repaired]" : ""));
  }
  if (context.options.json) {
    context.print_json({{"entries_checked", report->entries_checked},
                        {"objects_checked", report->objects_checked},
                        {"bytes_checked", report->bytes_checked},
                        {"problems", problems},
                        {"ok", !unrepaired}});
  } else {
    context.print_text("checked " + std::to_string(report->entries_checked) + " entries (" +
                       format_bytes(report->bytes_checked) + ") and " + std::to_string(report->objects_checked) +
                       " objects: " + std::to_string(report->problems.size()) + " problems" +
                       (report->problems.empty() ? "" : (unrepaired ? (repair ? "" : "; run with --repair to fix")
                                                                    : ", all repaired")));
  }
  return unrepaired ? k_exit_integrity : k_exit_ok;
}

// verify --signatures: every entry no trusted key vouches for.
int run_verify_signatures(const Context& context) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto untrusted = store->untrusted_entries();
  if (!untrusted) {
    return context.fail(untrusted.error());
  }
  auto stats = store->stats();
  const std::int64_t entries = stats ? stats->totals.entries : 0;
  const std::string requirement = store->signature_requirement();
  const bool refused = requirement != "off" && !untrusted->empty();
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& entry : *untrusted) {
    findings.push_back(
        {{"key", entry.key}, {"op_type", entry.op_type}, {"reason", entry.reason}, {"code", entry.error_code}});
    context.print_text(entry.key + " (" + entry.op_type + "): " + entry.reason);
  }
  if (context.options.json) {
    context.print_json({{"entries_checked", entries},
                        {"untrusted", findings},
                        {"require_signature", requirement},
                        {"ok", !refused}});
  } else {
    context.print_text("checked " + std::to_string(entries) + " entries: " + std::to_string(untrusted->size()) +
                       " not signed by a trusted key (require_signature=" + requirement + ")" +
                       (refused ? "; the policy refuses them from remotes" +
                                      std::string(requirement == "all" ? " and locally" : "") +
                                      " (sign them with `opcache sign`)"
                                : ""));
  }
  return refused ? k_exit_integrity : k_exit_ok;
}

}  // namespace

std::vector<Command> register_maintenance_commands(CLI::App& app, Context& context) {
  auto* stats = app.add_subcommand("stats", "Show entries, sizes, hit rate and compile time saved");
  auto stats_args = std::make_shared<StatsArgs>();
  stats->footer(
      "Without --remote: this machine's cache. With --remote URL (an http(s) opcache serve; token from\n"
      "--token-file or OPCACHE_TOKEN): the server's statistics, what its dashboard at URL/ui/ shows: the\n"
      "summary of --window (requests, hits and misses, bytes, compile time saved, storage), the top op\n"
      "types and what to pre-build next (the most requested misses). --json prints {\"summary\",\"misses\"}\n"
      "as the server sent them. Exit status 4 when the server cannot be reached, refuses the token or is\n"
      "older than its statistics.\n\n"
      "Examples:\n  opcache stats\n  opcache stats --remote https://cache.example:8443 --token-file ci.token "
      "--window hour");
  stats->add_option("--window", stats_args->window, "With --remote: the server's last hour, day (default) or 30d")
      ->check(CLI::IsMember(k_stats_windows))
      ->each([stats_args](const std::string&) { stats_args->window_given = true; });
  auto repair = std::make_shared<bool>(false);
  auto* verify = app.add_subcommand("verify", "Check every entry against its object; find orphans and leftovers");
  auto signatures = std::make_shared<bool>(false);
  verify->footer(
      "Exit status 3 when a problem was found and not repaired. With --signatures, checks signatures instead: "
      "lists every entry that is unsigned or not signed by a trusted key (--trusted-keys), and exits 3 when "
      "require_signature is not off and any was found.");
  verify->add_flag("--repair", *repair, "Remove corrupt entries, orphan objects and stale temp files");
  verify->add_flag("--signatures", *signatures, "Check that a trusted key signed every entry")->excludes("--repair");
  return {{stats, [&context, stats_args] { return run_stats(context, *stats_args); }},
          {verify, [&context, repair, signatures] {
             return *signatures ? run_verify_signatures(context) : run_verify(context, *repair);
           }}};
}

}  // namespace opcache::cli
