#include "store/exec_policy.hpp"

#include <algorithm>

namespace opcache::store {

namespace {

bool is_variable_name(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

Result<CompilerCheck> parse_compiler_check(std::string_view text) {
  constexpr const char* expected = "expected content, mtime, none, string:TEXT or command:CMD";
  if (text == "content") {
    return CompilerCheck{CompilerCheck::Kind::content, ""};
  }
  if (text == "mtime") {
    return CompilerCheck{CompilerCheck::Kind::mtime, ""};
  }
  if (text == "none") {
    return CompilerCheck{CompilerCheck::Kind::none, ""};
  }
  for (auto [prefix, kind] : {std::pair{std::string_view("string:"), CompilerCheck::Kind::string},
                              std::pair{std::string_view("command:"), CompilerCheck::Kind::command}}) {
    if (text.starts_with(prefix)) {
      if (text.size() == prefix.size()) {
        return Error::usage(std::string(expected) + " (" + std::string(prefix) + " needs a value)");
      }
      return CompilerCheck{kind, std::string(text.substr(prefix.size()))};
    }
  }
  return Error::usage(expected);
}

std::string to_string(const CompilerCheck& check) {
  switch (check.kind) {
    case CompilerCheck::Kind::content: return "content";
    case CompilerCheck::Kind::mtime: return "mtime";
    case CompilerCheck::Kind::none: return "none";
    case CompilerCheck::Kind::string: return "string:" + check.argument;
    case CompilerCheck::Kind::command: return "command:" + check.argument;
  }
  return "content";
}

const std::vector<std::string>& default_exec_environment() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list{
        // gcc and clang: include and library search, the driver's helpers
        "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "LIBRARY_PATH", "COMPILER_PATH",
        "GCC_EXEC_PREFIX", "SOURCE_DATE_EPOCH",
        // nvcc: flags it adds, the host compiler it runs
        "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN",
        // CANN's op compiler: operator implementations and tuning banks
        "ASCEND_OPP_PATH", "ASCEND_CUSTOM_OPP_PATH", "TUNE_BANK_PATH"};
    std::sort(list.begin(), list.end());
    return list;
  }();
  return names;
}

Result<std::vector<std::string>> parse_exec_environment(std::string_view text) {
  text = trimmed(text);
  if (text.empty()) {
    return default_exec_environment();
  }
  if (text == "none") {
    return std::vector<std::string>{};
  }
  std::vector<std::string> names;
  if (text.front() == '+') {
    names = default_exec_environment();
    text.remove_prefix(1);
  }
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto name = trimmed(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (name.empty()) {
      continue;
    }
    if (!is_variable_name(name)) {
      return Error::usage("exec_env: \"" + std::string(name) +
                          "\" is not an environment variable name (letters, digits and '_')");
    }
    names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace opcache::store
