// opcache push / pull: share entries with a remote in bulk.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/context.hpp"
#include "opcache/model.hpp"
#include "base/file_io.hpp"
#include "base/json_parse.hpp"
#include "base/mutex.hpp"
#include "base/sha256.hpp"

namespace opcache::cli {

namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) { g_interrupted = true; }

struct TransferArgs {
  std::string remote;
  std::string scenario;
  std::string op_type;
  std::string keys_file;
  std::vector<std::string> keys;
  int parallelism = 0;
  bool add_signatures = false;
};

// A progress line on a terminal (items, bytes, rate, ETA), nothing on a pipe.
// update() is called from the transfer's worker threads.
class ProgressBar {
 public:
  explicit ProgressBar(const char* verb) : m_verb(verb), m_enabled(::isatty(STDERR_FILENO) != 0) {}

  void update(const TransferProgress& progress) EXCLUDES(m_mutex) {
    if (!m_enabled) {
      return;
    }
    base::MutexLock lock(m_mutex);
    if (progress.seconds - m_last < 0.1 && progress.done != progress.total) {
      return;
    }
    m_last = progress.seconds;
    const double rate = progress.seconds > 0 ? progress.bytes / progress.seconds : 0;
    const double items_rate = progress.seconds > 0 ? progress.done / progress.seconds : 0;
    const double eta = items_rate > 0 ? (progress.total - progress.done) / items_rate : 0;
    const int width = 30;
    const int filled = progress.total > 0 ? static_cast<int>(width * progress.done / progress.total) : width;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r%s [%s] %lld/%lld  %s  %s/s  ETA %ds   ", m_verb, bar.c_str(),
                 static_cast<long long>(progress.done), static_cast<long long>(progress.total),
                 format_bytes(progress.bytes).c_str(), format_bytes(static_cast<std::int64_t>(rate)).c_str(),
                 static_cast<int>(eta));
    m_drawn = true;
  }

  void finish() EXCLUDES(m_mutex) {
    base::MutexLock lock(m_mutex);
    if (m_drawn) {
      std::fprintf(stderr, "\n");
    }
  }

 private:
  const char* const m_verb;
  const bool m_enabled;
  base::Mutex m_mutex;
  bool m_drawn GUARDED_BY(m_mutex) = false;
  double m_last GUARDED_BY(m_mutex) = -1;
};

// Keys from --keys FILE: one key per line, or descriptors (a JSON object per
// line, a JSON array of them, or a model op list {"ops":[...]}) keyed with
// the --scenario.
Result<std::vector<std::string>> keys_from_file(const Store& store, const std::string& path,
                                                const std::string& scenario_text) {
  auto text = base::read_file(path);
  if (!text) {
    return Error::usage("--keys: " + text.error().message());
  }
  std::vector<std::string> keys;
  std::optional<Scenario> scenario;
  auto key_of = [&](const std::string& descriptor) -> Result<std::string> {
    if (!scenario) {
      if (scenario_text.empty()) {
        return Error::usage("--keys " + path + " holds descriptors: give --scenario to key them");
      }
      auto parsed = parse_scenario(scenario_text);
      if (!parsed) {
        return parsed.error();
      }
      scenario = *parsed;
    }
    auto key = store.key(descriptor, *scenario);
    if (!key) {
      return key.error().with_context("--keys " + path);
    }
    return key;
  };
  // A whole-file JSON document: an array of descriptors, or a model op list
  // {"ops": [...]} (pretty-printed like examples/models/*.json). Anything
  // else is read line by line: keys, or one descriptor object per line.
  std::optional<std::vector<std::string>> descriptors;
  const auto first = text->find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text->at(first) == '[') {
    auto parsed = base::parse_json(*text, path);
    if (!parsed) {
      return parsed.error();
    }
    descriptors.emplace();
    for (const auto& descriptor : *parsed) {
      descriptors->push_back(descriptor.dump());
    }
  } else if (first != std::string::npos && text->at(first) == '{') {
    auto parsed = nlohmann::json::parse(*text, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object() && parsed.contains("ops")) {
      auto model = parse_model_op_list(*text, path);
      if (!model) {
        return model.error();
      }
      descriptors.emplace();
      for (const auto& op : model->ops) {
        descriptors->push_back(op.descriptor_json);
      }
    }
  }
  if (descriptors) {
    for (const auto& descriptor : *descriptors) {
      auto key = key_of(descriptor);
      if (!key) {
        return key.error();
      }
      keys.push_back(*key);
    }
  } else {
    std::size_t start = 0;
    int number = 0;
    while (start < text->size()) {
      auto end = text->find('\n', start);
      std::string line = text->substr(start, end == std::string::npos ? std::string::npos : end - start);
      start = end == std::string::npos ? text->size() : end + 1;
      ++number;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
        line.pop_back();
      }
      if (line.empty() || line[0] == '#') {
        continue;
      }
      if (base::is_sha256_hex(line)) {
        keys.push_back(line);
      } else if (line[0] == '{') {
        auto key = key_of(line);
        if (!key) {
          return key.error();
        }
        keys.push_back(*key);
      } else {
        return Error::usage(path + ":" + std::to_string(number) + ": not a key (64 hex) nor a JSON descriptor");
      }
    }
  }
  return keys;
}

Result<ListFilter> filter_from(const TransferArgs& args) {
  ListFilter filter;
  if (!args.scenario.empty()) {
    auto parsed = parse_scenario(args.scenario);
    if (!parsed) {
      return parsed.error();
    }
    filter = scenario_filter(*parsed);
  }
  filter.op_type = args.op_type;
  return filter;
}

