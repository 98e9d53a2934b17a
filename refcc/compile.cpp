#include "refcc/compile.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/subprocess.hpp"
#include "base/temporary_directory.hpp"
#include "base/try.hpp"

namespace opcache::refcc {

namespace fs = std::filesystem;

namespace {

// Runs the compiler; a compiler that cannot be started gets a hint.
Result<base::ProcessOutput> run_compiler(const std::vector<std::string>& argv, const fs::path& cwd = {}) {
  auto output = base::run_program(argv, cwd);
  if (!output && output.error().code() == ErrorCode::build_failed) {
    return Error::build_failed(output.error().message() + " (install a C compiler or set CC / --cc)");
  }
  return output;
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> words;
  for (std::string word; stream >> word;) {
    words.push_back(word);
  }
  return words;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& w : words) {
    text += (text.empty() ? "" : " ") + w;
  }
  return text;
}

// Where a compile stages its source: the system's temp directory, else /tmp.
fs::path staging_parent() {
  std::error_code ec;
  fs::path parent = fs::temp_directory_path(ec);
  return ec ? fs::path("/tmp") : parent;
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) {
    return Error::io("cannot write " + path.string());
  }
  return {};
}

}  // namespace

const std::vector<std::string>& compile_flags() {
  // -ffp-contract=off: no fused multiply-add, so results do not depend on the
  // target's FMA support (a reference compiler should be reproducible).
  static const std::vector<std::string> k_flags = {"-std=c11", "-O2", "-fPIC", "-ffp-contract=off", "-c"};
  return k_flags;
}

Result<Compiler> detect_compiler(const std::string& command) {
  std::string text = command;
  if (text.empty()) {
    const char* cc = std::getenv("CC");
    text = cc != nullptr && *cc != '\0' ? cc : "cc";
  }
  Compiler compiler;
  compiler.command = split_words(text);
  if (compiler.command.empty()) {
    return Error::usage("the C compiler command is empty (check --cc or CC)");
  }
  auto argv = compiler.command;
  argv.push_back("--version");
  OPCACHE_TRY_ASSIGN(auto output, run_compiler(argv));
  const std::string first_line = output.out.substr(0, output.out.find('\n'));
  if (output.exit_code != 0 || first_line.empty()) {
    return Error::build_failed("\"" + joined(argv) + "\" failed (exit " + std::to_string(output.exit_code) +
                               "); refcc needs the compiler's version for its cache key: " + output.err);
  }
  compiler.identity = first_line;
  return compiler;
}

Status compile_c(const Compiler& compiler, const std::string& source, const std::string& name, const fs::path& object) {
  OPCACHE_TRY_ASSIGN(auto temp, base::TemporaryDirectory::create(staging_parent(), "refcc-"));
  const std::string file = name + ".c";
  OPCACHE_TRY(write_text(temp.path() / file, source));
  std::vector<std::string> argv = compiler.command;
  for (const auto& flag : compile_flags()) {
    argv.push_back(flag);
  }
  argv.push_back("-o");
  argv.push_back(fs::absolute(object).string());
  argv.push_back(file);
  OPCACHE_TRY_ASSIGN(auto output, run_compiler(argv, temp.path()));
  if (output.exit_code != 0) {
    return Error::build_failed(joined(compiler.command) + " failed compiling " + file + " (exit " +
                               std::to_string(output.exit_code) + "):\n" + output.err);
  }
  return {};
}

}  // namespace opcache::refcc
