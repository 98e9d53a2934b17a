// opcache get / has: read entries back.
#include <optional>
#include <utility>

#include "cli/context.hpp"
#include "cli/miss_hint.hpp"

namespace opcache::cli {

namespace {

// A key given directly, or a descriptor + scenario to derive it from.
struct KeySelector {
  std::string key;
  std::string desc;
  ScenarioOption scenario;

  void add_to(CLI::App& command) {
    auto* key_option = command.add_option("key", key, "Cache key (64 hex characters)");
    auto* desc_option = command.add_option("--desc,-d", desc, "Op descriptor JSON file, instead of KEY");
    key_option->excludes(desc_option);
    scenario.add_to(command, false);
  }

  /// The key, and the descriptor and scenario when they were given.
  struct Resolved {
    std::string key;
    std::optional<std::pair<std::string, Scenario>> descriptor;  ///< its JSON text and scenario
  };

  Result<Resolved> resolve(const Store& store) const {
    if (!key.empty()) {
      return Resolved{key, std::nullopt};
    }
    if (desc.empty()) {
      return Error::usage("give a KEY, or --desc FILE with --scenario");
    }
    auto parsed = scenario.resolve();
    if (!parsed) {
      return parsed.error();
    }
    auto text = read_descriptor_text(desc);
    if (!text) {
      return text.error();
    }
    auto derived = store.key(*text, *parsed);
    if (!derived) {
      return derived.error().with_context(desc);
    }
    return Resolved{*derived, std::make_pair(std::move(*text), std::move(*parsed))};
  }
};

struct GetArgs {
  KeySelector selector;
  std::string out = ".";
};

int run_get(const Context& context, const GetArgs& args) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto resolved = args.selector.resolve(*store);
  if (!resolved) {
    return context.fail(resolved.error());
  }
  const std::string& key = resolved->key;
  // With the descriptor, a team server also learns what was looked up (its statistics).
  const auto& descriptor = resolved->descriptor;
  auto result = descriptor ? store->get(descriptor->first, descriptor->second, args.out) : store->get(key, args.out);
  if (!result) {
    return context.fail(result.error());
  }
  if (!*result) {
    if (context.options.json) {
      context.print_json({{"key", key}, {"hit", false}});
    }
    context.note("miss: no entry for " + key);
    if (descriptor) {
      const auto op_type = nlohmann::json::parse(descriptor->first, nullptr, false).value("op_type", std::string());
      note_near_entries(context, *store, op_type, key, "--desc and --scenario");
    }
    return k_exit_not_found;
  }
  const auto& hit = **result;
  context.note_bypass(*store, hit.entry.op_type);
  if (context.options.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& file : hit.files) {
      files.push_back(file.string());
    }
    context.print_json({{"key", key}, {"hit", true}, {"files", files}, {"op_type", hit.entry.op_type}});
  } else {
    context.print_text("hit " + key + " (" + hit.entry.op_type + "): wrote " + std::to_string(hit.files.size()) +
                       " files to " + args.out);
  }
  return k_exit_ok;
}

int run_has(const Context& context, const KeySelector& selector) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto resolved = selector.resolve(*store);
  if (!resolved) {
    return context.fail(resolved.error());
  }
  const std::string& key = resolved->key;
  auto present = store->contains(key);
  if (!present) {
    return context.fail(present.error());
  }
  if (context.options.json) {
    context.print_json({{"key", key}, {"present", *present}});
  } else {
    context.print_text((*present ? "present " : "absent ") + key);
  }
  return *present ? k_exit_ok : k_exit_not_found;
}

}  // namespace

std::vector<Command> register_get_commands(CLI::App& app, Context& context) {
  auto get_args = std::make_shared<GetArgs>();
  auto* get = app.add_subcommand("get", "Write the files of an entry into a directory, verified");
  get->footer(
      "Exit status 1 on a miss. Files are written only after the whole entry verified.\n\n"
      "Examples:\n  opcache get 3f5e…c2 --out kernel_meta\n"
      "  opcache get --desc square.desc.json --scenario phase=train,toolchain=8.0.RC2,soc=Ascend910B1 --out .");
  get_args->selector.add_to(*get);
  get->add_option("--out,-o", get_args->out, "Directory to write the files to (created if missing)")
      ->capture_default_str();

  auto has_selector = std::make_shared<KeySelector>();
  auto* has = app.add_subcommand("has", "Exit 0 when an entry is present, 1 when not");
  has_selector->add_to(*has);

  return {{get, [&context, get_args] { return run_get(context, *get_args); }},
          {has, [&context, has_selector] { return run_has(context, *has_selector); }}};
}

}  // namespace opcache::cli
