#include "cli/exec_key.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/program_search.hpp"
#include "base/sha256.hpp"
#include "base/subprocess.hpp"
#include "base/try.hpp"
#include "base/utf8.hpp"

namespace opcache::cli {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;

constexpr std::string_view k_out_marker = "{out}";

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

// `arg` with every path occurrence of --out replaced by "{out}", so that the
// same command from rank_0/kernel_meta and rank_7/kernel_meta has one key.
std::string normalise_out(std::string arg, const std::vector<std::string>& out_forms) {
  for (const auto& form : out_forms) {
    for (std::size_t pos = arg.find(form); pos != std::string::npos; pos = arg.find(form, pos)) {
      if (is_path_occurrence(arg, pos, form.size())) {
        arg.replace(pos, form.size(), k_out_marker);
        pos += k_out_marker.size();
      } else {
        ++pos;
      }
    }
  }
  return arg;
}

bool is_regular_file_at(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
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
      OPCACHE_TRY_ASSIGN(auto digest,
                         cache.digest(compiler, "command:" + check.argument,
                                      [&check](const fs::path& path) { return run_check_command(check.argument, path); }));
      return "command:" + digest;
    }
  }
  return Error::usage("unknown compiler_check");
}

// [argument as keyed, digest] for each argument after argv[0] that names an
// existing regular file outside --out.
Result<json> argument_files(const ExecKeyRequest& request, const std::vector<std::string>& keyed_args,
                            const fs::path& canonical_out, const base::DigestCache& cache) {
  json files = json::array();
  for (std::size_t i = 1; i < request.command.size(); ++i) {
    const fs::path path = request.command[i];
    if (request.command[i].empty() || !is_regular_file_at(path) || is_below(path, canonical_out)) {
      continue;
    }
    OPCACHE_TRY_ASSIGN(auto digest, cache.file_sha256(path));
    files.push_back(json::array({keyed_args[i], digest}));
  }
  return files;
}

// [input as given, digest] for each --input: a file's SHA-256, or "tree:"
// and the digest of a directory's files (those under --out left out).
Result<json> declared_inputs(const ExecKeyRequest& request, const fs::path& canonical_out,
                             const base::DigestCache& cache) {
  json inputs = json::array();
  std::vector<std::string> sorted = request.inputs;
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
      inputs.push_back(json::array({input, "tree:" + digest}));
    } else if (S_ISREG(info.st_mode)) {
      OPCACHE_TRY_ASSIGN(auto digest, cache.file_sha256(input));
      inputs.push_back(json::array({input, digest}));
    } else {
      return Error::usage("--input " + input + " is neither a regular file nor a directory");
    }
  }
  return inputs;
}

json keyed_environment(const std::vector<std::string>& names, const base::EnvLookup& env) {
  json values = json::array();
  for (const auto& name : names) {
    if (auto value = env(name.c_str())) {
      values.push_back(json::array({name, *value}));
    }
  }
  return values;
}

}  // namespace

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
  std::vector<std::string> keyed_args{fs::path(request.command[0]).filename().string()};
  for (std::size_t i = 1; i < request.command.size(); ++i) {
    keyed_args.push_back(normalise_out(request.command[i], out_forms));
  }
  const fs::path canonical_out = fs::weakly_canonical(request.out, ec);
  OPCACHE_TRY_ASSIGN(auto files, argument_files(request, keyed_args, canonical_out, cache));
  OPCACHE_TRY_ASSIGN(auto inputs, declared_inputs(request, canonical_out, cache));
  return json{{"version", k_exec_key_version},
              {"argv", keyed_args},
              {"compiler", fingerprint},
              {"files", std::move(files)},
              {"inputs", std::move(inputs)},
              {"env", keyed_environment(request.policy.environment, env)}};
}

Result<std::string> descriptor_with_exec_member(std::string_view descriptor_text, const json& member,
                                                const std::string& origin) {
  auto descriptor = json::parse(descriptor_text, nullptr, false);
  if (descriptor.is_discarded() || !descriptor.is_object()) {
    return Error::usage(origin + ": the descriptor must be a JSON object");
  }
  if (descriptor.contains("exec")) {
    return Error::usage(origin + ": the descriptor member \"exec\" is reserved: opcache exec sets it to what the "
                                 "command compiles (docs/formats.md)");
  }
  descriptor["exec"] = member;
  return descriptor.dump();
}

}  // namespace opcache::cli
