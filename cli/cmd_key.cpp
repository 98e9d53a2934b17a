// opcache key: print the key of a descriptor in a scenario.
#include "cli/context.hpp"
#include "cli/descriptor_input.hpp"
#include "base/try.hpp"

namespace opcache::cli {

namespace {

struct KeyArgs {
  std::string desc;
  ScenarioOption scenario;
  bool show_canonical = false;
};

int run_key(const Context& context, const KeyArgs& args) {
  auto input = open_descriptor_input(context, args.scenario, args.desc);
  if (!input) {
    return context.fail(input.error());
  }
  auto key = input->store.key(input->text, input->scenario);
  if (!key) {
    return context.fail(key.error().with_context(args.desc));
  }
  const std::string& canonical = input->canonical;
  std::string scenario_json = scenario_canonical_json(input->scenario);
  if (context.options.json) {
    context.print_json({{"key", *key},
                        {"descriptor_canonical", canonical},
                        {"scenario_canonical", scenario_json}});
    return k_exit_ok;
  }
  if (args.show_canonical) {
    context.print_text("descriptor: " + canonical);
    context.print_text("scenario:   " + scenario_json);
  }
  context.print_text(*key);
  return k_exit_ok;
}

}  // namespace

std::vector<Command> register_key_command(CLI::App& app, Context& context) {
  auto args = std::make_shared<KeyArgs>();
  auto* command = app.add_subcommand("key", "Print the cache key of an op descriptor in a scenario");
  command->footer(
      "The key is the SHA-256 of \"opcache-key-v1\\n\" + canonical JSON of the descriptor (volatile fields\n"
      "removed) + \"\\n\" + canonical JSON of the scenario. See docs/formats.md.\n\n"
      "Example:\n  opcache key --desc matmul.json --scenario phase=infer,toolchain=8.0.RC2,soc=Ascend910B1");
  command->add_option("--desc,-d", args->desc, "Op descriptor JSON file ('-' reads standard input)")->required();
  args->scenario.add_to(*command, true);
  command->add_flag("--show-canonical", args->show_canonical, "Also print the canonical descriptor and scenario");
  return {{command, [&context, args] { return run_key(context, *args); }}};
}

}  // namespace opcache::cli
