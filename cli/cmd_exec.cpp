// opcache exec: the transparent wrapper around any compiler command line.
// Hit: write the outputs, exit 0, never run the command. Miss: run it under
// single flight, store its outputs, exit with its status.
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <tuple>

#include "cli/context.hpp"
#include "cli/descriptor_input.hpp"
#include "base/try.hpp"
#include "cli/exec_key.hpp"
#include "cli/miss_hint.hpp"

extern char** environ;

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

// What identifies a version of a file, to see what a command wrote.
using FileStamp = std::tuple<std::int64_t, std::int64_t, std::uint64_t>;  // mtime ns, size, inode

std::map<std::string, FileStamp> snapshot(const fs::path& directory) {
  std::map<std::string, FileStamp> files;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(directory, ec)) {
    struct stat info {};
    if (::lstat(item.path().c_str(), &info) == 0 && S_ISREG(info.st_mode)) {
      files[item.path().filename().string()] = {
          static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec,
          static_cast<std::int64_t>(info.st_size), static_cast<std::uint64_t>(info.st_ino)};
    }
  }
  return files;
}

// Runs the command with this process's stdio; returns its exit status
// (128 + signal when killed by a signal).
Result<int> run_command(const std::vector<std::string>& command) {
  std::vector<char*> argv;
  for (const auto& arg : command) {
    argv.push_back(const_cast<char*>(arg.c_str()));
  }
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    return Error::usage("cannot run " + command[0] + ": " + std::strerror(rc));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return Error::io(std::string("waitpid failed: ") + std::strerror(errno));
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Whether outputs the cache could not store are an error: they are when the
// outputs are to be stored, not when the cache is bypassed.
enum class MissingOutputs { fail, ignore };

// The files the command produced: the declared outputs, or else every
// regular file in `out` that is new or changed since `before`.
Result<std::vector<fs::path>> produced_files(const ExecArgs& args, const std::map<std::string, FileStamp>& before,
                                             MissingOutputs missing) {
  std::vector<fs::path> files;
  if (!args.outputs.empty()) {
    for (const auto& name : args.outputs) {
      fs::path file = fs::path(args.out) / name;
      struct stat info {};
      if (::lstat(file.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
        if (missing == MissingOutputs::ignore) {
          continue;
        }
        return Error::build_failed("the command succeeded but did not write --output " + name + " in " + args.out);
      }
      files.push_back(file);
    }
    return files;
  }
  for (const auto& [name, stamp] : snapshot(args.out)) {
    auto old = before.find(name);
    if (old == before.end() || old->second != stamp) {
      files.push_back(fs::path(args.out) / name);
    }
  }
  if (files.empty() && missing == MissingOutputs::fail) {
    return Error::build_failed("the command succeeded but wrote no files into " + args.out +
                               " (name them with --output if it rewrites files in place)");
  }
  return files;
}

// The descriptor exec keys on: --desc plus the member "exec", what the
// command compiles and how (cli/exec_key.hpp).
Result<std::string> keyed_descriptor(const DescriptorInput& input, const ExecArgs& args) {
  if (args.key_on == "descriptor") {
    return input.text;  // the caller vouches that the descriptor decides the kernel
  }
  const ExecKeyRequest request{args.command, args.out, args.inputs, input.store.exec_key_policy()};
  const base::DigestCache cache(input.store.root() / "digests");
  OPCACHE_TRY_ASSIGN(auto member, exec_key_member(request, cache, base::process_environment()));
  return descriptor_with_exec_member(input.text, member, args.desc);
}

int run_exec(const Context& context, const ExecArgs& args) {
  for (const auto& name : args.outputs) {
    if (name.empty() || name.find('/') != std::string::npos) {
      return context.fail(Error::usage("--output \"" + name + "\" must be a file name inside --out, without '/'"));
    }
  }
  auto input = open_descriptor_input(context, args.scenario, args.desc);
  if (!input) {
    return context.fail(input.error());
  }
  std::error_code ec;
  fs::create_directories(args.out, ec);
  auto descriptor = keyed_descriptor(*input, args);
  if (!descriptor) {
    return context.fail(descriptor.error());
  }
  // With the cache bypassed (mode disable, op_debug_level, op_debug_list)
  // nothing is stored, so exec only wraps the command: its status is the answer,
  // whatever it wrote.
  const auto op_type = nlohmann::json::parse(input->canonical, nullptr, false).value("op_type", std::string());
  const MissingOutputs missing = input->store.bypass_reason(op_type) ? MissingOutputs::ignore : MissingOutputs::fail;

  std::optional<int> command_status;
  auto build = [&]() -> Result<std::vector<fs::path>> {
    auto before = args.outputs.empty() ? snapshot(args.out) : std::map<std::string, FileStamp>{};
    auto status = run_command(args.command);
    if (!status) {
      return status.error();
    }
    command_status = *status;
    if (*status != 0) {
      return Error::build_failed("the command exited with status " + std::to_string(*status));
    }
    return produced_files(args, before, missing);
  };

  auto result = input->store.get_or_build_in_place(*descriptor, input->scenario, args.out, build);
  if (!result && result.error().code() == ErrorCode::timeout && !command_status) {
    // Never fail a compile because of the cache: run the command uncached.
    context.note("warning: " + result.error().message() + "; running the command without the cache");
    auto status = run_command(args.command);
    return status ? *status : context.fail(status.error());
  }
  if (!result) {
    if (command_status && *command_status != 0) {
      return *command_status;  // the command's own output said why
    }
    return context.fail(result.error());
  }
  if (result->source == BuildSource::built) {
    note_near_entries(context, input->store, op_type, result->key, "--desc, --scenario, --out, --input and command");
  }
  const char* source = result->source == BuildSource::hit ? "hit" : result->source == BuildSource::built ? "built"
                                                                                                           : "bypassed";
  if (context.options.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& file : result->files) {
      files.push_back(file.string());
    }
    context.print_json({{"key", result->key}, {"source", source}, {"files", files}, {"build_ms", result->build_ms},
                        {"note", result->note}});
  } else if (result->source == BuildSource::hit) {
    context.note("hit " + result->key + ": wrote " + std::to_string(result->files.size()) + " files to " + args.out);
  } else if (!result->note.empty()) {
    context.note(result->note);
  }
  return command_status.value_or(k_exit_ok);
}

}  // namespace

