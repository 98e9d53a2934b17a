// opcache import / export: vendor cache layouts (MindSpore kernel_meta, CANN
// kernel cache, torchair static kernels) in and out of the store.
#include "cli/context.hpp"
#include "layouts/transfer.hpp"
#include "base/environment.hpp"

namespace opcache::cli {

namespace {

struct ImportArgs {
  std::string dir;
  ScenarioOption scenario;
  std::string layout = "auto";
  bool dry_run = false;
};

struct ExportArgs {
  std::string dir;
  std::string layout = "mindspore";
  int ranks = 0;
  std::string scenario;
  std::string op_type;
};

// `names` ("auto", or none), then the names of the layout table.
std::vector<std::string> layout_choices(std::vector<std::string> names = {}) {
  for (const auto& row : layouts::layout_table()) {
    names.emplace_back(row.name);
  }
  return names;
}

nlohmann::json items_json(const std::vector<layouts::ImportedItem>& items) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& item : items) {
    nlohmann::json object = {{"origin", item.origin}, {"key", item.key}, {"op_type", item.op_type}};
    if (!item.same_as.empty()) {
      object["same_as"] = item.same_as;
    }
    list.push_back(object);
  }
  return list;
}

nlohmann::json skipped_json(const std::vector<layouts::Skipped>& skipped) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& item : skipped) {
    list.push_back({{"path", item.path}, {"reason", item.reason}});
  }
  return list;
}

int run_import(const Context& context, const ImportArgs& args) {
  auto scenario = args.scenario.resolve();
  if (!scenario) {
    return context.fail(scenario.error());
  }
  std::optional<layouts::Layout> layout;
  if (args.layout != "auto") {
    layout = layouts::parse_layout(args.layout);
  }
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto report = layouts::import_directory(*store, args.dir, *scenario, layout, args.dry_run);
  if (!report) {
    return context.fail(report.error());
  }
  if (context.options.json) {
    context.print_json({{"layout", layouts::to_string(report->layout)},
                        {"dry_run", report->dry_run},
                        {"imported", items_json(report->imported)},
                        {"duplicates", items_json(report->duplicates)},
                        {"already_present", items_json(report->already_present)},
                        {"skipped", skipped_json(report->skipped)}});
    return k_exit_ok;
  }
  const char* verb = report->dry_run ? "would import" : "imported";
  for (const auto& item : report->imported) {
    context.print_text(std::string(verb) + "  " + item.origin + "  (" + item.op_type + ") " + item.key);
  }
  for (const auto& item : report->duplicates) {
    context.print_text("duplicate  " + item.origin + "  same kernel as " + item.same_as + ", stored once");
  }
  for (const auto& item : report->already_present) {
    context.print_text("present   " + item.origin + "  already in the cache");
  }
  for (const auto& item : report->skipped) {
    context.print_text("skipped   " + item.path + "  " + item.reason);
  }
  context.print_text(std::string(layouts::to_string(report->layout)) + " layout: " + verb + " " +
                     std::to_string(report->imported.size()) + ", duplicates " +
                     std::to_string(report->duplicates.size()) + ", already present " +
                     std::to_string(report->already_present.size()) + ", skipped " +
                     std::to_string(report->skipped.size()));
  return k_exit_ok;
}

