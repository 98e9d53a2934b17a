// The C ABI (include/opcache/opcache.h): converts to and from the C++ API and
// turns every failure, including exceptions, into a status code.
#include "opcache/opcache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "opcache/opcache.hpp"
#include "base/environment.hpp"
#include "base/json_parse.hpp"
#include "store/scenario.hpp"
#include "store/setting_table.hpp"

struct opcache_store {
  opcache::Store store;
};

struct opcache_scenario {
  opcache::Scenario scenario;
};

namespace {

thread_local std::string t_last_error;

opcache_status fail(const opcache::Error& error) {
  t_last_error = error.message();
  return static_cast<opcache_status>(error.code());
}

opcache_status fail_usage(const char* message) {
  t_last_error = message;
  return OPCACHE_USAGE;
}

// Runs `body`, mapping exceptions (allocation failure, bugs) to statuses so
// none crosses the C boundary.
template <typename Body>
opcache_status guarded(Body&& body) noexcept {
  try {
    t_last_error.clear();
    return body();
  } catch (const std::bad_alloc&) {
    t_last_error = "out of memory";
    return OPCACHE_INTERNAL;
  } catch (const std::exception& e) {
    t_last_error = std::string("internal error: ") + e.what();
    return OPCACHE_INTERNAL;
  } catch (...) {
    t_last_error = "internal error: unknown exception";
    return OPCACHE_INTERNAL;
  }
}

void copy_key(const std::string& key, char* key_out) {
  if (key_out != nullptr) {
    std::memcpy(key_out, key.c_str(), key.size() + 1);
  }
}

char* copy_string(const std::string& text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy == nullptr) {
    throw std::bad_alloc();
  }
  std::memcpy(copy, text.c_str(), text.size() + 1);
  return copy;
}

// The text forms of one opcache_open_ex option, checked against the JSON
// type its setting takes (SettingType).
opcache::Result<std::vector<std::string>> option_texts(const std::string& name, opcache::SettingType type,
                                                       const nlohmann::json& value) {
  using opcache::SettingType;
  auto wrong = [&](const char* expected) {
    return opcache::Error::usage("opcache_open_ex option \"" + name + "\" must be " + expected);
  };
  switch (type) {
    case SettingType::integer:
      if (!value.is_number_integer()) return wrong("an integer");
      return std::vector<std::string>{std::to_string(value.get<std::int64_t>())};
    case SettingType::flag:
      if (!value.is_boolean()) return wrong("a boolean");
      return std::vector<std::string>{value.get<bool>() ? "true" : "false"};
    case SettingType::repeated: {
      std::vector<std::string> texts;
      for (const auto& item : value.is_array() ? value : nlohmann::json::array({value})) {
        if (!item.is_string()) return wrong("an array of strings");
        texts.push_back(item.get<std::string>());
      }
      return texts;
    }
    default:
      if (!value.is_string()) return wrong("a string");
      return std::vector<std::string>{value.get<std::string>()};
  }
}

// The settable row of the settings table named `name`, or nullptr.
const opcache::SettingDescriptor* settable(const std::string& name) {
  for (const auto& row : opcache::setting_descriptors()) {
    if (row.settable && row.name == name) {
      return &row;
    }
  }
  return nullptr;
}

// StoreConfig from the JSON options of opcache_open_ex: one key per settable
// row of the settings table, applied through StoreConfig::set.
opcache::Result<opcache::StoreConfig> config_from_json(const char* options_json) {
  auto parsed = opcache::base::parse_json(options_json, "opcache_open_ex options");
  if (!parsed) {
    return parsed.error();
  }
  if (!parsed->is_object()) {
    return opcache::Error::usage("opcache_open_ex options must be a JSON object");
  }
  opcache::StoreConfig config;
  for (const auto& [name, value] : parsed->items()) {
    const auto* row = settable(name);
    if (row == nullptr) {
      return opcache::Error::usage("opcache_open_ex: unknown option \"" + name +
                                   "\" (allowed: " + opcache::store::settable_names() + ")");
    }
    auto texts = option_texts(name, row->type, value);
    if (!texts) {
      return texts.error();
    }
    for (const auto& text : *texts) {
      if (auto status = config.set(name, text); !status) {
        return status.error().with_context("opcache_open_ex option \"" + name + "\"");
      }
    }
  }
  return config;
}

