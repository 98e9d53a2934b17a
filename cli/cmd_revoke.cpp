// opcache revoke / unrevoke: take a bad kernel back out of every cache
// (docs/remotes.md "Revocation"), or out of this one (--local).
#include "cli/context.hpp"

namespace opcache::cli {

namespace {

struct RevokeArgs {
  std::vector<std::string> keys;
  std::string reason;
  std::string remote;
  bool local = false;
};

Store::RevokeOptions revoke_options(const RevokeArgs& args) {
  Store::RevokeOptions options;
  options.keys = args.keys;
  options.reason = args.reason;
  options.remote = args.remote;
  options.local = args.local;
  return options;
}

// Where the command acted, for messages and --json.
std::string place(const Store& store, const RevokeArgs& args) {
  if (args.local) {
    return store.root().string();
  }
  const auto names = store.remote_names();
  if (args.remote.empty() && !names.empty()) {
    return names.front().substr(0, names.front().find(' '));
  }
  return args.remote;
}

int run_revoke(const Context& context, const RevokeArgs& args) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto deleted = store->revoke(revoke_options(args));
  if (!deleted) {
    return context.fail(deleted.error());
  }
  const std::string where = place(*store, args);
  if (context.options.json) {
    nlohmann::json keys = nlohmann::json::array();
    for (std::size_t i = 0; i < args.keys.size(); ++i) {
      keys.push_back({{"key", args.keys[i]}, {"deleted", static_cast<bool>((*deleted)[i])}});
    }
    context.print_json({{"revoked", keys}, {"reason", args.reason}, {"local", args.local}, {"where", where}});
  } else {
    for (std::size_t i = 0; i < args.keys.size(); ++i) {
      context.print_text("revoked " + args.keys[i] + ((*deleted)[i] ? " (entry deleted)" : " (no entry held)"));
    }
    context.note(args.local ? "revoked in " + where + " only: no remote will bring these keys back here"
                            : "revoked on " + where + ": every client drops them at its next contact");
  }
  return k_exit_ok;
}

int run_unrevoke(const Context& context, const RevokeArgs& args) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto removed = store->unrevoke(revoke_options(args));
  if (!removed) {
    return context.fail(removed.error());
  }
  bool all = true;
  if (context.options.json) {
    nlohmann::json keys = nlohmann::json::array();
    for (std::size_t i = 0; i < args.keys.size(); ++i) {
      keys.push_back({{"key", args.keys[i]}, {"unrevoked", static_cast<bool>((*removed)[i])}});
      all = all && (*removed)[i];
    }
    context.print_json({{"unrevoked", keys}, {"local", args.local}, {"where", place(*store, args)}});
  } else {
    for (std::size_t i = 0; i < args.keys.size(); ++i) {
      context.print_text(((*removed)[i] ? "unrevoked " : "not revoked: ") + args.keys[i]);
      all = all && (*removed)[i];
    }
  }
  return all ? k_exit_ok : k_exit_not_found;
}

void add_common_options(CLI::App& command, RevokeArgs& args) {
  command.add_option("KEY", args.keys, "Keys (64 lowercase hex; `opcache key` prints a descriptor's)")->required();
  command.add_option("--from-remote,-r", args.remote,
                     "Which remote: its URL or position (1, 2, ...); default the first configured (--remote URL)");
  command.add_flag("--local", args.local, "This cache directory only: no remote is asked");
}

}  // namespace

std::vector<Command> register_revoke_commands(CLI::App& app, Context& context) {
  auto revoke_args = std::make_shared<RevokeArgs>();
  auto* revoke = app.add_subcommand("revoke", "Revoke bad kernels: every client deletes them and builds them again");
  add_common_options(*revoke, *revoke_args);
  revoke->add_option("--reason", revoke_args->reason, "Why (one line, shown to every client); required")->required();
  revoke->footer(
      "On the remote (a team server needs an admin token: --token-file or OPCACHE_TOKEN), the keys get a tombstone "
      "and their entries are deleted; the server answers them 410 Gone and refuses their upload until `opcache "
      "unrevoke`. Clients delete them from their stores at their next contact (revocation_check_interval). With a "
      "signing key (--signing-key) the request is signed; a server with trusted keys requires that.\n"
      "With --local, only this cache directory: the entries are deleted and a local tombstone keeps any remote from "
      "bringing them back until `opcache unrevoke --local`.\n"
      "Examples:\n"
      "  opcache --remote https://cache.example:8443 --token-file admin.token revoke KEY --reason 'wrong results on 910B'\n"
      "  opcache revoke --local KEY --reason 'crashes here'\n"
      "Exit status 2 for a bad key or reason, 4 when the remote refuses (token scope, signature) or fails.");
  auto unrevoke_args = std::make_shared<RevokeArgs>();
  auto* unrevoke = app.add_subcommand("unrevoke", "Take a revocation back: the keys may be stored and served again");
  add_common_options(*unrevoke, *unrevoke_args);
  unrevoke->footer(
      "Removes the tombstones (on the remote: admin token; with --local: in this cache directory). Clients that "
      "deleted the entries build or pull them again as for any miss.\n"
      "Example:\n  opcache --remote https://cache.example:8443 --token-file admin.token unrevoke KEY\n"
      "Exit status 1 when a KEY was not revoked.");
  return {{revoke, [&context, revoke_args] { return run_revoke(context, *revoke_args); }},
          {unrevoke, [&context, unrevoke_args] { return run_unrevoke(context, *unrevoke_args); }}};
}

}  // namespace opcache::cli
