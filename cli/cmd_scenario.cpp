// opcache scenario: print the scenario a --scenario resolves to, with `auto`
// fields detected (docs/formats.md "Detected scenario fields (`auto`)"), and
// with --explain every input it was resolved from.
#include <algorithm>

#include "cli/context.hpp"

namespace opcache::cli {

namespace {

struct ScenarioArgs {
  ScenarioOption scenario;
  bool explain = false;
};

nlohmann::json inputs_to_json(const std::vector<ScenarioInput>& inputs) {
  auto list = nlohmann::json::array();
  for (const auto& input : inputs) {
    list.push_back({{"name", input.name}, {"source", input.source}, {"value", input.value}, {"keyed", input.keyed}});
  }
  return list;
}

int run_scenario(const Context& context, const ScenarioArgs& args) {
  auto explained = args.scenario.explain();
  if (!explained) {
    return context.fail(explained.error());
  }
  const std::string canonical = scenario_canonical_json(explained->scenario);
  if (context.options.json) {
    nlohmann::json document = {{"summary", scenario_summary(explained->scenario)},
                               {"scenario", nlohmann::json::parse(canonical)},
                               {"canonical", canonical}};
    if (args.explain) {
      document["inputs"] = inputs_to_json(explained->inputs);
    }
    context.print_json(document);
    return k_exit_ok;
  }
  context.print_text("scenario:  " + scenario_summary(explained->scenario));
  context.print_text("canonical: " + canonical);
  if (args.explain) {
    std::size_t width = 0;
    for (const auto& input : explained->inputs) {
      width = std::max(width, input.name.size());
    }
    context.print_text("inputs:");
    for (const auto& input : explained->inputs) {
      context.print_text("  " + input.name + std::string(width - input.name.size() + 2, ' ') + input.value +
                         (input.keyed ? "" : " [not keyed]") + "  <- " + input.source);
    }
  }
  return k_exit_ok;
}

}  // namespace

std::vector<Command> register_scenario_command(CLI::App& app, Context& context) {
  auto args = std::make_shared<ScenarioArgs>();
  auto* command = app.add_subcommand(
      "scenario", "Print the scenario a --scenario resolves to, with toolchain=auto and soc=auto detected");
  command->footer(
      "toolchain and soc default to auto: the CANN install (ASCEND_TOOLKIT_HOME, ASCEND_HOME_PATH or\n"
      "/usr/local/Ascend/ascend-toolkit/latest), its tuning banks and the python3 on PATH decide the\n"
      "toolchain and the cann.*/python entries of extra; `npu-smi info` decides the soc. Paths, times and\n"
      "host names never enter. --explain lists every input and where it was read, and the driver version,\n"
      "which is not keyed. A failed detection exits 2 naming what to set. See docs/formats.md.\n\n"
      "Examples:\n"
      "  opcache scenario --scenario phase=train --explain\n"
      "  opcache scenario --scenario phase=infer,soc=Ascend910B1 --json");
  args->scenario.add_to(*command, true);
  command->add_flag("--explain", args->explain, "List every input: its name, where it was read and its value");
  return {{command, [&context, args] { return run_scenario(context, *args); }}};
}

}  // namespace opcache::cli