// The settings table as JSON, for bindings (opcache_settings_schema_json).
nlohmann::json settings_schema() {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : opcache::setting_descriptors()) {
    rows.push_back({{"name", row.name},
                    {"display", row.display},
                    {"type", opcache::to_string(row.type)},
                    {"settable", row.settable},
                    {"flag", row.flag},
                    {"help", row.help},
                    {"env", row.env},
                    {"config_key", row.config_key},
                    {"default", row.default_value}});
  }
  return rows;
}

opcache_source source_of(opcache::BuildSource source) {
  return source == opcache::BuildSource::hit     ? OPCACHE_SOURCE_HIT
         : source == opcache::BuildSource::built ? OPCACHE_SOURCE_BUILT
                                                 : OPCACHE_SOURCE_BYPASSED;
}

// The file name of a path, as a view of its text (no path object made).
std::string_view file_name_of(const std::filesystem::path& path) {
  std::string_view text = path.native();
  return text.substr(text.rfind('/') + 1);
}

// The paths sorted by file name, as opcache_get_or_build_json and
// opcache_get_or_build_report report them.
std::vector<std::filesystem::path> files_by_name(std::vector<std::filesystem::path> files) {
  std::sort(files.begin(), files.end(), [](const std::filesystem::path& a, const std::filesystem::path& b) {
    return file_name_of(a) < file_name_of(b);
  });
  return files;
}

// Store::get_or_build of a resolved scenario with a C build callback and
// `options`; `what` names the C function in messages.
opcache::Result<opcache::BuildResult> c_get_or_build(opcache_store* store, const char* descriptor_json,
                                                     const opcache::Scenario& scenario, const char* out_dir,
                                                     opcache_build_fn build, void* user_data,
                                                     const opcache::GetOrBuildOptions& options) {
  auto callback = [&](const std::filesystem::path& work_dir) -> opcache::Status {
    int rc = build(work_dir.c_str(), user_data);
    if (rc != 0) {
      return opcache::Error::build_failed("the build callback returned " + std::to_string(rc));
    }
    return {};
  };
  return store->store.get_or_build(descriptor_json, scenario, out_dir, callback, options);
}

// c_get_or_build of scenario text, parsed on every call.
opcache::Result<opcache::BuildResult> c_get_or_build(opcache_store* store, const char* descriptor_json,
                                                     const char* scenario, const char* out_dir,
                                                     opcache_build_fn build, void* user_data,
                                                     const opcache::GetOrBuildOptions& options, const char* what) {
  if (store == nullptr || descriptor_json == nullptr || scenario == nullptr || out_dir == nullptr || build == nullptr) {
    return opcache::Error::usage(std::string(what) +
                                 ": store, descriptor_json, scenario, out_dir and build must not be NULL");
  }
  auto parsed = opcache::parse_scenario(scenario);
  if (!parsed) {
    return parsed.error();
  }
  return c_get_or_build(store, descriptor_json, *parsed, out_dir, build, user_data, options);
}

// The declared inputs of opcache_get_or_build_inputs_json and
// opcache_get_or_build_report as options; `usage` error for a NULL array or
// entry; `what` names the C function in messages.
opcache::Result<opcache::GetOrBuildOptions> declared_inputs_options(const char* const* inputs, size_t input_count,
                                                                    const char* what) {
  if (inputs == nullptr && input_count != 0) {
    return opcache::Error::usage(std::string(what) + ": inputs must not be NULL when input_count is " +
                                 std::to_string(input_count));
  }
  opcache::GetOrBuildOptions options;
  for (size_t i = 0; i < input_count; ++i) {
    if (inputs[i] == nullptr) {
      return opcache::Error::usage(std::string(what) + ": inputs[" + std::to_string(i) +
                                   "] is NULL; pass the path of a file or directory the build reads");
    }
    options.inputs.emplace_back(inputs[i]);
  }
  return options;
}

// The report of opcache_get_or_build_json: {"key","source","files","build_ms","note"}, files sorted by name.
std::string build_report(opcache::BuildResult result) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& file : files_by_name(std::move(result.files))) {
    files.push_back(file.string());
  }
  static constexpr const char* k_source_names[] = {"hit", "built", "bypassed"};
  nlohmann::json document = {{"key", result.key},
                             {"source", k_source_names[source_of(result.source)]},
                             {"files", std::move(files)},
                             {"build_ms", result.build_ms},
                             {"note", result.note}};
  return document.dump();
}

