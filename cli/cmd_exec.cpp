// opcache exec: the transparent wrapper around any compiler command line.
// Parses the options, calls Store::exec (api/exec.cpp: the key, manifests,
// the tracer) and prints what happened. Hit: the outputs are written and the
// command never runs (exit 0). Miss: it runs once under single flight, its
// outputs are stored, and opcache exits with its status.
#include <unistd.h>

#include "base/try.hpp"
#include "cli/context.hpp"
#include "cli/descriptor_input.hpp"
#include "cli/miss_hint.hpp"

namespace opcache::cli {

namespace {

namespace fs = std::filesystem;

struct ExecArgs {
  std::string desc;
  ScenarioOption scenario;
  std::string out;
  std::vector<std::string> outputs;
  std::vector<std::string> inputs;
  std::string key_on = "command";
  std::vector<std::string> command;
};

const char* source_name(BuildSource source) {
  switch (source) {
    case BuildSource::hit: return "hit";
    case BuildSource::built: return "built";
    case BuildSource::bypassed: return "bypassed";
  }
  return "built";
}

void print_result(const Context& context, const ExecArgs& args, const ExecResult& result) {
  const BuildResult& build = result.build;
  if (context.options.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& file : build.files) {
      files.push_back(file.string());
    }
    nlohmann::json report{{"key", build.key},         {"source", source_name(build.source)},
                          {"files", files},           {"build_ms", build.build_ms},
                          {"note", build.note},       {"notes", result.notes}};
    if (result.miss_reason) {
      report["miss_reason"] = *result.miss_reason;
    }
    context.print_json(report);
    return;
  }
  if (build.source == BuildSource::hit) {
    context.note("hit " + build.key + ": wrote " + std::to_string(build.files.size()) + " files to " + args.out);
  }
  if (!build.note.empty()) {
    context.note(build.note);
  }
  for (const auto& note : result.notes) {
    context.note(note);
  }
}

int run_exec(const Context& context, const ExecArgs& args) {
  auto input = open_descriptor_input(context, args.scenario, args.desc, DescriptorCheck::by_store);
  if (!input) {
    return context.fail(input.error());
  }
  ExecRequest request;
  request.descriptor_json = input->text;
  request.descriptor_origin = args.desc;
  request.scenario = input->scenario;
  request.command = args.command;
  request.out = args.out;
  request.outputs = args.outputs;
  request.inputs = args.inputs;
  request.key_on = args.key_on == "descriptor" ? ExecKeyOn::descriptor : ExecKeyOn::command;
  request.stdin_fd = args.desc == "-" ? -1 : STDIN_FILENO;  // --desc - has read standard input already
  auto result = input->store.exec(request);
  if (!result) {
    return context.fail(result.error());
  }
  if (result->command_status && *result->command_status != 0) {
    for (const auto& note : result->notes) {
      context.note(note);  // why it ran as it did; the command's own output said why it failed
    }
    return *result->command_status;
  }
  if (result->build.source == BuildSource::built && result->notes.empty() && !context.options.json) {
    if (result->miss_reason) {
      context.note("miss: " + *result->miss_reason + " since the last build of this command");
    } else {
      const auto op_type = nlohmann::json::parse(input->text, nullptr, false).value("op_type", std::string());
      note_near_entries(context, input->store, op_type, result->build.key,
                        "--desc, --scenario, --out, --input and command");
    }
  }
  print_result(context, args, *result);
  return result->command_status.value_or(k_exit_ok);
}

}  // namespace

std::vector<Command> register_exec_command(CLI::App& app, Context& context) {
  auto args = std::make_shared<ExecArgs>();
  auto* command = app.add_subcommand("exec", "Run a compiler command through the cache");
  command->footer(
      "On a hit the stored outputs are written into --out and the command is not run (exit 0).\n"
      "On a miss the command runs once across all processes sharing the cache (the others wait for\n"
      "its result) under a tracer that records what its whole process tree reads; the files it wrote\n"
      "directly in --out (or the --output files) are stored, and opcache exits with its status. A\n"
      "failing command stores nothing. With the cache bypassed (--mode disable, --op-debug-level,\n"
      "--op-debug-list) the command just runs and opcache exits with its status.\n\n"
      "The key covers the descriptor, the scenario, the command line (paths under --out written as\n"
      "{out}, under --base-dir as {base}, so ranks and checkouts share), the compiler's fingerprint\n"
      "(compiler_check), the variables of exec_env, every --input, standard input when it is data, and\n"
      "every file the command read on its last build, every path it looked up and did not find (a new\n"
      "header that shadows another is a miss) and every directory it listed (an exec manifest, shared\n"
      "through the remotes). An edited header, a changed flag or a new compiler is a miss; a miss\n"
      "names the input that changed. Where the system refuses tracing (a container's seccomp profile)\n"
      "the command runs uncached, with a note (docs/cli.md \"What exec hashes\").\n\n"
      "Example:\n"
      "  opcache exec --desc add.desc.json --scenario phase=train,toolchain=8.0.RC2,soc=Ascend910B1 \\\n"
      "      --out kernel_meta --output add_1.o --output add_1.json -- ./compile_add.sh kernel_meta\n"
      "  opcache exec --desc k.desc.json --scenario phase=infer,toolchain=cuda13,soc=sm_90 --out out \\\n"
      "      -- nvcc -arch=sm_90 -cubin -Iinclude k.cu -o out/k.cubin");
  command->add_option("--desc,-d", args->desc, "Op descriptor JSON file ('-' reads standard input)")->required();
  args->scenario.add_to(*command, true);
  command->add_option("--out,-o", args->out, "Directory the command writes its outputs to")->required();
  // One name per --output: a list option would take "--" as the end of its
  // list and eat it, so the command's own dashed arguments became options.
  command->add_option("--output", args->outputs, "An output file name in --out (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option("--input", args->inputs,
                      "A file or directory keyed before the command runs (the files it reads are observed anyway; "
                      "declare what a hit must check before the trace exists, e.g. a model directory) (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option("--key-on", args->key_on,
                      "command (default): the key covers the command, the files it reads, --input, the compiler "
                      "and exec_env; descriptor: only the descriptor and scenario, for op compilers whose descriptor "
                      "already names everything that decides the kernel (a stale kernel is then yours to avoid)")
      ->check(CLI::IsMember({"command", "descriptor"}));
  command->add_option("command", args->command, "The compiler command line, after --")->required();
  return {{command, [&context, args] { return run_exec(context, *args); }}};
}

}  // namespace opcache::cli
