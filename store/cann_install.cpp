#include "store/cann_install.hpp"

#include <algorithm>
#include <string_view>
#include <system_error>

#include "base/file_io.hpp"
#include "base/text.hpp"

namespace opcache::store {

namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t k_max_install_file = 64 * 1024;
constexpr const char* k_what_to_set = "; set toolchain=VERSION or ASCEND_TOOLKIT_HOME";

// Where a root was looked for, for the message when none is usable.
std::string describe_variable(const base::EnvLookup& env, const char* name) {
  auto value = env(name);
  if (!value || value->empty()) {
    return std::string("$") + name + " unset";
  }
  return std::string("$") + name + "=" + *value;
}

// The value of a variable, std::nullopt when unset or empty.
std::optional<std::string> non_empty(const base::EnvLookup& env, const char* name) {
  auto value = env(name);
  return value && !value->empty() ? value : std::nullopt;
}

// The text of a small file of an install: std::nullopt when it does not
// exist; a `usage` error naming it (as `expected`) when it is not a regular
// file, is over 64 KiB or cannot be read.
Result<std::optional<std::string>> read_install_file(const fs::path& file, const std::string& expected) {
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (ec || !fs::exists(status)) {
    return std::optional<std::string>();
  }
  if (!fs::is_regular_file(status)) {
    return Error::usage(file.string() + " is not a regular file (expected " + expected + ")");
  }
  const auto size = fs::file_size(file, ec);
  if (ec || size > k_max_install_file) {
    return Error::usage(file.string() + " is larger than 64 KiB (expected " + expected + ")");
  }
  auto text = base::read_file(file);
  if (!text) {
    return Error::usage("cannot read " + file.string() + ": " + text.error().message());
  }
  return std::optional<std::string>(std::move(*text));
}

// The value of the first line "name=value" of `text` with this name and a
// non-empty value (spaces around both ignored).
std::optional<std::string> named_value(std::string_view text, std::string_view name) {
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const auto equals = line.find('=');
    if (equals == std::string_view::npos || base::trim_space(line.substr(0, equals)) != name) {
      continue;
    }
    const auto value = base::trim_space(line.substr(equals + 1));
    if (!value.empty()) {
      return std::string(value);
    }
  }
  return std::nullopt;
}

// The file of a component's version.info.
fs::path component_file(const CannInstall& install, const std::string& component) {
  if (component == "toolkit") {
    return install.root / "version.info";
  }
  return component == "opp" ? install.opp / "version.info" : install.root / component / "version.info";
}

// A package's `Version=`, std::nullopt when it has no version.info or the
// file has no such line (custom packages write other lines).
Result<std::optional<std::string>> package_version(const fs::path& directory) {
  const fs::path file = directory / "version.info";
  auto text = read_install_file(file, "a custom operator package's version.info");
  if (!text) {
    return Error::usage("toolchain=auto: " + text.error().message() + k_what_to_set);
  }
  return *text ? named_value(**text, "Version") : std::nullopt;
}

// The name a directory (lexically normal, no trailing '/') is known by: its
// last component, or the last of its real path for "." and "..".
std::string directory_name(const fs::path& directory) {
  const auto name = directory.filename();
  if (name != "." && name != ".." && !name.empty()) {
    return name.string();
  }
  std::error_code ec;
  return fs::weakly_canonical(directory, ec).filename().string();
}

// Every directory of `<opp>/vendors`, sorted by name.
Result<std::vector<CustomOpPackage>> vendor_packages(const CannInstall& install) {
  std::vector<CustomOpPackage> packages;
  const fs::path vendors = install.opp / "vendors";
  std::error_code ec;
  if (!fs::is_directory(vendors, ec)) {
    return packages;
  }
  const std::string source = "a vendor of the OPP of " + install.opp_source;
  for (fs::directory_iterator it(vendors, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      packages.push_back({it->path().filename().string(), it->path(), source, std::nullopt});
    }
  }
  if (ec) {
    return Error::usage("toolchain=auto: cannot list the custom operator packages in " + vendors.string() + ": " +
                        ec.message() + k_what_to_set);
  }
  std::sort(packages.begin(), packages.end(),
            [](const CustomOpPackage& a, const CustomOpPackage& b) { return a.name < b.name; });
  return packages;
}

// Each existing directory of ASCEND_CUSTOM_OPP_PATH, in its order.
std::vector<CustomOpPackage> custom_path_packages(const base::EnvLookup& env) {
  std::vector<CustomOpPackage> packages;
  const auto list = non_empty(env, "ASCEND_CUSTOM_OPP_PATH");
  if (!list) {
    return packages;
  }
  for (const auto item : base::split_on(*list, ':')) {
    std::error_code ec;
    if (item.empty() || !fs::is_directory(fs::path(item), ec)) {
      continue;
    }
    fs::path directory = fs::path(item).lexically_normal();
    if (directory.filename().empty() && directory.has_relative_path()) {
      directory = directory.parent_path();  // "dir/" names dir
    }
    packages.push_back({directory_name(directory), directory, k_custom_opp_path_variable, std::nullopt});
  }
  return packages;
}

}  // namespace