int run_export(const Context& context, const ExportArgs& args) {
  auto layout = layouts::parse_layout(args.layout);
  layouts::ExportOptions options;
  if (*layout == layouts::Layout::mindspore) {
    std::optional<std::filesystem::path> dir;
    if (!args.dir.empty()) {
      dir = args.dir;
    }
    auto destination = layouts::mindspore_destination(dir, args.ranks, base::process_environment());
    if (!destination) {
      return context.fail(destination.error());
    }
    options = *destination;
  } else {
    if (args.dir.empty()) {
      return context.fail(Error::usage("export --layout " + args.layout + " needs a DIR"));
    }
    options.layout = *layout;
    options.dir = args.dir;
  }
  if (!args.scenario.empty()) {
    auto parsed = parse_scenario(args.scenario);
    if (!parsed) {
      return context.fail(parsed.error());
    }
    options.filter = scenario_filter(*parsed);
  }
  options.filter.op_type = args.op_type;
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto report = layouts::export_entries(*store, options);
  if (!report) {
    return context.fail(report.error());
  }
  if (context.options.json) {
    context.print_json({{"layout", args.layout},
                        {"directories", report->directories},
                        {"entries", report->entries},
                        {"files_written", report->files_written},
                        {"files_linked", report->files_linked},
                        {"skipped", skipped_json(report->skipped)}});
    return k_exit_ok;
  }
  for (const auto& directory : report->directories) {
    context.print_text("wrote    " + directory);
  }
  for (const auto& item : report->skipped) {
    context.print_text("skipped  " + item.path + "  " + item.reason);
  }
  context.print_text("exported " + std::to_string(report->entries) + " entries into " +
                     std::to_string(report->directories.size()) + " directories (" +
                     std::to_string(report->files_written) + " files written, " +
                     std::to_string(report->files_linked) + " linked)");
  return k_exit_ok;
}

}  // namespace

std::vector<Command> register_layout_commands(CLI::App& app, Context& context) {
  auto import_args = std::make_shared<ImportArgs>();
  auto* import = app.add_subcommand("import", "Take kernels from a MindSpore, CANN or torchair cache directory");
  import->footer(
      "Reads DIR without modifying it. MindSpore: DIR, DIR/kernel_meta or DIR/rank_*/kernel_meta with\n"
      ".o/.json/.info triples (the same kernel under several ranks is stored once). CANN: te_*.o/.json pairs\n"
      "in DIR, DIR/<soc> or DIR/kernel_cache/<soc>. torchair: aclnn_static_shape_kernel_outputs/*_outputs.\n"
      "Every file not taken in is reported with the reason.\n\n"
      "Example:\n  opcache import ./ --scenario device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1");
  import->add_option("dir", import_args->dir, "Directory to import from")->required();
  import_args->scenario.add_to(*import, true);
  import->add_option("--layout", import_args->layout, "The layout of DIR; auto: told by what is inside")
      ->capture_default_str()
      ->check(CLI::IsMember(layout_choices({"auto"})));
  import->add_flag("--dry-run,-n", import_args->dry_run, "Report what would be imported; store nothing");

  auto export_args = std::make_shared<ExportArgs>();
  auto* export_command = app.add_subcommand("export", "Write stored kernels back in a vendor layout");
  export_command->footer(
      "MindSpore: DIR/rank_<i>/kernel_meta/ for i < --ranks (or rank $RANK_ID; DIR defaults to\n"
      "$MS_COMPILER_CACHE_PATH, else .), original file names, decompressed once and hard-linked into the\n"
      "other ranks. CANN: DIR/kernel_cache/<soc>/te_*.{o,json}; these files are replaced atomically.\n"
      "torchair: each static-kernel package as a new DIR/aclnn_static_shape_kernel_outputs/\n"
      "<timestamp>_<pid>_outputs/ with <pid>/*.json (the statistics) and static_kernel_*.run, renamed into\n"
      "place complete under a name not yet taken; nothing there is overwritten. Nothing is written outside\n"
      "DIR and no symlink inside it is followed; the report lists the directories written.\n\n"
      "Example:\n  opcache export ./ --layout mindspore --ranks 8 --scenario device=multi,phase=train,"
      "toolchain=8.0.RC2,soc=Ascend910B1");
  export_command->add_option("dir", export_args->dir, "Directory to write into");
  export_command->add_option("--layout", export_args->layout, "The layout to write")
      ->capture_default_str()
      ->check(CLI::IsMember(layout_choices()));
  export_command->add_option("--ranks", export_args->ranks, "MindSpore: write rank_0 .. rank_<N-1>")
      ->check(integer_in(1, 65536));
  export_command->add_option("--scenario,-s", export_args->scenario, "Only entries of this scenario");
  export_command->add_option("--op-type,-t", export_args->op_type, "Only entries of this op type");

  return {{import, [&context, import_args] { return run_import(context, *import_args); }},
          {export_command, [&context, export_args] { return run_export(context, *export_args); }}};
}

}  // namespace opcache::cli
