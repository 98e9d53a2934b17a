// opcache explain: why a lookup is not a hit. Lists the stored entries of the
// same op type nearest to the descriptor + scenario (this store, then each
// remote that can answer), each with what differs.

#include "base/try.hpp"
#include "cli/context.hpp"
#include "cli/descriptor_input.hpp"

namespace opcache::cli {

namespace {

struct ExplainArgs {
  std::string desc;
  ScenarioOption scenario;
  std::size_t limit = 5;
  std::string out;                   // with a command: exec's --out
  std::vector<std::string> inputs;   // with a command: exec's --input
  std::vector<std::string> command;  // explain an `opcache exec` of this command
};

// The `opcache exec` of the explained command.
ExecRequest exec_request(const DescriptorInput& input, const ExplainArgs& args) {
  ExecRequest request;
  request.descriptor_json = input.text;
  request.descriptor_origin = args.desc;
  request.scenario = input.scenario;
  request.command = args.command;
  request.out = args.out;
  request.inputs = args.inputs;
  return request;
}

// The descriptor as `opcache exec` of the same command would key it, or as
// given when no command was given.
Result<std::string> explained_descriptor(DescriptorInput& input, const ExplainArgs& args) {
  if (args.command.empty()) {
    return input.text;
  }
  if (args.out.empty()) {
    return Error::usage("explaining an exec command needs its --out");
  }
  return input.store.exec_descriptor(exec_request(input, args));
}

nlohmann::json explanation_to_json(const Explanation& explanation) {
  nlohmann::json nearest = nlohmann::json::array();
  for (const auto& entry : explanation.nearest) {
    nlohmann::json differences = nlohmann::json::array();
    for (const auto& difference : entry.differences) {
      nlohmann::json item{{"path", difference.path}};
      if (difference.stored) {
        item["stored"] = nlohmann::json::parse(*difference.stored);
      }
      if (difference.wanted) {
        item["wanted"] = nlohmann::json::parse(*difference.wanted);
      }
      differences.push_back(std::move(item));
    }
    nearest.push_back({{"key", entry.key},
                       {"where", entry.where},
                       {"scenario", nlohmann::json::parse(entry.scenario)},
                       {"differences", std::move(differences)}});
  }
  return {{"key", explanation.key},
          {"exact", explanation.exact},
          {"nearest", std::move(nearest)},
          {"unanswered", explanation.unanswered}};
}

std::string plural(std::size_t count, const char* word) {
  return std::to_string(count) + " " + word + (count == 1 ? "" : "s");
}

// Whether the explanation's first line says whether the key is stored: not
// for an exec command, whose line is what its manifest says.
enum class Headline { key, none };

void print_explanation(const Context& context, const Explanation& explanation, const std::string& op_type,
                       Headline headline = Headline::key) {
  if (headline == Headline::none) {
    // the caller said it
  } else if (explanation.exact) {
    context.print_text("hit: " + explanation.key + " is stored");
  } else {
    context.print_text("miss: no entry for " + explanation.key);
  }
  if (explanation.nearest.empty()) {
    context.print_text("no stored entry of op type " + op_type + " to compare with");
  }
  std::string where;
  for (const auto& entry : explanation.nearest) {
    if (entry.where != where) {
      where = entry.where;
      context.print_text("nearest entries of op type " + op_type + " in " + where + ":");
    }
    context.print_text("  " + entry.key + "  " +
                       (entry.differences.empty() ? std::string("exact") : plural(entry.differences.size(), "difference")));
    for (const auto& difference : entry.differences) {
      context.print_text("      " + difference.path + ": stored " + difference.stored.value_or("(absent)") +
                         ", asked " + difference.wanted.value_or("(absent)"));
    }
  }
  for (const auto& note : explanation.unanswered) {
    context.note("not asked: " + note);
  }
}

std::string op_type_of(const DescriptorInput& input) {
  return nlohmann::json::parse(input.canonical, nullptr, false).value("op_type", std::string());
}

int run_explain(const Context& context, const ExplainArgs& args) {
  auto input = open_descriptor_input(context, args.scenario, args.desc);
  if (!input) {
    return context.fail(input.error());
  }
  auto descriptor = explained_descriptor(*input, args);
  if (!descriptor) {
    return context.fail(descriptor.error());
  }
  auto explanation = input->store.explain(*descriptor, input->scenario, args.limit);
  if (!explanation) {
    return context.fail(explanation.error().with_context(args.desc));
  }
  if (args.command.empty()) {
    if (context.options.json) {
      context.print_json(explanation_to_json(*explanation));
    } else {
      print_explanation(context, *explanation, op_type_of(*input));
    }
    return explanation->exact ? k_exit_ok : k_exit_not_found;
  }
  // An exec command: its entries are keyed by what it read, so the answer is its manifest's.
  auto reason = input->store.exec_miss_reason(exec_request(*input, args));
  if (!reason) {
    return context.fail(reason.error());
  }
  if (context.options.json) {
    auto report = explanation_to_json(*explanation);
    report["exact"] = !*reason;
    report["exec"] = *reason ? nlohmann::json{{"hit", false}, {"reason", **reason}} : nlohmann::json{{"hit", true}};
    context.print_json(report);
  } else {
    context.print_text(*reason ? "miss: " + **reason : "hit: an earlier build read the same files");
    print_explanation(context, *explanation, op_type_of(*input), Headline::none);
  }
  return *reason ? k_exit_not_found : k_exit_ok;
}

}  // namespace

std::vector<Command> register_explain_command(CLI::App& app, Context& context) {
  auto args = std::make_shared<ExplainArgs>();
  auto* command = app.add_subcommand("explain", "Why a lookup is not a hit: the nearest stored entries and what differs");
  command->footer(
      "Compares the descriptor and scenario with the stored entries of the same op type, in this cache and\n"
      "on each remote that can answer (an opcache server), and lists the nearest of each, fewest\n"
      "differences first: descriptor paths and scenario fields with the stored and the asked value.\n"
      "Exit 0 when the exact entry is stored, 1 when not.\n\n"
      "After `--`, the command of an `opcache exec` (with its --out and --input): the first line names\n"
      "the file the command read on its last build that differs now (\"miss: k.h changed\", \"inc1/k.h now\n"
      "exists\"), then the stored entries compare as exec keys them (descriptor.exec.*).\n\n"
      "Examples:\n"
      "  opcache explain --desc add.json --scenario phase=train,toolchain=8.0.RC3,soc=Ascend910B1\n"
      "  opcache explain --desc k.json --scenario phase=infer,toolchain=gcc12,soc=x86 --out out \\\n"
      "      -- gcc -O3 -c k.c -o out/k.o");
  command->add_option("--desc,-d", args->desc, "Op descriptor JSON file ('-' reads standard input)")->required();
  args->scenario.add_to(*command, true);
  command->add_option("--limit", args->limit, "How many nearest entries to list per place (default 5)")
      ->check(integer_in(1, 1000));
  command->add_option("--out,-o", args->out, "With a command: the --out of the exec to explain");
  command->add_option("--input", args->inputs, "With a command: an --input of the exec to explain (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option("command", args->command, "An exec command line, after --");
  return {{command, [&context, args] { return run_explain(context, *args); }}};
}

}  // namespace opcache::cli
