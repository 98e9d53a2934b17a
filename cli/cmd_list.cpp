// opcache ls / rm: browse and remove entries.
#include <ctime>

#include "base/base64.hpp"
#include "cli/context.hpp"

namespace opcache::cli {

namespace {

struct ListArgs {
  std::string scenario;
  std::string op_type;
  std::int64_t limit = -1;
  std::string after;
};

// Parses a partial scenario ("phase=train,soc=Ascend910B1") into filter fields.
Status apply_scenario_filter(const std::string& spec, ListFilter& filter) {
  std::size_t start = 0;
  while (start < spec.size()) {
    std::size_t end = spec.find(',', start);
    std::string item = spec.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? spec.size() : end + 1;
    std::size_t equals = item.find('=');
    if (equals == std::string::npos) {
      return Error::usage("--scenario filter: \"" + item + "\" is not FIELD=VALUE");
    }
    std::string field = item.substr(0, equals);
    std::string value = item.substr(equals + 1);
    if (field == "device" || field == "device_mode") {
      if (value != "single" && value != "multi") {
        return Error::usage("--scenario filter: device must be \"single\" or \"multi\", not \"" + value + "\"");
      }
      filter.device_mode = value;
    } else if (field == "phase") {
      if (value != "train" && value != "infer") {
        return Error::usage("--scenario filter: phase must be \"train\" or \"infer\", not \"" + value + "\"");
      }
      filter.phase = value;
    } else if (field == "toolchain") {
      filter.toolchain = value;
    } else if (field == "soc") {
      filter.soc = value;
    } else {
      return Error::usage("--scenario filter: unknown field \"" + field +
                          "\" (allowed: device, phase, toolchain, soc)");
    }
  }
  return {};
}

std::string format_age(std::int64_t then_ms) {
  std::int64_t seconds = (static_cast<std::int64_t>(std::time(nullptr)) * 1000 - then_ms) / 1000;
  if (seconds < 0) {
    seconds = 0;
  }
  if (seconds < 120) {
    return std::to_string(seconds) + "s";
  }
  if (seconds < 7200) {
    return std::to_string(seconds / 60) + "m";
  }
  if (seconds < 172800) {
    return std::to_string(seconds / 3600) + "h";
  }
  return std::to_string(seconds / 86400) + "d";
}

// An entry's signatures for `ls --json`: public key and signature in base64,
// and the name of the key when it is trusted.
nlohmann::json signatures_to_json(const Entry& entry, const Store& store) {
  nlohmann::json signatures = nlohmann::json::array();
  for (const auto& signature : entry.signatures) {
    nlohmann::json item = {{"public_key", base::base64_encode(signature.public_key)},
                           {"signature", base::base64_encode(signature.signature)}};
    if (auto name = store.trusted_name(signature.public_key); !name.empty()) {
      item["name"] = name;
    }
    signatures.push_back(std::move(item));
  }
  return signatures;
}

int run_list(const Context& context, const ListArgs& args) {
  ListFilter filter;
  filter.op_type = args.op_type;
  filter.limit = args.limit;
  filter.after_key = args.after;
  if (auto status = apply_scenario_filter(args.scenario, filter); !status) {
    return context.fail(status.error());
  }
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto entries = store->list(filter);
  if (!entries) {
    return context.fail(entries.error());
  }
  if (context.options.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& entry : *entries) {
      auto item = entry_to_json(entry);
      item["signatures"] = signatures_to_json(entry, *store);
      list.push_back(std::move(item));
    }
    context.print_json({{"entries", list}, {"count", entries->size()}});
    return k_exit_ok;
  }
  char line[512];
  std::snprintf(line, sizeof line, "%-64s  %-20s  %-36s  %10s  %6s  %5s", "KEY", "OP TYPE", "SCENARIO", "SIZE",
                "HITS", "USED");
  context.print_text(line);
  for (const auto& entry : *entries) {
    std::string scenario = entry.device_mode + "/" + entry.phase + "/" + entry.toolchain + "/" + entry.soc;
    std::snprintf(line, sizeof line, "%-64s  %-20s  %-36s  %10s  %6lld  %5s%s", entry.key.c_str(),
                  entry.op_type.c_str(), scenario.c_str(), format_bytes(entry.bundle_size).c_str(),
                  static_cast<long long>(entry.hits), format_age(entry.last_access_ms).c_str(),
                  entry.pinned ? "  pinned" : "");
    context.print_text(line);
  }
  context.print_text(std::to_string(entries->size()) + " entries");
  return k_exit_ok;
}

int run_remove(const Context& context, const std::vector<std::string>& keys) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  nlohmann::json removed = nlohmann::json::array();
  nlohmann::json absent = nlohmann::json::array();
  for (const auto& key : keys) {
    auto result = store->remove(key);
    if (!result) {
      return context.fail(result.error());
    }
    (*result ? removed : absent).push_back(key);
    if (*result) {
      context.print_text("removed " + key);
    } else {
      context.note("not found: " + key);
    }
  }
  if (context.options.json) {
    context.print_json({{"removed", removed}, {"absent", absent}});
  }
  return absent.empty() ? k_exit_ok : k_exit_not_found;
}

}  // namespace

std::vector<Command> register_list_commands(CLI::App& app, Context& context) {
  auto list_args = std::make_shared<ListArgs>();
  auto* list = app.add_subcommand("ls", "List entries, optionally filtered by scenario fields or op type");
  list->footer("Example:\n  opcache ls --scenario phase=train,soc=Ascend910B1 --op-type MatMul");
  list->add_option("--scenario,-s", list_args->scenario,
                   "Only entries whose scenario has these FIELD=VALUE pairs (any of device, phase, toolchain, soc)");
  list->add_option("--op-type,-t", list_args->op_type, "Only entries of this op type");
  list->add_option("--limit,-n", list_args->limit, "At most this many entries")->check(integer_in(0));
  list->add_option("--after", list_args->after, "Only keys after this one (pagination)");

  auto keys = std::make_shared<std::vector<std::string>>();
  auto* remove = app.add_subcommand("rm", "Remove entries by key");
  remove->footer("Exit status 1 if any key was not present.");
  remove->add_option("keys", *keys, "Keys to remove")->required();

  return {{list, [&context, list_args] { return run_list(context, *list_args); }},
          {remove, [&context, keys] { return run_remove(context, *keys); }}};
}

}  // namespace opcache::cli