const CannComponent* CannInstall::component(const std::string& name) const {
  for (const auto& component : components) {
    if (component.name == name) {
      return &component;
    }
  }
  return nullptr;
}

Result<std::optional<std::string>> read_version_info(const fs::path& file) {
  auto text = read_install_file(file, "a CANN version.info");
  if (!text || !*text) {
    return text;
  }
  auto version = named_value(**text, "Version");
  if (!version) {
    return Error::usage(file.string() + " has no \"Version=\" line (expected e.g. Version=8.0.RC2)");
  }
  return version;
}

CannRoot choose_cann_root(const base::EnvLookup& env, const fs::path& default_root) {
  if (auto home = non_empty(env, "ASCEND_TOOLKIT_HOME")) {
    return {*home, "$ASCEND_TOOLKIT_HOME"};
  }
  if (auto path = non_empty(env, "ASCEND_HOME_PATH")) {
    return {*path, "$ASCEND_HOME_PATH"};
  }
  return {default_root, "default path"};
}

Result<CannInstall> find_cann_install(const base::EnvLookup& env, const fs::path& default_root) {
  const CannRoot root = choose_cann_root(env, default_root);
  CannInstall install;
  install.root = root.path;
  install.root_source = root.source;
  if (auto opp = non_empty(env, "ASCEND_OPP_PATH")) {
    install.opp = *opp;
    install.opp_source = k_opp_path_variable;
  } else {
    install.opp = install.root / "opp";
    install.opp_source = install.root_source;
  }
  std::error_code ec;
  if (!fs::is_directory(install.root, ec)) {
    if (install.root_source == "default path") {
      return Error::usage(
          "toolchain=auto: no CANN install found (looked at " + describe_variable(env, "ASCEND_TOOLKIT_HOME") + ", " +
          describe_variable(env, "ASCEND_HOME_PATH") + ", " + install.root.string() + " missing)" + k_what_to_set);
    }
    return Error::usage("toolchain=auto: " + install.root_source + "=" + install.root.string() + " is not a directory" +
                        k_what_to_set);
  }
  for (const char* name : {"compiler", "opp", "runtime", "opp_kernel", "toolkit"}) {
    const std::string component = name;
    const fs::path file = component_file(install, component);
    auto version = read_version_info(file);
    if (!version) {
      return Error::usage("toolchain=auto: " + version.error().message() + k_what_to_set);
    }
    if (*version) {
      install.components.push_back(
          {component, file, **version, component == "opp" ? install.opp_source : install.root_source});
    }
  }
  if (install.component("compiler") == nullptr && install.component("toolkit") == nullptr) {
    return Error::usage("toolchain=auto: " + install.root.string() + " (" + install.root_source +
                        ") is not a CANN install: neither compiler/version.info nor version.info exists" +
                        k_what_to_set);
  }
  return install;
}

std::optional<CannComponent> installed_toolchain(const base::EnvLookup& env, const fs::path& default_root) {
  const CannRoot root = choose_cann_root(env, default_root);
  std::error_code ec;
  if (!fs::is_directory(root.path, ec)) {
    return std::nullopt;
  }
  for (const char* name : {"compiler", "toolkit"}) {
    const std::string component = name;
    const fs::path file = component == "toolkit" ? root.path / "version.info" : root.path / "compiler/version.info";
    auto version = read_version_info(file);
    if (!version) {
      return std::nullopt;
    }
    if (*version) {
      return CannComponent{component, file, **version, root.source};
    }
  }
  return std::nullopt;
}

Result<CustomOpPackages> find_custom_op_packages(const base::EnvLookup& env, const CannInstall& install) {
  CustomOpPackages found;
  auto vendors = vendor_packages(install);
  if (!vendors) {
    return vendors.error();
  }
  found.vendors = std::move(*vendors);
  found.custom = custom_path_packages(env);
  for (auto* list : {&found.vendors, &found.custom}) {
    for (auto& package : *list) {
      auto version = package_version(package.directory);
      if (!version) {
        return version.error();
      }
      package.version = std::move(*version);
    }
  }
  found.vendor_config = install.opp / "vendors/config.ini";
  auto config = read_install_file(found.vendor_config, "the vendors' config.ini, load_priority=NAME,NAME");
  if (!config) {
    return Error::usage("toolchain=auto: " + config.error().message() + k_what_to_set);
  }
  if (*config) {
    found.vendor_priority = named_value(**config, "load_priority");
  }
  return found;
}

}  // namespace opcache::store
