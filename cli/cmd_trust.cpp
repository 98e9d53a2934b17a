// opcache trust keygen / sign: making a signing key, and signing entries
// that are already stored. docs/security.md explains the whole workflow.
#include "base/base64.hpp"
#include "base/ed25519.hpp"
#include "cli/context.hpp"

namespace opcache::cli {

namespace {

constexpr const char* k_trust_footer =
    "How signing works (docs/security.md):\n"
    "  1. On the machine that builds kernels for the team (CI):\n"
    "       opcache trust keygen ci-2026 --out /secrets/opcache-ci.pem   # prints ci-2026:BASE64\n"
    "     and give the key to every write: --signing-key FILE, OPCACHE_SIGNING_KEY or signing_key = FILE.\n"
    "  2. On every machine that reads the team cache, put the printed line in a trusted-keys file and set\n"
    "     --trusted-keys FILE, OPCACHE_TRUSTED_KEYS or trusted_keys = FILE. That alone makes\n"
    "     require_signature default to `remote`: entries from remotes without a valid signature by a trusted\n"
    "     key are refused (a miss; the compiler builds the kernel itself).\n"
    "  3. The team server enforces it too: opcache serve --trusted-keys FILE --require-signature.\n"
    "Rotating: trust the old and the new key, sign with the new one (`opcache sign` re-signs stored entries),\n"
    "push --add-signatures, then remove the old line.";

struct KeygenArgs {
  std::string name;
  std::string out;
};

int run_keygen(const Context& context, const KeygenArgs& args) {
  if (auto valid = check_signer_name(args.name); !valid) {
    return context.fail(valid.error());
  }
  auto key = base::Ed25519PrivateKey::generate();
  if (!key) {
    return context.fail(key.error());
  }
  if (auto saved = key->save_pem_file(args.out); !saved) {
    return context.fail(saved.error());
  }
  const std::string public_key = base::base64_encode(key->public_key());
  if (context.options.json) {
    context.print_json({{"name", args.name}, {"public_key", public_key}});
  } else {
    context.print_text(args.name + ":" + public_key);
  }
  context.note("private key written to " + args.out + " (mode 0600); add the line above to the trusted-keys file "
               "of every reader");
  return k_exit_ok;
}

int run_sign(const Context& context, const std::vector<std::string>& keys) {
  auto store = context.open_store();
  if (!store) {
    return context.fail(store.error());
  }
  auto report = store->sign(keys);
  if (!report) {
    return context.fail(report.error());
  }
  for (const auto& key : report->missing) {
    context.note("not found: " + key);
  }
  for (const auto& key : report->corrupt) {
    context.note("not signed: " + key + " does not match its digest (run opcache verify --repair)");
  }
  if (context.options.json) {
    context.print_json({{"signed", report->signed_entries},
                        {"already_signed", report->already_signed},
                        {"missing", report->missing},
                        {"corrupt", report->corrupt}});
  } else {
    context.print_text("signed " + std::to_string(report->signed_entries) + " entries (" +
                       std::to_string(report->already_signed) + " already signed by this key)");
  }
  if (!report->corrupt.empty()) {
    return k_exit_integrity;
  }
  return report->missing.empty() ? k_exit_ok : k_exit_not_found;
}

}  // namespace

std::vector<Command> register_trust_commands(CLI::App& app, Context& context) {
  auto* trust = app.add_subcommand("trust", "Manage signing keys (see `opcache trust --help`)");
  trust->footer(k_trust_footer);
  trust->require_subcommand(1);
  auto keygen_args = std::make_shared<KeygenArgs>();
  auto* keygen = trust->add_subcommand(
      "keygen", "Create an Ed25519 key pair: the private key to --out (PEM, mode 0600), the public key on stdout");
  keygen->add_option("NAME", keygen_args->name, "Name of the key in trusted-keys files (e.g. ci-2026)")->required();
  keygen->add_option("--out", keygen_args->out, "File for the private key; must not exist")->required();
  keygen->footer("Prints NAME:BASE64 (with --json: {\"name\":…,\"public_key\":…}). Exit status 2 when --out exists.");

  auto keys = std::make_shared<std::vector<std::string>>();
  auto* sign = app.add_subcommand("sign", "Sign stored entries with the signing key (all entries when no KEY)");
  sign->add_option("KEY", *keys, "Entry keys to sign (default: every entry)");
  sign->footer(
      "Needs --signing-key FILE (or OPCACHE_SIGNING_KEY, or signing_key in the config file). Each object is checked "
      "against its digest before it is signed. Signing twice with the same key adds nothing. Then `opcache push "
      "--add-signatures` sends the new signatures to a remote that already has the entries. Exit status 1 when a "
      "KEY is not stored, 3 when an object does not match its digest.");
  return {{keygen, [&context, keygen_args] { return run_keygen(context, *keygen_args); }},
          {sign, [&context, keys] { return run_sign(context, *keys); }}};
}

}  // namespace opcache::cli
