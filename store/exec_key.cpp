#include "store/exec_key.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/program_search.hpp"
#include "base/sha256.hpp"
#include "base/subprocess.hpp"
#include "base/try.hpp"
#include "base/utf8.hpp"
#include "store/key.hpp"

namespace opcache::store {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;

constexpr std::string_view k_out_marker = "{out}";
constexpr std::string_view k_base_marker = "{base}";
constexpr std::string_view k_cann_marker = "{cann}";

// The spellings of --out that may appear in arguments, longest first:
// as given (unless it is "." or empty: then every relative path would
// match), absolute, and with symlinks resolved.
std::vector<std::string> out_spellings(const fs::path& out) {
  std::vector<std::string> forms;
  auto add = [&forms](std::string form) {
    while (form.size() > 1 && form.back() == '/') {
      form.pop_back();
    }
    if (!form.empty() && form != "." && std::find(forms.begin(), forms.end(), form) == forms.end()) {
      forms.push_back(std::move(form));
    }
  };
  add(out.string());
  add(fs::absolute(out).lexically_normal().string());
  std::error_code ec;
  add(fs::weakly_canonical(out, ec).string());
  std::sort(forms.begin(), forms.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return forms;
}

// An occurrence of --out that starts a path in an argument: at its start,
// after '=', ',', ':', a blank or a quote ("--out-dir=out", "-Wl,out/x", a
// `sh -c` script's "cp k.o 'out/'"), or after a two-character option
// ("-oout/k.o"); and that ends at the argument's end, '/', a blank or a quote.
bool is_path_occurrence(const std::string& arg, std::size_t pos, std::size_t length) {
  constexpr const char* separators = "=,: \t'\"";
  const bool starts = pos == 0 || std::strchr(separators, arg[pos - 1]) != nullptr || (pos == 2 && arg[0] == '-');
  const std::size_t end = pos + length;
  return starts && (end == arg.size() || arg[end] == '/' || std::strchr(" \t'\"", arg[end]) != nullptr);
}

// `arg` with every path occurrence of one of `forms` replaced by `marker`:
// --out by "{out}", so that the same command from rank_0/kernel_meta and
// rank_7/kernel_meta has one key; base_dir by "{base}", so that two
// checkouts share.
std::string normalise_paths(std::string arg, const std::vector<std::string>& forms, std::string_view marker) {
  for (const auto& form : forms) {
    for (std::size_t pos = arg.find(form); pos != std::string::npos; pos = arg.find(form, pos)) {
      if (is_path_occurrence(arg, pos, form.size())) {
        arg.replace(pos, form.size(), marker);
        pos += marker.size();
      } else {
        ++pos;
      }
    }
  }
  return arg;
}

// Whether `path` is `out` or below it (symlinks resolved as far as they exist).
bool is_below(const fs::path& path, const fs::path& canonical_out) {
  std::error_code ec;
  const auto relative = fs::weakly_canonical(path, ec).lexically_relative(canonical_out);
  return !ec && !relative.empty() && *relative.begin() != "..";
}

Result<std::string> run_check_command(const std::string& command, const fs::path& compiler) {
  std::string text = command;
  for (auto pos = text.find("%compiler%"); pos != std::string::npos; pos = text.find("%compiler%", pos)) {
    text.replace(pos, 10, compiler.string());
    pos += compiler.string().size();
  }
  OPCACHE_TRY_ASSIGN(auto output, base::run_program({"/bin/sh", "-c", text}));
  if (output.exit_code != 0) {
    return Error::usage("compiler_check command \"" + text + "\" exited with status " +
                        std::to_string(output.exit_code) + (output.err.empty() ? "" : ": " + output.err));
  }
  return base::sha256_hex(output.out);
}

// The compiler's fingerprint under `check` (docs/formats.md).
Result<std::string> compiler_fingerprint(const fs::path& compiler, const CompilerCheck& check,
                                         const base::DigestCache& cache) {
  switch (check.kind) {
    case CompilerCheck::Kind::content: {
      OPCACHE_TRY_ASSIGN(auto digest, cache.file_sha256(compiler));
      return "content:" + digest;
    }
    case CompilerCheck::Kind::mtime: {
      struct stat info {};
      if (::stat(compiler.c_str(), &info) != 0) {
        return Error::io("cannot stat " + compiler.string() + ": " + std::strerror(errno));
      }
      return "mtime:" + std::to_string(info.st_size) + ":" + std::to_string(info.st_mtim.tv_sec) + "." +
             std::to_string(info.st_mtim.tv_nsec);
    }
    case CompilerCheck::Kind::none: return std::string("none");
    case CompilerCheck::Kind::string: return "string:" + check.argument;
    case CompilerCheck::Kind::command: {
      // Run every time, not remembered by the compiler's identity: what the
      // command reads (a replaced cc1, a changed specs file) is not the compiler file.
      OPCACHE_TRY_ASSIGN(auto digest, run_check_command(check.argument, compiler));
      return "command:" + digest;
    }
  }
  return Error::usage("unknown compiler_check");
}

// The spellings of base_dir that may appear in arguments: as set, and with
// symlinks resolved; none when it is not set.
std::vector<std::string> base_spellings(const fs::path& base_dir) {
  std::vector<std::string> forms;
  if (base_dir.empty()) {
    return forms;
  }
  forms.push_back(base_dir.string());
  std::error_code ec;
  auto resolved = fs::weakly_canonical(base_dir, ec).string();
  if (!ec && resolved != forms.front()) {
    forms.push_back(resolved);
  }
  std::sort(forms.begin(), forms.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return forms;
}

// [input as keyed, digest] for each --input: a file's SHA-256, or "tree:"
// and the digest of a directory's files (those under --out left out).
Result<json> declared_inputs(const std::vector<std::string>& declared, const fs::path& base_dir,
                             const fs::path& canonical_out, const base::DigestCache& cache) {
  const auto base_forms = base_spellings(base_dir);
  json inputs = json::array();
  std::vector<std::string> sorted = declared;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (const auto& input : sorted) {
    struct stat info {};
    if (::stat(input.c_str(), &info) != 0) {
      return Error::usage("--input " + input + ": " + std::strerror(errno));
    }
    if (S_ISDIR(info.st_mode)) {
      OPCACHE_TRY_ASSIGN(auto digest, base::tree_sha256(input, cache, [&canonical_out](const fs::path& file) {
                           return is_below(file, canonical_out);
                         }));
      inputs.push_back(json::array({normalise_paths(input, base_forms, k_base_marker), "tree:" + digest}));
    } else if (S_ISREG(info.st_mode)) {
      OPCACHE_TRY_ASSIGN(auto digest, cache.file_sha256(input));
      inputs.push_back(json::array({normalise_paths(input, base_forms, k_base_marker), digest}));
    } else {
      return Error::usage("--input " + input + " is neither a regular file nor a directory");
    }
  }
  return inputs;
}

json keyed_environment(const std::vector<std::string>& names, const base::EnvLookup& env,
                       const std::vector<std::string>& cann_forms, const std::vector<std::string>& base_forms) {
  json values = json::array();
  for (const auto& name : names) {
    if (auto value = env(name.c_str())) {
      values.push_back(json::array({name, normalise_paths(normalise_paths(*value, cann_forms, k_cann_marker), base_forms,
                                                           k_base_marker)}));
    }
  }
  return values;
}

}  // namespace

Result<json> declared_input_digests(const std::vector<std::string>& inputs, const fs::path& base_dir,
                                    const base::DigestCache& cache) {
  return declared_inputs(inputs, base_dir, fs::path(), cache);
}

Result<json> exec_key_member(const ExecKeyRequest& request, const base::DigestCache& cache, const base::EnvLookup& env) {
  if (request.command.empty()) {
    return Error::usage("no command to run");
  }
  for (std::size_t i = 0; i < request.command.size(); ++i) {
    if (!base::is_valid_utf8(request.command[i])) {
      return Error::usage("argument " + std::to_string(i) + " of the command is not valid UTF-8; exec cannot key it");
    }
  }
  // posix_spawnp's search (PATH unset: confstr's default path), so the compiler keyed is the one run.
  const auto compiler = base::find_program(request.command[0], env("PATH").value_or("/bin:/usr/bin"),
                                           base::EmptyPathEntry::current_directory);
  if (!compiler) {
    return Error::usage("cannot run " + request.command[0] + ": " +
                        (request.command[0].find('/') != std::string::npos ? "no such executable file" : "not found in PATH"));
  }
  std::error_code ec;
  const fs::path resolved = fs::canonical(*compiler, ec);
  OPCACHE_TRY_ASSIGN(auto fingerprint, compiler_fingerprint(ec ? *compiler : resolved, request.policy.compiler_check, cache));

  const auto out_forms = out_spellings(request.out);
  const auto base_forms = base_spellings(request.policy.base_dir);
  const auto cann_forms = base_spellings(request.cann_root);
  std::vector<std::string> keyed_args{fs::path(request.command[0]).filename().string()};
  for (std::size_t i = 1; i < request.command.size(); ++i) {
    auto arg = normalise_paths(request.command[i], out_forms, k_out_marker);
    arg = normalise_paths(std::move(arg), cann_forms, k_cann_marker);
    keyed_args.push_back(normalise_paths(std::move(arg), base_forms, k_base_marker));
  }
  const fs::path canonical_out = fs::weakly_canonical(request.out, ec);
  OPCACHE_TRY_ASSIGN(auto inputs, declared_inputs(request.inputs, request.policy.base_dir, canonical_out, cache));
  json member{{"version", k_exec_key_version},
              {"argv", keyed_args},
              {"compiler", fingerprint},
              {"inputs", std::move(inputs)},
              {"env", keyed_environment(request.policy.environment, env, cann_forms, base_forms)}};
  if (request.stdin_digest) {
    member["stdin"] = *request.stdin_digest;
  }
  return member;
}

Result<json> descriptor_with_exec_member(json descriptor, const json& member, const std::string& origin) {
  if (!descriptor.is_object()) {
    return Error::usage(origin + ": the descriptor must be a JSON object");
  }
  if (descriptor.contains("exec")) {
    return Error::usage(origin + ": the descriptor member \"exec\" is reserved: opcache exec sets it to what the "
                                 "command compiles (docs/formats.md)");
  }
  descriptor["exec"] = member;
  return descriptor;
}

namespace {

// Whether `path` is `directory` or below it, as text: `rest` gets what follows.
bool text_below(std::string_view path, std::string_view directory, std::string_view& rest) {
  while (directory.size() > 1 && directory.back() == '/') {
    directory.remove_suffix(1);
  }
  if (directory.empty() || path.substr(0, directory.size()) != directory) {
    return false;
  }
  rest = path.substr(directory.size());
  return rest.empty() || rest.front() == '/' || directory == "/";
}

}  // namespace

fs::path cann_root_of(const base::EnvLookup& env) {
  for (const char* name : {"ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"}) {
    if (auto value = env(name); value && !value->empty() && value->front() == '/') {
      std::string root = fs::path(*value).lexically_normal().string();
      while (root.size() > 1 && root.back() == '/') {
        root.pop_back();
      }
      return root;
    }
  }
  return {};
}

std::string keyed_path(const std::string& path, const PathFrame& frame) {
  std::string_view rest;
  const std::string absolute_out = fs::absolute(frame.out).lexically_normal().string();
  if (text_below(path, absolute_out, rest)) {
    return std::string(k_out_marker) + std::string(rest);
  }
  if (text_below(path, frame.cann_root.string(), rest)) {
    return std::string(k_cann_marker) + std::string(rest);
  }
  if (text_below(path, frame.base_dir.string(), rest)) {
    return std::string(k_base_marker) + std::string(rest);
  }
  return path;
}

std::optional<std::string> unkeyed_path(const std::string& path, const PathFrame& frame) {
  if (!path.empty() && path.front() == '/') {
    return path;  // the common case, kept off std::filesystem (a hit asks for every input)
  }
  std::string_view rest;
  if (text_below(path, k_out_marker, rest)) {
    return fs::path(fs::absolute(frame.out).lexically_normal().string() + std::string(rest)).lexically_normal().string();
  }
  for (const auto& [marker, directory] : {std::pair{k_cann_marker, &frame.cann_root}, std::pair{k_base_marker, &frame.base_dir}}) {
    if (text_below(path, marker, rest)) {
      if (directory->empty()) {
        return std::nullopt;
      }
      return fs::path(directory->string() + std::string(rest)).lexically_normal().string();
    }
  }
  return path;
}

Result<json> exec_entry_descriptor(json command_descriptor, const std::vector<ObservedInput>& inputs) {
  auto member = command_descriptor.find("exec");
  if (member == command_descriptor.end() || !member->is_object()) {
    return Error::usage("the descriptor has no member \"exec\" to add observed inputs to");
  }
  (*member)["observed"] = observed_inputs_digest(inputs);
  return command_descriptor;
}

std::optional<std::string> exec_command_key_of(const json& descriptor, const json& scenario) {
  const auto member = descriptor.find("exec");
  if (member == descriptor.end() || !member->is_object() || !member->contains("observed")) {
    return std::nullopt;
  }
  json command_descriptor = descriptor;
  command_descriptor["exec"].erase("observed");
  auto key = derive_key(command_descriptor, scenario);
  return key ? std::optional<std::string>(*key) : std::nullopt;
}

}  // namespace opcache::store
