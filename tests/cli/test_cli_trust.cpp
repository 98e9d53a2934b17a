// End-to-end tests of signing through the `opcache` command: trust keygen,
// signing on put, ls --json signatures, sign, verify --signatures, the
// default policy, require_signature=all, and an opcache signature checked by
// `openssl pkeyutl -verify -rawin` against the printed public key.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/base64.hpp"
#include "base/file_io.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using opcache::test::CliRunner;
using opcache::test::contains;
using opcache::test::hermetic;
using opcache::test::make_kernel;
using opcache::test::TempDir;

namespace {

// `opcache trust keygen NAME --out DIR/NAME.pem`: the printed NAME:BASE64 line.
std::string keygen(const CliRunner& cli, const std::string& name) {
  auto result = cli.run({"trust", "keygen", name, "--out", (cli.dir() / (name + ".pem")).string()});
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  REQUIRE(!result.out.empty());
  return result.out.substr(0, result.out.find('\n'));
}

fs::path key_file(const CliRunner& cli, const std::string& name) { return cli.dir() / (name + ".pem"); }

fs::path trusted_file(const CliRunner& cli, const std::vector<std::string>& lines) {
  std::string text = "# trusted signers\n";
  for (const auto& line : lines) {
    text += line + "\n";
  }
  const auto path = cli.dir() / "trusted.keys";
  opcache::test::write_text(path, text);
  return path;
}

json only_entry(const CliRunner& cli, const std::vector<std::string>& global = {}) {
  std::vector<std::string> args = global;
  args.push_back("ls");
  auto listing = cli.run_json(args);
  REQUIRE(listing["entries"].size() == 1);
  return listing["entries"][0];
}

}  // namespace

