#include "cli/remote_stats.hpp"

#include <cstdio>
#include <functional>

#include "base/utc_time.hpp"

namespace opcache::cli {

namespace {

using json = nlohmann::json;

constexpr int k_misses_shown = 5;

// The integer `field` of `object`, or nullopt when it is null or absent
// (storage figures an S3 server cannot tell).
std::optional<std::int64_t> integer_field(const json& object, const char* field) {
  auto it = object.find(field);
  return it != object.end() && it->is_number() ? std::optional<std::int64_t>(it->get<std::int64_t>()) : std::nullopt;
}

std::string count_text(const json& object, const char* field) {
  auto value = integer_field(object, field);
  return value ? std::to_string(*value) : "n/a";
}

// "1 request", "3 requests" ("n/a requests" when the server did not tell).
std::string counted(const json& object, const char* field, const std::string& noun) {
  auto value = integer_field(object, field);
  return count_text(object, field) + " " + noun + (value && *value == 1 ? "" : "s");
}

std::string bytes_text(const json& object, const char* field) {
  auto value = integer_field(object, field);
  return value ? format_bytes(*value) : "n/a";
}

std::optional<double> rate_field(const json& object) {
  auto it = object.find("hit_rate");
  return it != object.end() && it->is_number() ? std::optional<double>(it->get<double>()) : std::nullopt;
}

// "7 / 3 (hit rate 70.0 %)", as in `opcache stats`.
std::string hits_text(const json& counts) {
  return count_text(counts, "hits") + " / " + count_text(counts, "misses") + " (hit rate " +
         format_hit_rate(rate_field(counts)) + ")";
}

// "2026-11-24 07:00 UTC" of Unix milliseconds.
std::string utc_time(std::int64_t ms) { return base::utc_text(ms, "%Y-%m-%d %H:%M UTC"); }

std::string window_text(const json& summary) {
  const auto window = summary.value("window", std::string());
  const std::string name = window == "hour"  ? "last hour"
                           : window == "day" ? "last day"
                           : window == "30d" ? "last 30 days"
                                             : window;
  auto from = integer_field(summary, "from_ms");
  auto to = integer_field(summary, "to_ms");
  return from && to ? name + " (" + utc_time(*from) + " to " + utc_time(*to) + ")" : name;
}

// An op type as the server names it; null is a lookup that did not say.
std::string op_type_text(const json& value) {
  return value.is_string() ? value.get<std::string>() : "(unknown)";
}

// "single/train/8.0/Ascend910B1", as `opcache ls` shows scenarios; the JSON
// itself when it is not a scenario this client can read.
std::string scenario_text(const json& value) {
  if (!value.is_object()) {
    return "(unknown scenario)";
  }
  // A stored scenario is shown as it is: nothing of this machine is detected into it.
  auto parsed = parse_scenario_json(value.dump(), "the server's scenario", AutoFields::keep);
  return parsed ? scenario_summary(*parsed) : value.dump();
}

std::string storage_text(const json& storage) {
  const auto kind = storage.value("kind", std::string("?"));
  if (!integer_field(storage, "entries")) {
    return "n/a (" + kind + " storage cannot tell)";
  }
  std::string text = count_text(storage, "entries") + " (" + bytes_text(storage, "bytes");
  if (integer_field(storage, "limit_bytes")) {
    text += " of " + bytes_text(storage, "limit_bytes") + " limit";
  }
  return text + ", " + kind + " storage)";
}

void print_summary(const Context& context, const std::string& server, const json& summary) {
  auto row = [&context](const std::string& label, const std::string& value) {
    context.print_text(format_row(label, value));
  };
  const json& storage = summary.contains("storage") ? summary["storage"] : json::object();
  row("server", server);
  row("window", window_text(summary));
  row("requests", count_text(summary, "requests") + " (" + counted(summary, "lookups", "lookup") + ")");
  row("hits / misses", hits_text(summary));
  row("bytes served", bytes_text(summary, "bytes_served"));
  row("uploads", count_text(summary, "uploads") + " (" + bytes_text(summary, "bytes_uploaded") + ")");
  row("compile time saved", format_duration_ms(integer_field(summary, "compile_ms_saved").value_or(0)));
  row("entries", storage_text(storage));
  row("evictions", count_text(storage, "evictions"));
  if (summary.contains("all_time") && summary["all_time"].is_object()) {
    const json& all_time = summary["all_time"];
    auto since = integer_field(all_time, "since_ms");
    row("all time", "hits / misses " + hits_text(all_time) + ", compile time saved " +
                        format_duration_ms(integer_field(all_time, "compile_ms_saved").value_or(0)) +
                        (since ? ", since " + utc_time(*since) : ""));
  }
  const json& replica = summary.contains("replica") ? summary["replica"] : json::object();
  if (replica.value("shared_storage", false) && !replica.value("history_persisted", false)) {
    // A server of revision 8 or older over S3: its figures were its own.
    row("replica", "these figures are this replica's own traffic (other replicas share the storage)");
  }
}

// A titled list of the items of `document[field]` (an array), one line each, or "(none)".
void print_list(const Context& context, const std::string& title, const json& document, const char* field,
                const std::function<std::string(const json&)>& line) {
  context.print_text(title);
  auto items = document.find(field);
  if (items == document.end() || !items->is_array() || items->empty()) {
    context.print_text("  (none)");
    return;
  }
  for (const auto& item : *items) {
    context.print_text("  " + line(item));
  }
}

void print_top_op_types(const Context& context, const json& summary) {
  print_list(context, "top op types (hits)", summary, "top_op_types", [](const json& item) {
    return format_row(op_type_text(item.value("op_type", json())), count_text(item, "hits"));
  });
}

void print_misses(const Context& context, const json& misses) {
  print_list(context, "what to pre-build next (most requested misses, still not stored)", misses, "groups",
             [](const json& group) {
               return format_row(op_type_text(group.value("op_type", json())),
                                 scenario_text(group.value("scenario", json())) + ": " +
                                     counted(group, "requests", "request") + " from " +
                                     counted(group, "clients", "client") + ", " + counted(group, "keys", "key"));
             });
}

}  // namespace

int run_remote_stats(const Context& context, const std::string& window) {
  const auto remotes = context.options.store_config().remotes;
  if (remotes.size() != 1) {
    return context.fail(
        Error::usage("opcache stats --remote takes one server URL, not " + std::to_string(remotes.size())));
  }
  if (!remote_has_server(remotes.front())) {
    return context.fail(Error::usage("opcache stats --remote needs the http(s) URL of an opcache serve; \"" +
                                     remotes.front().substr(0, remotes.front().find('|')) +
                                     "\" has no server to ask (s3:// and file:// remotes are plain storage)"));
  }
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  Store::ServerStatsOptions options;
  options.window = window;
  options.misses_limit = k_misses_shown;
  auto stats = store->server_stats(options);
  if (!stats) {
    return context.fail(stats.error());
  }
  // Both bodies were checked to be JSON objects.
  const auto summary = json::parse(stats->summary_json);
  const auto misses = json::parse(stats->misses_json);
  if (context.options.json) {
    context.print_json({{"summary", summary}, {"misses", misses}});
    return k_exit_ok;
  }
  print_summary(context, stats->remote, summary);
  print_top_op_types(context, summary);
  print_misses(context, misses);
  return k_exit_ok;
}

}  // namespace opcache::cli