// Where the calling thread's last opcache_get_or_build_report keeps the text
// its report points to (reused, so a hit allocates nothing for it).
struct ReportText {
  std::string files;
  std::string note;
};
thread_local ReportText t_report_text;

// Fills `report` from `result`; its files and note point into t_report_text.
void fill_report(opcache::BuildResult result, opcache_build_report* report) {
  if (result.key.size() >= OPCACHE_KEY_BUFFER) {
    throw std::length_error("a key of " + std::to_string(result.key.size()) + " characters");
  }
  copy_key(result.key, report->key);
  report->source = source_of(result.source);
  report->build_ms = result.build_ms;
  std::string& files = t_report_text.files;
  files.clear();
  report->file_count = result.files.size();
  for (const auto& file : files_by_name(std::move(result.files))) {
    files.append(file.native()).push_back('\0');
  }
  report->files = files.data();
  report->files_size = files.size();
  t_report_text.note = std::move(result.note);
  report->note = t_report_text.note.c_str();
}

// Whether `text` is the JSON form of a scenario (as opcache::parse_scenario decides).
bool is_scenario_json(std::string_view text) {
  std::size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '{';
}

// The OPCACHE_SCENARIO_* bits of what resolving `text` takes from the
// environment: `text` parsed again with "auto" kept (nothing detected) and
// its reads of environment variables watched. All bits when that parse fails.
unsigned environment_inputs(std::string_view text) {
  constexpr unsigned k_all = OPCACHE_SCENARIO_FROM_ENVIRONMENT | OPCACHE_SCENARIO_DETECTED;
  bool read_environment = false;
  const opcache::base::EnvLookup process = opcache::base::process_environment();
  const opcache::base::EnvLookup watched = [&](const char* name) {
    read_environment = true;
    return process(name);
  };
  const auto keep = opcache::store::auto_resolution(opcache::AutoFields::keep);
  auto parse_kept = [&]() -> opcache::Result<opcache::Scenario> {
    if (!is_scenario_json(text)) {
      return opcache::store::parse_scenario_spec(text, watched, keep);
    }
    auto value = opcache::base::parse_json(text, "scenario");
    if (!value) {
      return value.error();
    }
    return opcache::store::scenario_from_json(*value, "scenario", watched, keep);
  };
  const auto kept = parse_kept();
  if (!kept) {
    return k_all;
  }
  unsigned bits = read_environment ? OPCACHE_SCENARIO_FROM_ENVIRONMENT : 0u;
  if (kept->toolchain == "auto" || kept->soc == "auto") {
    bits |= OPCACHE_SCENARIO_DETECTED;
  }
  return bits;
}

}  // namespace

