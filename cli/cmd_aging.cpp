// opcache gc / pin / unpin / clear: keeping the store's size in bounds.
#include "cli/context.hpp"

namespace opcache::cli {

namespace {

int run_gc(const Context& context, bool dry_run) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto report = store->gc(dry_run);
  if (!report) {
    return context.fail(report.error());
  }
  if (context.options.json) {
    nlohmann::json removed = nlohmann::json::array();
    for (const auto& entry : report->removed) {
      removed.push_back(entry_to_json(entry));
    }
    context.print_json({{"dry_run", report->dry_run},
                        {"aging_enabled", report->aging_enabled},
                        {"limit_bytes", report->limit_bytes},
                        {"target_bytes", report->target_bytes},
                        {"min_idle_ms", report->min_idle_ms},
                        {"entries_before", report->entries_before},
                        {"bytes_before", report->bytes_before},
                        {"entries_removed", report->entries_removed},
                        {"bytes_removed", report->bytes_removed},
                        {"bytes_after", report->bytes_after},
                        {"stopped_because", report->stopped_because},
                        {"removed", removed}});
    return k_exit_ok;
  }
  const char* verb = report->dry_run ? "would remove" : "removed";
  for (const auto& entry : report->removed) {
    context.print_text(std::string(verb) + " " + entry.key + " " + entry.op_type + " " +
                       format_bytes(entry.bundle_size));
  }
  if (report->aging_enabled) {
    context.print_text("store " + format_bytes(report->bytes_before) + " in " + std::to_string(report->entries_before) +
                       " entries, limit " + format_bytes(report->limit_bytes) + ", keep " +
                       format_bytes(report->target_bytes) + "; " + verb + " " +
                       std::to_string(report->entries_removed) + " entries (" + format_bytes(report->bytes_removed) +
                       "), now " + format_bytes(report->bytes_after) + ": " + report->stopped_because);
  } else {
    context.print_text(report->stopped_because);
  }
  return k_exit_ok;
}

int run_pin(const Context& context, const std::vector<std::string>& keys, bool pinned) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  nlohmann::json changed = nlohmann::json::array();
  nlohmann::json absent = nlohmann::json::array();
  for (const auto& key : keys) {
    auto result = store->set_pinned(key, pinned);
    if (!result) {
      return context.fail(result.error());
    }
    (*result ? changed : absent).push_back(key);
    if (*result) {
      context.print_text((pinned ? "pinned " : "unpinned ") + key);
    } else {
      context.note("not found: " + key);
    }
  }
  if (context.options.json) {
    context.print_json({{pinned ? "pinned" : "unpinned", changed}, {"absent", absent}});
  }
  return absent.empty() ? k_exit_ok : k_exit_not_found;
}

int run_clear(const Context& context) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto report = store->clear();
  if (!report) {
    return context.fail(report.error());
  }
  if (context.options.json) {
    context.print_json({{"entries_removed", report->entries_removed}, {"bytes_removed", report->bytes_removed}});
  } else {
    context.print_text("removed " + std::to_string(report->entries_removed) + " entries (" +
                       format_bytes(report->bytes_removed) + ")");
  }
  return k_exit_ok;
}

}  // namespace

std::vector<Command> register_aging_commands(CLI::App& app, Context& context) {
  auto dry_run = std::make_shared<bool>(false);
  auto* gc = app.add_subcommand("gc", "Age the store now: remove least recently used idle entries (CANN rules)");
  gc->footer(
      "When the store is larger than max_op_cache_size, entries idle for at least --min-idle seconds\n"
      "(default 1800) are removed, least recently used first, until the store is at most\n"
      "max_op_cache_size × remain_cache_size_ratio. Pinned entries are never removed. Aging also runs\n"
      "automatically after writes. `opcache config` shows the effective limits.");
  gc->add_flag("--dry-run,-n", *dry_run, "Only report what would be removed");

  auto pin_keys = std::make_shared<std::vector<std::string>>();
  auto* pin = app.add_subcommand("pin", "Pin entries so aging never removes them");
  pin->add_option("keys", *pin_keys, "Keys to pin")->required();
  auto unpin_keys = std::make_shared<std::vector<std::string>>();
  auto* unpin = app.add_subcommand("unpin", "Let aging remove entries again");
  unpin->add_option("keys", *unpin_keys, "Keys to unpin")->required();

  auto* clear = app.add_subcommand("clear", "Remove every entry (safe while other processes use the store)");

  return {{gc, [&context, dry_run] { return run_gc(context, *dry_run); }},
          {pin, [&context, pin_keys] { return run_pin(context, *pin_keys, true); }},
          {unpin, [&context, unpin_keys] { return run_pin(context, *unpin_keys, false); }},
          {clear, [&context] { return run_clear(context); }}};
}

}  // namespace opcache::cli
