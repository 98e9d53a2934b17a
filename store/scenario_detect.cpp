#include "store/scenario_detect.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <set>
#include <system_error>

#include "base/file_io.hpp"
#include "base/program_search.hpp"
#include "base/sha256.hpp"
#include "base/subprocess.hpp"
#include "base/text.hpp"
#include "base/try.hpp"
#include "store/cache_root.hpp"

namespace opcache::store {

namespace fs = std::filesystem;

namespace {

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> result;
  for (auto part : base::split_on(text, ' ')) {
    part = base::trim_space(part);
    if (!part.empty()) {
      result.push_back(part);
    }
  }
  return result;
}

bool all_digits(std::string_view text) {
  if (text.empty()) {
    return false;
  }
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

bool is_chip_name(std::string_view name) {
  bool letter = false;
  bool digit = false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      letter = true;
    } else if (std::isdigit(u)) {
      digit = true;
    } else if (c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return letter && digit;
}

std::string first_line(std::string_view text) {
  text = base::trim_space(text);
  return std::string(text.substr(0, text.find('\n')));
}

// The first line of a program's output, for messages.
std::string program_failure(const base::ProcessOutput& output) {
  std::string detail = first_line(output.err);
  if (detail.empty()) {
    detail = first_line(output.out);
  }
  return "exit status " + std::to_string(output.exit_code) + (detail.empty() ? "" : ": " + detail);
}

// The canonical path of a program, which names its remembered answers: a
// symlink python3 -> python3.11 and its target share one entry.
fs::path resolved(const fs::path& program) {
  std::error_code ec;
  auto canonical = fs::canonical(program, ec);
  return ec ? program : canonical;
}

// "MAJOR.MINOR" from "3.11", "3.11.2" or "Python 3.11.2"; std::nullopt otherwise.
std::optional<std::string> major_minor(std::string_view text) {
  const std::string line = first_line(text);  // words() views into it: it must outlive the loop
  for (auto word : words(line)) {
    const auto parts = base::split_on(word, '.');
    if (parts.size() >= 2 && all_digits(parts[0]) && all_digits(parts[1])) {
      return std::string(parts[0]) + "." + std::string(parts[1]);
    }
  }
  return std::nullopt;
}

// The digest entry of one bank directory: the first k_bank_digest_chars of
// its tree SHA-256, or k_no_bank when it does not exist.
Result<std::string> bank_digest(const DetectContext& context, const fs::path& directory, const std::string& field) {
  std::error_code ec;
  const auto status = fs::status(directory, ec);
  if (ec || !fs::exists(status)) {
    return std::string(k_no_bank);
  }
  if (!fs::is_directory(status)) {
    return Error::usage("toolchain=auto: " + directory.string() + " (" + field +
                        ") is not a directory; remove it or set toolchain=VERSION and extra." + field + "=VALUE");
  }
  auto digest = base::tree_sha256(directory, context.cache);
  if (!digest) {
    return Error::usage("toolchain=auto: cannot digest " + directory.string() + " (" + field +
                        "): " + digest.error().message());
  }
  return digest->substr(0, k_bank_digest_chars);
}

// The longest package name an entry keeps, so that the prefix, the name and
// a ".N" suffix stay within an extra key's 64 characters.
constexpr std::size_t k_max_package_name = 40;

// The longest load order kept as written; a longer one is kept as a digest.
constexpr std::size_t k_max_order_chars = 128;

bool allowed_in_extra_key(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

// `prefix` + `name` as an extra key not in `taken`: the characters a key
// cannot hold become '_', the name is cut to k_max_package_name, and a
// taken key gets ".2", ".3"…
std::string package_entry(const std::string& prefix, const std::string& name, std::set<std::string>& taken) {
  std::string cleaned = name.substr(0, k_max_package_name);
  for (char& c : cleaned) {
    c = allowed_in_extra_key(c) ? c : '_';
  }
  std::string entry = prefix + (cleaned.empty() ? "_" : cleaned);
  for (int n = 2; taken.count(entry) != 0; ++n) {
    entry = prefix + cleaned + "." + std::to_string(n);
  }
  taken.insert(entry);
  return entry;
}

// Whether `file` lies in one of the package's k_package_compiled_parts.
bool in_compiled_part(const fs::path& package, const fs::path& file) {
  const auto relative = file.lexically_relative(package);
  if (relative.empty()) {
    return false;
  }
  const std::string first = relative.begin()->string();
  for (const char* part : k_package_compiled_parts) {
    if (first == part) {
      return true;
    }
  }
  return false;
}

// A package entry's value: its version and the first k_bank_digest_chars of
// the tree digest of the parts a compile loads.
Result<std::string> package_value(const DetectContext& context, const CustomOpPackage& package,
                                  const std::string& entry) {
  auto digest = base::tree_sha256(package.directory, context.cache, [&package](const fs::path& file) {
    return !in_compiled_part(package.directory, file);
  });
  if (!digest) {
    return Error::usage("toolchain=auto: cannot digest the custom operator package " + package.directory.string() +
                        " (" + entry + "): " + digest.error().message() +
                        "; make it readable or set toolchain=VERSION and extra." + entry + "=VALUE");
  }
  return package.version.value_or(k_unversioned_package) + "/" + digest->substr(0, k_bank_digest_chars);
}

// A load order as an entry's value: as written, or the first
// k_bank_digest_chars of its SHA-256 when longer than k_max_order_chars.
std::string order_value(const std::string& order) {
  return order.size() <= k_max_order_chars ? order : base::sha256_hex(order).substr(0, k_bank_digest_chars);
}

// Adds one entry per package of `packages` to `detected` (and `inputs`)
// under `prefix`, except those `given_extra` names; returns the entries'
// names in the packages' order.
Result<std::vector<std::string>> add_packages(const DetectContext& context,
                                              const std::vector<CustomOpPackage>& packages, const char* prefix,
                                              const std::map<std::string, std::string>& given_extra,
                                              DetectedToolchain& detected, std::vector<ScenarioInput>* inputs) {
  std::set<std::string> taken;
  std::vector<std::string> names;
  for (const auto& package : packages) {
    const std::string entry = package_entry(prefix, package.name, taken);
    names.push_back(entry.substr(std::string_view(prefix).size()));
    if (given_extra.count(entry) != 0) {
      continue;  // the explicit value wins: nothing to digest
    }
    OPCACHE_TRY_ASSIGN(auto value, package_value(context, package, entry));
    if (inputs != nullptr) {
      inputs->push_back({"extra." + entry, package.directory.string() + " (" + package.source + ")", value, true});
    }
    detected.extra[entry] = std::move(value);
  }
  return names;
}

// The custom operator packages' entries and their load orders.
Status detect_packages(const DetectContext& context, const CannInstall& install,
                       const std::map<std::string, std::string>& given_extra, DetectedToolchain& detected,
                       std::vector<ScenarioInput>* inputs) {
  OPCACHE_TRY_ASSIGN(auto packages, find_custom_op_packages(context.env, install));
  OPCACHE_TRY(add_packages(context, packages.vendors, k_extra_opp_vendor_prefix, given_extra, detected, inputs));
  if (packages.vendor_priority) {
    const std::string value = order_value(*packages.vendor_priority);
    detected.extra[k_extra_opp_vendor_priority] = value;
    if (inputs != nullptr) {
      inputs->push_back({std::string("extra.") + k_extra_opp_vendor_priority,
                         packages.vendor_config.string() + " load_priority (" + install.opp_source + ")", value, true});
    }
  }
  OPCACHE_TRY_ASSIGN(auto custom,
                     add_packages(context, packages.custom, k_extra_custom_opp_prefix, given_extra, detected, inputs));
  if (!custom.empty()) {
    std::string order;
    for (const auto& name : custom) {
      order += (order.empty() ? "" : ",") + name;
    }
    const std::string value = order_value(order);
    detected.extra[k_extra_custom_opp_order] = value;
    if (inputs != nullptr) {
      inputs->push_back({std::string("extra.") + k_extra_custom_opp_order,
                         std::string(k_custom_opp_path_variable) + " (its order)", value, true});
    }
  }
  return {};
}

// The custom operator bank a compile for `soc` would read, and how it was chosen.
std::pair<std::optional<fs::path>, std::string> tune_bank_directory(const base::EnvLookup& env,
                                                                    const std::string& soc) {
  if (auto path = env("TUNE_BANK_PATH"); path && !path->empty()) {
    return {fs::path(*path), "$TUNE_BANK_PATH"};
  }
  if (auto path = env("ASCEND_CACHE_PATH"); path && !path->empty()) {
    return {fs::path(*path) / "aoe_data" / soc, "$ASCEND_CACHE_PATH/aoe_data/<soc>"};
  }
  if (auto home = env("HOME"); home && !home->empty()) {
    return {fs::path(*home) / "Ascend/latest/data/aoe/custom/op" / soc, "$HOME/Ascend/latest/data/aoe/custom/op/<soc>"};
  }
  return {std::nullopt, "no TUNE_BANK_PATH, ASCEND_CACHE_PATH or HOME"};
}

Result<std::string> detect_python(const DetectContext& context, std::vector<ScenarioInput>* inputs) {
  const std::string what_to_set = "; set extra.python=MAJOR.MINOR (e.g. extra.python=3.9) or put the op "
                                  "compiler's python3 on PATH";
  auto program = base::find_program("python3", context.env("PATH").value_or(""), base::EmptyPathEntry::skipped);
  if (!program) {
    return Error::usage("toolchain=auto: no python3 on PATH to learn the op compiler's Python version" +
                        what_to_set);
  }
  bool ran = false;
  auto version = context.cache.digest(
      resolved(*program), "python3 major.minor", [&](const fs::path&) -> Result<std::string> {
        ran = true;
        OPCACHE_TRY_ASSIGN(auto output,
                           base::run_program({program->string(), "-c",
                                              "import sys; print('%d.%d' % sys.version_info[:2])"}));
        if (output.exit_code != 0) {
          return Error::usage(program->string() + " failed (" + program_failure(output) + ")");
        }
        auto value = major_minor(output.out);
        if (!value) {
          return Error::usage(program->string() + " printed \"" + first_line(output.out) +
                              "\", not a Python version");
        }
        return *value;
      });
  if (!version) {
    return Error::usage("toolchain=auto: " + version.error().message() + what_to_set);
  }
  if (inputs != nullptr) {
    inputs->push_back({std::string("extra.") + k_extra_python,
                       program->string() + " (python3 on PATH; " + (ran ? "ran" : "remembered") + ")", *version,
                       true});
  }
  return *version;
}

}  // namespace

DetectContext default_detect_context() {
  DetectContext context;
  context.env = base::process_environment();
  auto root = resolve_cache_root(std::nullopt, context.env);
  if (root) {
    struct stat info {};
    if (::lstat(root->path.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == ::geteuid()) {
      context.cache = base::DigestCache(root->path / "digests");
    }
  }
  return context;
}

Result<std::string> parse_npu_smi_info(std::string_view output) {
  std::set<std::string> chips;
  std::vector<std::string> npus;
  for (auto line : base::split_on(output, '\n')) {
    line = base::trim_space(line);
    if (line.empty() || line.front() != '|') {
      continue;
    }
    if (line.find("Process id") != std::string_view::npos || line.find("Process name") != std::string_view::npos) {
      break;  // the process table below the cards reuses the first column for NPU and chip ids
    }
    const auto cells = base::split_on(line.substr(1), '|');
    const auto first = words(cells.front());
    if (first.size() < 2 || !all_digits(first[0]) || !is_chip_name(first[1])) {
      continue;
    }
    std::string chip(first[1]);
    if (chip.rfind("Ascend", 0) != 0) {
      chip = "Ascend" + chip;
    }
    chips.insert(chip);
    npus.push_back("NPU " + std::string(first[0]) + ": " + chip);
  }
  if (chips.empty()) {
    return Error::usage(
        "soc=auto: `npu-smi info` listed no NPU (expected rows like \"| 0     910B1   | OK | …\"); set soc=CHIP, "
        "e.g. soc=Ascend910B1");
  }
  if (chips.size() > 1) {
    std::string list;
    for (const auto& npu : npus) {
      list += (list.empty() ? "" : ", ") + npu;
    }
    return Error::usage("soc=auto: the cards of this machine are different chips (" + list +
                        "); set soc=CHIP for the one the kernels are compiled for");
  }
  return *chips.begin();
}

Result<std::string> detect_soc(const DetectContext& context, std::vector<ScenarioInput>* inputs) {
  auto program = base::find_program("npu-smi", context.env("PATH").value_or(""), base::EmptyPathEntry::skipped);
  if (!program) {
    return Error::usage("soc=auto: npu-smi is not on PATH, so the chip cannot be detected; set soc=CHIP, e.g. "
                        "soc=Ascend910B1 (the name `npu-smi info` shows, prefixed with Ascend)");
  }
  bool ran = false;
  auto compute = [&](const fs::path&) -> Result<std::string> {
    ran = true;
    auto output = base::run_program({program->string(), "info"});
    if (!output) {
      return Error::usage("soc=auto: cannot run " + program->string() + ": " + output.error().message() +
                          "; set soc=CHIP");
    }
    if (output->exit_code != 0) {
      return Error::usage("soc=auto: `" + program->string() + " info` failed (" + program_failure(*output) +
                          "); set soc=CHIP");
    }
    return parse_npu_smi_info(output->out);
  };
  // Cards change only across a reboot: the boot id is part of the entry's name.
  auto boot_id = base::read_small_file(context.boot_id_file, 128);
  const std::string boot = boot_id ? std::string(base::trim_space(*boot_id)) : std::string();
  auto soc = boot.empty() ? compute(*program)
                          : context.cache.digest(resolved(*program), "npu-smi info soc, boot " + boot, compute);
  if (!soc) {
    return soc.error();
  }
  if (inputs != nullptr) {
    inputs->push_back({"soc", "`" + program->string() + " info` (" + (ran ? "ran" : "remembered for this boot") + ")",
                       *soc, true});
  }
  return soc;
}

Result<DetectedToolchain> detect_toolchain(const DetectContext& context, const std::string& soc,
                                           const std::map<std::string, std::string>& given_extra,
                                           std::vector<ScenarioInput>* inputs) {
  OPCACHE_TRY_ASSIGN(auto install, find_cann_install(context.env, context.default_cann_root));
  DetectedToolchain detected;
  const std::string root_note = " (" + install.root_source + ")";
  for (const auto& component : install.components) {
    detected.extra["cann." + component.name] = component.version;
    if (inputs != nullptr) {
      inputs->push_back({"extra.cann." + component.name, component.file.string() + " (" + component.source + ")",
                         component.version, true});
    }
  }
  const CannComponent* readable = install.component("compiler");
  if (readable == nullptr) {
    readable = install.component("toolkit");
  }
  detected.toolchain = readable->version;
  if (inputs != nullptr) {
    inputs->insert(inputs->begin() + static_cast<std::ptrdiff_t>(inputs->size() - install.components.size()),
                   ScenarioInput{"toolchain", readable->file.string() + root_note, readable->version, true});
  }
  OPCACHE_TRY(detect_packages(context, install, given_extra, detected, inputs));

  auto [bank, bank_source] = tune_bank_directory(context.env, soc);
  std::string bank_value = k_no_bank;
  if (bank) {
    OPCACHE_TRY_ASSIGN(bank_value, bank_digest(context, *bank, k_extra_tune_bank));
    bank_source = bank->string() + " (" + bank_source + ")";
  }
  detected.extra[k_extra_tune_bank] = bank_value;
  if (inputs != nullptr) {
    inputs->push_back({std::string("extra.") + k_extra_tune_bank, bank_source, bank_value, true});
  }

  const fs::path built_in = install.root / "compiler/data/fusion_strategy/built-in";
  OPCACHE_TRY_ASSIGN(auto fusion, bank_digest(context, built_in, k_extra_fusion_strategy));
  detected.extra[k_extra_fusion_strategy] = fusion;
  if (inputs != nullptr) {
    inputs->push_back({std::string("extra.") + k_extra_fusion_strategy, built_in.string() + root_note, fusion, true});
  }

  if (given_extra.count(k_extra_python) == 0) {
    OPCACHE_TRY_ASSIGN(detected.extra[k_extra_python], detect_python(context, inputs));
  }
  for (const auto& [name, value] : given_extra) {
    detected.extra.erase(name);  // an explicit value wins; the caller keeps it
  }
  return detected;
}

std::optional<ScenarioInput> check_explicit_toolchain(const DetectContext& context, const std::string& given) {
  auto installed = installed_toolchain(context.env, context.default_cann_root);
  if (!installed || installed->version == given) {
    return std::nullopt;
  }
  return ScenarioInput{k_input_installed_toolchain, installed->file.string() + " (" + installed->source + ")",
                       installed->version, false};
}

std::string explicit_toolchain_note(const std::string& given, const ScenarioInput& installed) {
  return "note: toolchain=" + given + " is given explicitly, but the CANN install the op compiler loads is " +
         installed.value + " (" + installed.source + "); the key uses " + given +
         ". Use toolchain=auto to key on the install, or point ASCEND_TOOLKIT_HOME at the install of " + given;
}

ScenarioInput driver_input(const DetectContext& context) {
  ScenarioInput input{"driver", context.driver_version_file.string(), "not installed", false};
  auto version = read_version_info(context.driver_version_file);
  if (!version) {
    input.value = "unreadable: " + version.error().message();
  } else if (*version) {
    input.value = **version;
  }
  return input;
}

}  // namespace opcache::store