extern "C" {

const char* opcache_version(void) { return opcache::k_version_string; }

const char* opcache_status_name(opcache_status status) {
  if (status == OPCACHE_OK) {
    return "ok";
  }
  if (status < OPCACHE_NOT_FOUND || status > OPCACHE_UNTRUSTED) {
    return "unknown";
  }
  return opcache::error_code_name(static_cast<opcache::ErrorCode>(status));
}

const char* opcache_last_error(void) { return t_last_error.c_str(); }

opcache_status opcache_open(const char* cache_dir, opcache_store** out) {
  return guarded([&] {
    if (out == nullptr) {
      return fail_usage("opcache_open: out must not be NULL");
    }
    *out = nullptr;
    opcache::StoreConfig config;
    if (cache_dir != nullptr) {
      config.cache_dir = cache_dir;
    }
    auto store = opcache::Store::open(config);
    if (!store) {
      return fail(store.error());
    }
    *out = new opcache_store{std::move(*store)};
    return OPCACHE_OK;
  });
}

void opcache_close(opcache_store* store) { delete store; }

opcache_status opcache_open_ex(const char* options_json, opcache_store** out) {
  return guarded([&] {
    if (out == nullptr) {
      return fail_usage("opcache_open_ex: out must not be NULL");
    }
    *out = nullptr;
    auto config = config_from_json(options_json == nullptr ? "{}" : options_json);
    if (!config) {
      return fail(config.error());
    }
    auto store = opcache::Store::open(*config);
    if (!store) {
      return fail(store.error());
    }
    *out = new opcache_store{std::move(*store)};
    return OPCACHE_OK;
  });
}

opcache_status opcache_stats_json(opcache_store* store, char** json_out) {
  return guarded([&] {
    if (store == nullptr || json_out == nullptr) {
      return fail_usage("opcache_stats_json: store and json_out must not be NULL");
    }
    *json_out = nullptr;
    auto stats = store->store.stats();
    if (!stats) {
      return fail(stats.error());
    }
    nlohmann::json document = {{"entries", stats->totals.entries},
                               {"bundle_bytes", stats->totals.bundle_bytes},
                               {"raw_bytes", stats->totals.raw_bytes},
                               {"pinned", stats->totals.pinned},
                               {"counters", stats->counters}};
    *json_out = copy_string(document.dump());
    return OPCACHE_OK;
  });
}

opcache_status opcache_settings_schema_json(char** json_out) {
  return guarded([&] {
    if (json_out == nullptr) {
      return fail_usage("opcache_settings_schema_json: json_out must not be NULL");
    }
    *json_out = copy_string(settings_schema().dump());
    return OPCACHE_OK;
  });
}

void opcache_string_free(char* text) { std::free(text); }

opcache_status opcache_key(opcache_store* store, const char* descriptor_json, const char* scenario, char* key_out) {
  return guarded([&] {
    if (store == nullptr || descriptor_json == nullptr || scenario == nullptr || key_out == nullptr) {
      return fail_usage("opcache_key: store, descriptor_json, scenario and key_out must not be NULL");
    }
    auto parsed = opcache::parse_scenario(scenario);
    if (!parsed) {
      return fail(parsed.error());
    }
    auto key = store->store.key(descriptor_json, *parsed);
    if (!key) {
      return fail(key.error());
    }
    copy_key(*key, key_out);
    return OPCACHE_OK;
  });
}

opcache_status opcache_put(opcache_store* store, const char* descriptor_json, const char* scenario,
                           const char* const* files, size_t file_count, int64_t build_ms, char* key_out) {
  return guarded([&] {
    if (store == nullptr || descriptor_json == nullptr || scenario == nullptr || (files == nullptr && file_count)) {
      return fail_usage("opcache_put: store, descriptor_json, scenario and files must not be NULL");
    }
    auto parsed = opcache::parse_scenario(scenario);
    if (!parsed) {
      return fail(parsed.error());
    }
    std::vector<std::filesystem::path> paths;
    for (size_t i = 0; i < file_count; ++i) {
      if (files[i] == nullptr) {
        return fail_usage("opcache_put: files contains a NULL entry");
      }
      paths.emplace_back(files[i]);
    }
    opcache::PutOptions options;
    options.build_ms = build_ms;
    auto result = store->store.put(descriptor_json, *parsed, paths, options);
    if (!result) {
      return fail(result.error());
    }
    copy_key(result->key, key_out);
    return OPCACHE_OK;
  });
}

opcache_status opcache_get(opcache_store* store, const char* key, const char* out_dir) {
  return guarded([&] {
    if (store == nullptr || key == nullptr || out_dir == nullptr) {
      return fail_usage("opcache_get: store, key and out_dir must not be NULL");
    }
    auto result = store->store.get(key, out_dir);
    if (!result) {
      return fail(result.error());
    }
    if (!*result) {
      t_last_error = std::string("no entry for key ") + key;
      return OPCACHE_NOT_FOUND;
    }
    return OPCACHE_OK;
  });
}

opcache_status opcache_has(opcache_store* store, const char* key) {
  return guarded([&] {
    if (store == nullptr || key == nullptr) {
      return fail_usage("opcache_has: store and key must not be NULL");
    }
    auto result = store->store.contains(key);
    if (!result) {
      return fail(result.error());
    }
    return *result ? OPCACHE_OK : OPCACHE_NOT_FOUND;
  });
}

opcache_status opcache_remove(opcache_store* store, const char* key) {
  return guarded([&] {
    if (store == nullptr || key == nullptr) {
      return fail_usage("opcache_remove: store and key must not be NULL");
    }
    auto result = store->store.remove(key);
    if (!result) {
      return fail(result.error());
    }
    return *result ? OPCACHE_OK : OPCACHE_NOT_FOUND;
  });
}

opcache_status opcache_get_or_build(opcache_store* store, const char* descriptor_json, const char* scenario,
                                    const char* out_dir, opcache_build_fn build, void* user_data,
                                    opcache_source* source_out) {
  return guarded([&] {
    auto result =
        c_get_or_build(store, descriptor_json, scenario, out_dir, build, user_data, {}, "opcache_get_or_build");
    if (!result) {
      return fail(result.error());
    }
    if (source_out != nullptr) {
      *source_out = source_of(result->source);
    }
    return OPCACHE_OK;
  });
}

opcache_status opcache_get_or_build_json(opcache_store* store, const char* descriptor_json, const char* scenario,
                                         const char* out_dir, opcache_build_fn build, void* user_data,
                                         char** result_json_out) {
  return guarded([&] {
    if (result_json_out == nullptr) {
      return fail_usage("opcache_get_or_build_json: result_json_out must not be NULL");
    }
    *result_json_out = nullptr;
    auto result =
        c_get_or_build(store, descriptor_json, scenario, out_dir, build, user_data, {}, "opcache_get_or_build_json");
    if (!result) {
      return fail(result.error());
    }
    *result_json_out = copy_string(build_report(std::move(*result)));
    return OPCACHE_OK;
  });
}

opcache_status opcache_get_or_build_inputs_json(opcache_store* store, const char* descriptor_json,
                                                const char* scenario, const char* out_dir, const char* const* inputs,
                                                size_t input_count, opcache_build_fn build, void* user_data,
                                                char** result_json_out) {
  return guarded([&] {
    if (result_json_out == nullptr) {
      return fail_usage("opcache_get_or_build_inputs_json: result_json_out must not be NULL");
    }
    *result_json_out = nullptr;
    auto options = declared_inputs_options(inputs, input_count, "opcache_get_or_build_inputs_json");
    if (!options) {
      return fail(options.error());
    }
    auto result = c_get_or_build(store, descriptor_json, scenario, out_dir, build, user_data, *options,
                                 "opcache_get_or_build_inputs_json");
    if (!result) {
      return fail(result.error());
    }
    *result_json_out = copy_string(build_report(std::move(*result)));
    return OPCACHE_OK;
  });
}

opcache_status opcache_scenario_parse(const char* scenario, opcache_scenario** out, unsigned* environment_out) {
  return guarded([&] {
    if (scenario == nullptr || out == nullptr) {
      return fail_usage("opcache_scenario_parse: scenario and out must not be NULL");
    }
    *out = nullptr;
    auto parsed = opcache::parse_scenario(scenario);
    if (!parsed) {
      return fail(parsed.error());
    }
    if (environment_out != nullptr) {
      *environment_out = environment_inputs(scenario);
    }
    *out = new opcache_scenario{std::move(*parsed)};
    return OPCACHE_OK;
  });
}

opcache_status opcache_scenario_json(const opcache_scenario* scenario, char** json_out) {
  return guarded([&] {
    if (scenario == nullptr || json_out == nullptr) {
      return fail_usage("opcache_scenario_json: scenario and json_out must not be NULL");
    }
    *json_out = copy_string(opcache::scenario_canonical_json(scenario->scenario));
    return OPCACHE_OK;
  });
}

void opcache_scenario_free(opcache_scenario* scenario) { delete scenario; }

opcache_status opcache_get_or_build_report(opcache_store* store, const char* descriptor_json,
                                           const opcache_scenario* scenario, const char* out_dir,
                                           const char* const* inputs, size_t input_count, opcache_build_fn build,
                                           void* user_data, opcache_build_report* report_out) {
  return guarded([&] {
    if (store == nullptr || descriptor_json == nullptr || scenario == nullptr || out_dir == nullptr ||
        build == nullptr || report_out == nullptr) {
      return fail_usage(
          "opcache_get_or_build_report: store, descriptor_json, scenario, out_dir, build and report_out must not be "
          "NULL");
    }
    *report_out = opcache_build_report{};
    opcache::GetOrBuildOptions options;
    if (input_count != 0 || inputs != nullptr) {
      auto declared = declared_inputs_options(inputs, input_count, "opcache_get_or_build_report");
      if (!declared) {
        return fail(declared.error());
      }
      options = std::move(*declared);
    }
    auto result = c_get_or_build(store, descriptor_json, scenario->scenario, out_dir, build, user_data, options);
    if (!result) {
      return fail(result.error());
    }
    fill_report(std::move(*result), report_out);
    return OPCACHE_OK;
  });
}

}  // extern "C"
