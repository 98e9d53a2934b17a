// opcache put: store kernel files under the key of a descriptor.
#include <filesystem>

#include "cli/context.hpp"
#include "cli/descriptor_input.hpp"

namespace opcache::cli {

namespace {

struct PutArgs {
  std::string desc;
  ScenarioOption scenario;
  std::vector<std::string> files;
  std::int64_t build_ms = 0;
  bool replace = false;
};

int run_put(const Context& context, const PutArgs& args) {
  auto input = open_descriptor_input(context, args.scenario, args.desc);
  if (!input) {
    return context.fail(input.error());
  }
  std::vector<std::filesystem::path> files(args.files.begin(), args.files.end());
  PutOptions options;
  options.build_ms = args.build_ms;
  options.replace = args.replace ? ReplacePolicy::replace : ReplacePolicy::keep_existing;
  auto result = input->store.put(input->text, input->scenario, files, options);
  if (!result) {
    return context.fail(result.error());
  }
  if (auto entry = input->store.lookup(result->key); entry && *entry) {
    context.note_bypass(input->store, (*entry)->op_type);
  }
  if (context.options.json) {
    nlohmann::json members = nlohmann::json::array();
    for (const auto& file : files) {
      members.push_back(file.filename().string());
    }
    context.print_json({{"key", result->key},
                        {"digest", result->digest},
                        {"stored", result->stored},
                        {"bundle_bytes", result->bundle_bytes},
                        {"raw_bytes", result->raw_bytes},
                        {"members", members}});
  } else if (result->stored) {
    context.print_text("stored " + result->key + " (" + std::to_string(files.size()) + " files, " +
                       format_bytes(result->raw_bytes) + " -> " + format_bytes(result->bundle_bytes) + ")");
  } else {
    context.print_text("already present " + result->key + " (kept; use --replace to overwrite)");
  }
  return k_exit_ok;
}

}  // namespace

std::vector<Command> register_put_command(CLI::App& app, Context& context) {
  auto args = std::make_shared<PutArgs>();
  auto* command = app.add_subcommand("put", "Store kernel files (e.g. a .o/.json/.info triple) under a key");
  command->footer(
      "Members keep their base names. An existing entry is kept unless --replace is given.\n\n"
      "Example:\n  opcache put --desc square.desc.json --scenario phase=train,toolchain=8.0.RC2,soc=Ascend910B1 \\\n"
      "      square_1.o square_1.json square_1.info");
  command->add_option("--desc,-d", args->desc, "Op descriptor JSON file ('-' reads standard input)")->required();
  args->scenario.add_to(*command, true);
  command->add_option("files", args->files, "Files to store")->required()->check(CLI::ExistingFile);
  command->add_option("--build-ms", args->build_ms, "How long the build took, in ms (for compile-time-saved stats)")
      ->check(integer_in(0));
  command->add_flag("--replace", args->replace, "Replace an existing entry for the key");
  return {{command, [&context, args] { return run_put(context, *args); }}};
}

}  // namespace opcache::cli
