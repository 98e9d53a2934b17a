#include "store/cann_install.hpp"

#include <system_error>

#include "base/file_io.hpp"
#include "base/text.hpp"

namespace opcache::store {

namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t k_max_version_file = 64 * 1024;

// Where a root was looked for, for the message when none is usable.
std::string describe_variable(const base::EnvLookup& env, const char* name) {
  auto value = env(name);
  if (!value || value->empty()) {
    return std::string("$") + name + " unset";
  }
  return std::string("$") + name + "=" + *value;
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
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (ec || !fs::exists(status)) {
    return std::optional<std::string>();
  }
  if (!fs::is_regular_file(status)) {
    return Error::usage(file.string() + " is not a regular file (expected a CANN version.info)");
  }
  const auto size = fs::file_size(file, ec);
  if (ec || size > k_max_version_file) {
    return Error::usage(file.string() + " is larger than 64 KiB (expected a CANN version.info)");
  }
  auto text = base::read_file(file);
  if (!text) {
    return Error::usage("cannot read " + file.string() + ": " + text.error().message());
  }
  std::string_view rest = *text;
  while (!rest.empty()) {
    const auto end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    const auto equals = line.find('=');
    if (equals == std::string_view::npos || base::trim_space(line.substr(0, equals)) != "Version") {
      continue;
    }
    const auto value = base::trim_space(line.substr(equals + 1));
    if (!value.empty()) {
      return std::optional<std::string>(std::string(value));
    }
  }
  return Error::usage(file.string() + " has no \"Version=\" line (expected e.g. Version=8.0.RC2)");
}

Result<CannInstall> find_cann_install(const base::EnvLookup& env, const fs::path& default_root) {
  CannInstall install;
  if (auto home = env("ASCEND_TOOLKIT_HOME"); home && !home->empty()) {
    install.root = *home;
    install.root_source = "$ASCEND_TOOLKIT_HOME";
  } else if (auto path = env("ASCEND_HOME_PATH"); path && !path->empty()) {
    install.root = *path;
    install.root_source = "$ASCEND_HOME_PATH";
  } else {
    install.root = default_root;
    install.root_source = "default path";
  }
  const std::string what_to_set = "; set toolchain=VERSION or ASCEND_TOOLKIT_HOME";
  std::error_code ec;
  if (!fs::is_directory(install.root, ec)) {
    if (install.root_source == "default path") {
      return Error::usage("toolchain=auto: no CANN install found (looked at " +
                          describe_variable(env, "ASCEND_TOOLKIT_HOME") + ", " +
                          describe_variable(env, "ASCEND_HOME_PATH") + ", " + install.root.string() + " missing)" +
                          what_to_set);
    }
    return Error::usage("toolchain=auto: " + install.root_source + "=" + install.root.string() +
                        " is not a directory" + what_to_set);
  }
  for (const char* name : {"compiler", "opp", "runtime", "opp_kernel", "toolkit"}) {
    const std::string component = name;
    const fs::path file =
        component == "toolkit" ? install.root / "version.info" : install.root / component / "version.info";
    auto version = read_version_info(file);
    if (!version) {
      return Error::usage("toolchain=auto: " + version.error().message() + what_to_set);
    }
    if (*version) {
      install.components.push_back({component, file, **version});
    }
  }
  if (install.component("compiler") == nullptr && install.component("toolkit") == nullptr) {
    return Error::usage("toolchain=auto: " + install.root.string() + " (" + install.root_source +
                        ") is not a CANN install: neither compiler/version.info nor version.info exists" +
                        what_to_set);
  }
  return install;
}

}  // namespace opcache::store