std::vector<Command> register_exec_command(CLI::App& app, Context& context) {
  auto args = std::make_shared<ExecArgs>();
  auto* command = app.add_subcommand("exec", "Run a compiler command through the cache");
  command->footer(
      "On a hit the stored outputs are written into --out and the command is not run (exit 0).\n"
      "On a miss the command runs once across all processes sharing the cache (the others wait for\n"
      "its result), its outputs are stored, and opcache exits with the command's status. A failing\n"
      "command stores nothing. Outputs are the --output files, or else every file in --out that the\n"
      "command created or changed. With the cache bypassed (--mode disable, --op-debug-level,\n"
      "--op-debug-list) the command just runs and opcache exits with its status.\n\n"
      "The key covers the descriptor, the scenario and what the command compiles: its arguments (paths\n"
      "under --out written as {out}, so every rank shares), the content of every argument that names an\n"
      "existing file, of every --input, the compiler's fingerprint (compiler_check, default content) and\n"
      "the variables of exec_env (CPATH, NVCC_APPEND_FLAGS, ASCEND_OPP_PATH...). An edited source, a\n"
      "changed flag, an edited --input header or a new compiler is a miss (docs/formats.md).\n\n"
      "Example:\n"
      "  opcache exec --desc add.desc.json --scenario phase=train,toolchain=8.0.RC2,soc=Ascend910B1 \\\n"
      "      --out kernel_meta --output add_1.o --output add_1.json -- ./compile_add.sh kernel_meta\n"
      "  opcache exec --desc k.desc.json --scenario phase=infer,toolchain=cuda13,soc=sm_90 --out out \\\n"
      "      --input include/ -- nvcc -arch=sm_90 -cubin -Iinclude k.cu -o out/k.cubin");
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
                      "A file or directory the command reads without naming it (headers, an op implementation "
                      "directory); its content is part of the key (repeatable)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  command->add_option("--key-on", args->key_on,
                      "command (default): the key covers the command, its files, --input, the compiler and "
                      "exec_env; descriptor: only the descriptor and scenario, for op compilers whose descriptor "
                      "already names everything that decides the kernel (a stale kernel is then yours to avoid)")
      ->check(CLI::IsMember({"command", "descriptor"}));
  command->add_option("command", args->command, "The compiler command line, after --")->required();
  return {{command, [&context, args] { return run_exec(context, *args); }}};
}

}  // namespace opcache::cli