int run_transfer(const Context& context, const TransferArgs& args, bool pushing) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  Store::TransferOptions options;
  options.remote = args.remote;
  options.parallelism = args.parallelism;
  options.keys = args.keys;
  options.add_signatures = args.add_signatures;
  if (!args.keys_file.empty()) {
    auto keys = keys_from_file(*store, args.keys_file, args.scenario);
    if (!keys) {
      return context.fail(keys.error());
    }
    options.keys.insert(options.keys.end(), keys->begin(), keys->end());
  }
  if (options.keys.empty()) {
    auto filter = filter_from(args);
    if (!filter) {
      return context.fail(filter.error());
    }
    options.filter = *filter;
  }
  ProgressBar bar(pushing ? "push" : "pull");
  options.progress = [&bar](const TransferProgress& progress) { bar.update(progress); };
  options.cancel = &g_interrupted;
  auto previous_int = std::signal(SIGINT, on_interrupt);
  auto previous_term = std::signal(SIGTERM, on_interrupt);
  auto summary = pushing ? store->push(options) : store->pull(options);
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  bar.finish();
  if (!summary) {
    return context.fail(summary.error());
  }
  if (context.options.json) {
    nlohmann::json failures = nlohmann::json::array();
    for (const auto& [key, reason] : summary->failures) {
      failures.push_back({{"key", key}, {"reason", reason}});
    }
    context.print_json({{"remote", summary->remote},
                        {"requested", summary->requested},
                        {"transferred", summary->transferred},
                        {"skipped", summary->skipped},
                        {"failed", summary->failed},
                        {"refused", summary->refused},
                        {"signatures_sent", summary->signatures_sent},
                        {"manifests", summary->manifests},
                        {"bytes", summary->bytes},
                        {"seconds", summary->seconds},
                        {"interrupted", summary->interrupted},
                        {"failures", failures}});
  } else {
    for (const auto& [key, reason] : summary->failures) {
      context.note("failed " + key + ": " + reason);
    }
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.2f s", summary->seconds);
    context.print_text(std::string(pushing ? "pushed " : "pulled ") + std::to_string(summary->transferred) + " of " +
                       std::to_string(summary->requested) + " (" + std::to_string(summary->skipped) +
                       " skipped, " + std::to_string(summary->failed) + " failed" +
                       (summary->refused > 0 ? ", " + std::to_string(summary->refused) + " refused as untrusted" : "") +
                       "), " + format_bytes(summary->bytes) +
                       " in " + rate + (pushing ? " to " : " from ") + summary->remote +
                       (summary->interrupted ? " — interrupted" : ""));
  }
  if (summary->refused > 0) {
    return k_exit_integrity;  // the signature requirement refused entries: an integrity failure
  }
  if (summary->failed > 0) {
    return k_exit_remote;
  }
  return summary->interrupted ? 130 : k_exit_ok;
}

void add_common(CLI::App& command, TransferArgs& args) {
  command.add_option("--from-remote,--to-remote,-r", args.remote,
                     "Which remote: its URL or position (1, 2, ...); default the first configured");
  command.add_option("--scenario,-s", args.scenario, "Only entries of this scenario (and keys descriptors in --keys)");
  command.add_option("--op-type,-t", args.op_type, "Only entries of this op type");
  command.add_option("--parallel,-j", args.parallelism, "Concurrent transfers (default: the remote's parallelism, 8)")
      ->check(integer_in(1, 256));
  command.add_option("keys", args.keys, "Keys (default: every entry matching the filters)");
}

}  // namespace

std::vector<Command> register_transfer_commands(CLI::App& app, Context& context) {
  auto push_args = std::make_shared<TransferArgs>();
  auto* push = app.add_subcommand("push", "Upload local entries the remote lacks");
  push->footer(
      "One batch query finds what the remote lacks, then parallel uploads over reused connections.\n"
      "Exit status 4 if any upload failed.\n\n"
      "Example:\n  opcache --remote https://cache.example:8443 --token-file ci.token push --scenario "
      "device=multi,phase=train,toolchain=8.0.RC2,soc=Ascend910B1");
  add_common(*push, *push_args);
  push->add_flag("--add-signatures", push_args->add_signatures,
                 "Also send the signatures of entries the remote already has (after opcache sign)");

  auto pull_args = std::make_shared<TransferArgs>();
  auto* pull = app.add_subcommand("pull", "Download entries the local store lacks (prefetch before a run)");
  pull->footer(
      "Every downloaded bundle is verified before it is stored. --keys FILE takes keys (one per line) or\n"
      "descriptors (a JSON object per line, a JSON array, or a model op list {\"ops\":[...]}) keyed with\n"
      "--scenario. Exit status 3 if the signature requirement refused any entry (see opcache help trust), "
      "else 4 if any download failed.\n\n"
      "Example:\n  opcache --remote https://cache.example:8443 pull --keys model.ops.json "
      "--scenario phase=train,toolchain=8.0.RC2,soc=Ascend910B1");
  add_common(*pull, *pull_args);
  pull->add_option("--keys", pull_args->keys_file, "File of keys or descriptors to fetch");
  return {{push, [&context, push_args] { return run_transfer(context, *push_args, true); }},
          {pull, [&context, pull_args] { return run_transfer(context, *pull_args, false); }}};
}

}  // namespace opcache::cli