TEST_CASE("cli::trust keygen writes a 0600 PEM key, prints NAME:BASE64 and refuses to overwrite (exit 2)") {
  TempDir temp;
  CliRunner cli(temp);
  const std::string line = keygen(cli, "ci-2026");
  REQUIRE(line.rfind("ci-2026:", 0) == 0);
  auto public_key = opcache::base::base64_decode(line.substr(8));
  REQUIRE(public_key);
  CHECK(public_key->size() == 32);
  struct stat info {};
  REQUIRE(::stat(key_file(cli, "ci-2026").c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);

  const auto before = opcache::test::read_text(key_file(cli, "ci-2026"));
  auto again = cli.run({"trust", "keygen", "ci-2026", "--out", key_file(cli, "ci-2026").string()});
  CHECK(again.exit_code == 2);
  CHECK(contains(again.err, "already exists"));
  CHECK(opcache::test::read_text(key_file(cli, "ci-2026")) == before);

  auto document = cli.run_json({"trust", "keygen", "dev", "--out", key_file(cli, "dev").string()});
  CHECK(document["name"] == "dev");
  CHECK(opcache::base::base64_decode(document["public_key"].get<std::string>())->size() == 32);
  CHECK(cli.run({"trust", "keygen", "bad name", "--out", (temp / "x.pem").string()}).exit_code == 2);
  CHECK_FALSE(fs::exists(temp / "x.pem"));
}

TEST_CASE("cli::put with --signing-key signs the entry, and openssl pkeyutl verifies the signature") {
  TempDir temp;
  CliRunner cli(temp);
  const std::string line = keygen(cli, "ci");
  const auto kernel = make_kernel(temp / "k", "square", 8);
  cli.put(kernel, opcache::test::k_test_scenario, {}, hermetic({{"OPCACHE_SIGNING_KEY", key_file(cli, "ci").string()}}));
  const json entry = only_entry(cli, {"--trusted-keys", trusted_file(cli, {line}).string()});
  REQUIRE(entry["signatures"].size() == 1);
  const json signature = entry["signatures"][0];
  CHECK(signature["public_key"] == line.substr(3));
  CHECK(signature["name"] == "ci");
  const std::string key = entry["key"];
  const std::string digest = entry["digest"];
  // The digest is the SHA-256 of the object's bytes.
  CHECK(fs::exists(cli.cache() / "objects" / digest.substr(0, 2) / digest));

  // openssl: SubjectPublicKeyInfo DER of the raw key, the message, the raw signature.
  const std::string der_prefix("\x30\x2a\x30\x05\x06\x03\x2b\x65\x70\x03\x21\x00", 12);
  opcache::test::write_text(temp / "pub.der", der_prefix + *opcache::base::base64_decode(signature["public_key"].get<std::string>()));
  opcache::test::write_text(temp / "message", "opcache-sig-v1\n" + key + "\n" + digest);
  opcache::test::write_text(temp / "sig.bin", *opcache::base::base64_decode(signature["signature"].get<std::string>()));
  auto verified = opcache::test::run_process({"openssl", "pkeyutl", "-verify", "-pubin", "-inkey",
                                              (temp / "pub.der").string(), "-keyform", "DER", "-rawin", "-in",
                                              (temp / "message").string(), "-sigfile", (temp / "sig.bin").string()});
  INFO(verified.out, verified.err);
  CHECK(verified.exit_code == 0);
  CHECK(contains(verified.out, "Signature Verified Successfully"));
  // The same check over another digest fails.
  opcache::test::write_text(temp / "message", "opcache-sig-v1\n" + key + "\n" + std::string(64, '0'));
  CHECK(opcache::test::run_process({"openssl", "pkeyutl", "-verify", "-pubin", "-inkey", (temp / "pub.der").string(),
                                    "-keyform", "DER", "-rawin", "-in", (temp / "message").string(), "-sigfile",
                                    (temp / "sig.bin").string()})
            .exit_code != 0);
}

TEST_CASE("cli::a signing key readable by group or others is refused with a clear error") {
  TempDir temp;
  CliRunner cli(temp);
  keygen(cli, "ci");
  fs::permissions(key_file(cli, "ci"), fs::perms::group_read | fs::perms::others_read, fs::perm_options::add);
  const auto kernel = make_kernel(temp / "k", "square", 8);
  auto result = cli.run({"--signing-key", key_file(cli, "ci").string(), "put", "--desc",
                         cli.descriptor_file(kernel).string(), "--scenario", opcache::test::k_test_scenario,
                         kernel.object.string()});
  CHECK(result.exit_code == 2);
  CHECK(contains(result.err, "signing_key (from --signing-key)"));
  CHECK(contains(result.err, "chmod 600"));
  CHECK(cli.run_json({"ls"})["count"] == 0);
}

TEST_CASE("cli::sign signs stored entries once, and verify --signatures exits 3 until every entry is trusted") {
  TempDir temp;
  CliRunner cli(temp);
  const std::string line = keygen(cli, "ci");
  const auto trusted = trusted_file(cli, {line});
  cli.put(make_kernel(temp / "k1", "square", 8));
  cli.put(make_kernel(temp / "k2", "relu", 8));
  const std::vector<std::string> trust{"--trusted-keys", trusted.string()};

  auto check = cli.run_json({"--trusted-keys", trusted.string(), "verify", "--signatures"}, 3);
  CHECK(check["require_signature"] == "remote");  // the default once trusted keys are set
  REQUIRE(check["untrusted"].size() == 2);
  CHECK(check["untrusted"][0]["reason"] == "unsigned");
  CHECK(check["untrusted"][0]["code"] == "signature_required");
  CHECK(check["ok"] == false);
  // With the policy off the same findings are reported but are no failure.
  cli.run_json({"--trusted-keys", trusted.string(), "--require-signature", "off", "verify", "--signatures"}, 0);

  auto no_key = cli.run({"sign"});
  CHECK(no_key.exit_code == 2);
  CHECK(contains(no_key.err, "--signing-key"));
  auto signed_now = cli.run_json({"--signing-key", key_file(cli, "ci").string(), "sign"});
  CHECK(signed_now["signed"] == 2);
  auto signed_again = cli.run_json({"--signing-key", key_file(cli, "ci").string(), "sign"});
  CHECK(signed_again["signed"] == 0);
  CHECK(signed_again["already_signed"] == 2);
  auto listing = cli.run_json({"ls"});
  for (const auto& entry : listing["entries"]) {
    CHECK(entry["signatures"].size() == 1);
    CHECK_FALSE(entry["signatures"][0].contains("name"));  // no trusted keys given to this ls
  }
  check = cli.run_json({"--trusted-keys", trusted.string(), "verify", "--signatures"}, 0);
  CHECK(check["untrusted"].empty());
  CHECK(check["ok"] == true);
}

TEST_CASE("cli::require_signature=all makes an unsigned local entry a miss (exit 1), counted as refused") {
  TempDir temp;
  CliRunner cli(temp);
  const std::string line = keygen(cli, "ci");
  const auto trusted = trusted_file(cli, {line});
  const auto put = cli.put(make_kernel(temp / "k1", "square", 8));
  const std::string key = put["key"];
  const auto strict = hermetic({{"OPCACHE_TRUSTED_KEYS", trusted.string()}, {"OPCACHE_REQUIRE_SIGNATURE", "all"}});
  auto miss = cli.run({"get", key, "--out", (temp / "out").string()}, strict);
  CHECK(miss.exit_code == 1);
  CHECK(contains(miss.err, "refused: unsigned"));
  CHECK((!fs::exists(temp / "out") || fs::is_empty(temp / "out")));
  auto stats = cli.run_json({"stats"}, 0, strict);
  CHECK(stats["counters"]["refused_untrusted"] == 1);
  // Under the default (remote) policy the local entry is served.
  auto hit = cli.run({"--trusted-keys", trusted.string(), "get", key, "--out", (temp / "out").string()});
  CHECK(hit.exit_code == 0);
  // Once signed by the trusted key, `all` serves it too.
  cli.run_json({"--signing-key", key_file(cli, "ci").string(), "sign", key});
  CHECK(cli.run({"get", key, "--out", (temp / "out2").string()}, strict).exit_code == 0);
}

TEST_CASE("cli::config shows the signature settings and their sources") {
  TempDir temp;
  CliRunner cli(temp);
  const auto trusted = trusted_file(cli, {keygen(cli, "ci")});
  auto plain = cli.run({"config"});
  REQUIRE(plain.exit_code == 0);
  CHECK(contains(plain.out, "require_signature"));
  auto with_keys = cli.run({"config"}, hermetic({{"OPCACHE_TRUSTED_KEYS", trusted.string()}}));
  REQUIRE(with_keys.exit_code == 0);
  CHECK(contains(with_keys.out, "default (trusted_keys is set)"));
  auto bad = cli.run({"--require-signature", "sometimes", "config"});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "expected off, remote or all"));
  auto missing = cli.run({"--trusted-keys", (temp / "absent.keys").string(), "ls"});
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.err, "trusted_keys (from --trusted-keys)"));
}
