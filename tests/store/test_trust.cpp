// Signatures and the trust policy (store/signature.hpp, store/trust.hpp) and
// how the local store applies them: signing on put, refusing remote entries
// that no trusted key vouches for (each reason), local reads under `all`,
// adding signatures and `sign`.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/base64.hpp"
#include "base/ed25519.hpp"
#include "base/file_io.hpp"
#include "opcache/scenario.hpp"
#include "store/key.hpp"
#include "store/local_store.hpp"
#include "store/scenario.hpp"
#include "store/signature.hpp"
#include "store/trust.hpp"
#include "tests/support/bundle_inputs.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/signing_keys.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::ErrorCode;
using opcache::ReplacePolicy;
using opcache::base::Ed25519PrivateKey;
using opcache::store::LocalStore;
using opcache::store::Provenance;
using opcache::store::RefusalReason;
using opcache::store::SignatureRequirement;
using opcache::store::Signatures;
using opcache::store::TrustedKeys;
using opcache::store::TrustPolicy;
using opcache::test::input_for;
using opcache::test::KernelTriple;
using opcache::test::make_kernel;
using opcache::test::new_signing_key;
using opcache::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string trusted_line(const std::string& name, const Ed25519PrivateKey& key) {
  return name + ":" + opcache::base::base64_encode(key.public_key()) + "\n";
}

std::shared_ptr<const TrustPolicy> policy(const std::string& trusted_text, SignatureRequirement requirement) {
  auto parsed = TrustedKeys::parse(trusted_text, "trusted.keys");
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message()));
  auto made = std::make_shared<TrustPolicy>();
  made->trusted = std::move(*parsed);
  made->requirement = requirement;
  return made;
}

// A store at `root` with an optional signing key and policy; warnings recorded.
struct TrustFixture {
  TrustFixture(const fs::path& root, std::shared_ptr<const Ed25519PrivateKey> signing_key,
               std::shared_ptr<const TrustPolicy> trust) {
    opcache::store::StoreOptions options;
    options.root = root;
    options.signing_key = std::move(signing_key);
    options.trust = std::move(trust);
    options.warn = [this](const std::string& message) { warnings.push_back(message); };
    auto opened = LocalStore::open(std::move(options));
    REQUIRE_MESSAGE(opened.ok(), (opened.ok() ? "" : opened.error().message()));
    store = std::move(*opened);
  }
  LocalStore* operator->() { return store.get(); }

  std::int64_t counter(const std::string& name) {
    auto stats = store->stats();
    REQUIRE(stats.ok());
    auto it = stats->counters.find(name);
    return it == stats->counters.end() ? 0 : it->second;
  }

  std::vector<std::string> warnings;
  std::unique_ptr<LocalStore> store;
};

// An entry as a remote would hand it over: the bundle bytes, its key and digest.
struct RemoteEntry {
  std::string key;
  std::string digest;
  std::string bytes;
  Signatures signatures;
};

RemoteEntry make_remote_entry(TrustFixture& producer, const KernelTriple& kernel) {
  auto put = producer->put(input_for(kernel), ReplacePolicy::keep_existing);
  REQUIRE(put.ok());
  auto entry = producer->lookup(put->key);
  REQUIRE(entry.ok());
  REQUIRE(entry->has_value());
  auto bytes = opcache::base::read_file(producer->layout().object_path(put->digest));
  REQUIRE(bytes.ok());
  return {put->key, put->digest, *bytes, (*entry)->signatures};
}

// Hands `entry` to `consumer` the way remote/ does (adopt with provenance).
opcache::Result<opcache::PutResult> adopt_from_remote(TrustFixture& consumer, const RemoteEntry& entry,
                                                      const Signatures& signatures) {
  auto file = consumer->create_temp();
  REQUIRE(file.ok());
  REQUIRE(file->write(entry.bytes.data(), entry.bytes.size()).ok());
  return consumer->adopt(std::move(*file), entry.key, ReplacePolicy::keep_existing,
                         opcache::base::Durability::synced, Provenance{true, "https://cache.test", signatures});
}

void check_refused(TrustFixture& consumer, const RemoteEntry& entry, const Signatures& signatures,
                   const std::string& reason) {
  const auto before = consumer.counter("refused_untrusted");
  auto adopted = adopt_from_remote(consumer, entry, signatures);
  REQUIRE_FALSE(adopted.ok());
  CHECK(adopted.error().code() == ErrorCode::untrusted);
  CHECK(adopted.error().message().find(reason) != std::string::npos);
  CHECK(adopted.error().message().find(entry.key) != std::string::npos);
  CHECK(consumer.counter("refused_untrusted") == before + 1);
  auto found = consumer->lookup(entry.key);
  REQUIRE(found.ok());
  CHECK_FALSE(found->has_value());  // nothing stored
  REQUIRE_FALSE(consumer.warnings.empty());
  CHECK(consumer.warnings.back().find(reason) != std::string::npos);
}

}  // namespace

TEST_CASE("store::signature formats one signature as two base64 fields and parses only that back") {
  const auto key = new_signing_key();
  auto signature = opcache::store::sign_entry(key, std::string(64, 'a'), std::string(64, 'b'));
  REQUIRE(signature.ok());
  CHECK(signature->public_key.size() == 32);
  CHECK(signature->signature.size() == 64);
  const auto text = opcache::store::format_signature(*signature);
  auto parsed = opcache::store::parse_signature(text);
  REQUIRE(parsed.ok());
  CHECK(*parsed == *signature);
  auto list = opcache::store::parse_signatures(text + "\n\n" + text + "\n");
  REQUIRE(list.ok());
  CHECK(list->size() == 1);  // the same signer twice counts once
  for (const std::string& bad : {std::string("no-colon"), text.substr(0, 10) + ":" + text.substr(45),
                                "QUJD:" + text.substr(text.find(':') + 1), text + "x"}) {
    INFO(bad);
    CHECK(opcache::store::parse_signature(bad).error().code() == ErrorCode::usage);
  }
}

TEST_CASE("store::signature covers exactly opcache-sig-v1, the key and the digest") {
  const auto key = new_signing_key();
  const std::string entry_key(64, 'c');
  const std::string digest(64, 'd');
  CHECK(opcache::store::signed_message(entry_key, digest) == "opcache-sig-v1\n" + entry_key + "\n" + digest);
  auto signature = opcache::store::sign_entry(key, entry_key, digest);
  REQUIRE(signature.ok());
  CHECK(opcache::store::signature_verifies(*signature, entry_key, digest));
  CHECK_FALSE(opcache::store::signature_verifies(*signature, entry_key, std::string(64, 'e')));
  CHECK_FALSE(opcache::store::signature_verifies(*signature, std::string(64, 'f'), digest));
}

TEST_CASE("store::TrustedKeys reads NAME:BASE64 lines with comments and names each malformed line") {
  const auto a = new_signing_key();
  const auto b = new_signing_key();
  auto parsed = TrustedKeys::parse("# team keys\n\n  " + trusted_line("ci-2026", a) + trusted_line("dev.alice@x", b),
                                   "keys");
  REQUIRE(parsed.ok());
  REQUIRE(parsed->keys().size() == 2);
  REQUIRE(parsed->find(a.public_key()) != nullptr);
  CHECK(parsed->find(a.public_key())->name == "ci-2026");
  CHECK(parsed->find(std::string(32, 'x')) == nullptr);

  const std::string good = opcache::base::base64_encode(a.public_key());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"no colon here\n", "keys:1: expected NAME:BASE64"},
      {"bad name:" + good + "\n", "keys:1: the name \"bad name\""},
      {"short:QUJD\n", "keys:1: the key of \"short\" is not the base64 of a 32-byte"},
      {"# c\nx:" + good + "\nx:" + opcache::base::base64_encode(b.public_key()) + "\n", "keys:3: the name \"x\" is given twice"},
      {"x:" + good + "\ny:" + good + "\n", "keys:2: the key of \"y\" is already trusted as \"x\""},
  };
  for (const auto& [text, message] : bad) {
    auto refused = TrustedKeys::parse(text, "keys");
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code() == ErrorCode::usage);
    CHECK_MESSAGE(refused.error().message().find(message) == 0, refused.error().message());
  }
}

TEST_CASE("store::judge_signatures accepts one valid trusted signature and names why it refuses otherwise") {
  const auto trusted_key = new_signing_key();
  const auto other_key = new_signing_key();
  auto trusted = TrustedKeys::parse(trusted_line("ci", trusted_key), "keys");
  REQUIRE(trusted.ok());
  const std::string key(64, '1');
  const std::string digest(64, '2');
  auto good = opcache::store::sign_entry(trusted_key, key, digest);
  auto foreign = opcache::store::sign_entry(other_key, key, digest);
  auto other_digest = opcache::store::sign_entry(trusted_key, key, std::string(64, '3'));
  REQUIRE((good.ok() && foreign.ok() && other_digest.ok()));

  CHECK_FALSE(opcache::store::judge_signatures(*trusted, key, digest, {*good}).has_value());
  CHECK_FALSE(opcache::store::judge_signatures(*trusted, key, digest, {*foreign, *good}).has_value());
  auto refusal = opcache::store::judge_signatures(*trusted, key, digest, {});
  REQUIRE(refusal);
  CHECK(refusal->reason == RefusalReason::unsigned_entry);
  CHECK(refusal->describe() == "unsigned");
  CHECK(std::string(refusal->error_code()) == "signature_required");
  refusal = opcache::store::judge_signatures(*trusted, key, digest, {*foreign});
  REQUIRE(refusal);
  CHECK(refusal->reason == RefusalReason::untrusted_signer);
  CHECK(refusal->describe() ==
        "untrusted signer " + opcache::base::base64_encode(other_key.public_key()).substr(0, 12) + "…");
  CHECK(std::string(refusal->error_code()) == "untrusted_signature");
  refusal = opcache::store::judge_signatures(*trusted, key, digest, {*other_digest});
  REQUIRE(refusal);
  CHECK(refusal->reason == RefusalReason::bad_signature);
  CHECK(std::string(refusal->error_code()) == "bad_signature");
}

TEST_CASE("store::LocalStore signs every entry it puts with the signing key, and only then") {
  TempDir temp;
  auto key = std::make_shared<const Ed25519PrivateKey>(new_signing_key());
  TrustFixture signing(temp / "signed", key, nullptr);
  TrustFixture plain(temp / "plain", nullptr, nullptr);
  const auto kernel = make_kernel(temp / "k", "square", 8);
  const auto signed_entry = make_remote_entry(signing, kernel);
  REQUIRE(signed_entry.signatures.size() == 1);
  CHECK(signed_entry.signatures[0].public_key == key->public_key());
  CHECK(opcache::store::signature_verifies(signed_entry.signatures[0], signed_entry.key, signed_entry.digest));
  CHECK(make_remote_entry(plain, kernel).signatures.empty());
}

TEST_CASE("store::LocalStore refuses remote entries that no trusted key vouches for, each with its reason") {
  TempDir temp;
  auto ci_key = std::make_shared<const Ed25519PrivateKey>(new_signing_key());
  auto rogue_key = std::make_shared<const Ed25519PrivateKey>(new_signing_key());
  TrustFixture ci(temp / "ci", ci_key, nullptr);
  TrustFixture rogue(temp / "rogue", rogue_key, nullptr);
  TrustFixture unsigned_producer(temp / "plain", nullptr, nullptr);
  TrustFixture consumer(temp / "dev", nullptr, policy(trusted_line("ci", *ci_key), SignatureRequirement::remote));

  const auto first = make_remote_entry(ci, make_kernel(temp / "k1", "square", 8));
  const auto second = make_remote_entry(ci, make_kernel(temp / "k2", "relu", 16));

  SUBCASE("unsigned") {
    const auto entry = make_remote_entry(unsigned_producer, make_kernel(temp / "k3", "exp", 4));
    check_refused(consumer, entry, entry.signatures, "unsigned");
  }
  SUBCASE("signed by an untrusted key") {
    const auto entry = make_remote_entry(rogue, make_kernel(temp / "k3", "exp", 4));
    check_refused(consumer, entry, entry.signatures, "untrusted signer");
  }
  SUBCASE("a trusted signature replayed from another entry") {
    check_refused(consumer, first, second.signatures, "bad signature");
  }
  SUBCASE("a trusted key's signature over a different digest") {
    auto over_other = opcache::store::sign_entry(*ci_key, first.key, second.digest);
    REQUIRE(over_other.ok());
    check_refused(consumer, first, {*over_other}, "bad signature");
  }
  SUBCASE("a tampered bundle with its original signature") {
    RemoteEntry tampered = first;
    tampered.bytes[tampered.bytes.size() / 2] ^= 0x20;
    auto adopted = adopt_from_remote(consumer, tampered, tampered.signatures);
    REQUIRE_FALSE(adopted.ok());
    CHECK(adopted.error().code() == ErrorCode::corrupt);
    CHECK_FALSE(consumer->lookup(first.key)->has_value());
  }
  // Whatever was refused, the next trusted entry is stored and served.
  auto adopted = adopt_from_remote(consumer, second, second.signatures);
  REQUIRE_MESSAGE(adopted.ok(), (adopted.ok() ? "" : adopted.error().message()));
  CHECK(adopted->stored);
  auto hit = consumer->get(second.key, temp / "out");
  REQUIRE(hit.ok());
  REQUIRE(hit->has_value());
  CHECK((*hit)->entry.signatures == second.signatures);
}

TEST_CASE("store::LocalStore keeps only remote signatures that verify, and requires none when the policy is off") {
  TempDir temp;
  auto ci_key = std::make_shared<const Ed25519PrivateKey>(new_signing_key());
  TrustFixture ci(temp / "ci", ci_key, nullptr);
  TrustFixture consumer(temp / "dev", nullptr, policy(trusted_line("ci", *ci_key), SignatureRequirement::off));
  const auto first = make_remote_entry(ci, make_kernel(temp / "k1", "square", 8));
  const auto second = make_remote_entry(ci, make_kernel(temp / "k2", "relu", 16));
  auto adopted = adopt_from_remote(consumer, first, {second.signatures[0], first.signatures[0]});
  REQUIRE(adopted.ok());
  auto entry = consumer->lookup(first.key);
  REQUIRE(entry.ok());
  REQUIRE(entry->has_value());
  CHECK((*entry)->signatures == first.signatures);  // the replayed one was dropped
  CHECK(consumer.counter("refused_untrusted") == 0);
}

TEST_CASE("store::LocalStore under require_signature=all refuses unsigned local entries as misses and replaces them") {
  TempDir temp;
  auto ci_key = std::make_shared<const Ed25519PrivateKey>(new_signing_key());
  const auto kernel = make_kernel(temp / "k", "square", 8);
  std::string key;
  {
    TrustFixture plain(temp / "cache", nullptr, nullptr);
    key = make_remote_entry(plain, kernel).key;
  }
  {
    TrustFixture strict(temp / "cache", nullptr, policy(trusted_line("ci", *ci_key), SignatureRequirement::all));
    auto hit = strict->get(key, temp / "out1");
    REQUIRE(hit.ok());
    CHECK_FALSE(hit->has_value());
    CHECK(strict.counter("refused_untrusted") == 1);
    CHECK(strict.counter("misses") == 1);
  }
  // The compiler rebuilds it and a signing store puts it: the refused entry is replaced.
  TrustFixture strict_signing(temp / "cache", ci_key, policy(trusted_line("ci", *ci_key), SignatureRequirement::all));
  auto put = strict_signing->put(input_for(kernel), ReplacePolicy::keep_existing);
  REQUIRE(put.ok());
  CHECK(put->stored);
  auto hit = strict_signing->get(key, temp / "out2");
  REQUIRE(hit.ok());
  CHECK(hit->has_value());
}

TEST_CASE("store::LocalStore::add_signatures merges valid signatures and refuses one that does not verify") {
  TempDir temp;
  auto ci_key = std::make_shared<const Ed25519PrivateKey>(new_signing_key());
  const auto other = new_signing_key();
  TrustFixture plain(temp / "cache", nullptr, nullptr);
  const auto entry = make_remote_entry(plain, make_kernel(temp / "k", "square", 8));
  auto mine = opcache::store::sign_entry(*ci_key, entry.key, entry.digest);
  auto wrong = opcache::store::sign_entry(other, entry.key, std::string(64, '0'));
  REQUIRE((mine.ok() && wrong.ok()));

  auto refused = plain->add_signatures(entry.key, {*wrong});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == ErrorCode::untrusted);
  auto added = plain->add_signatures(entry.key, {*mine});
  REQUIRE(added.ok());
  CHECK(added->added == 1);
  added = plain->add_signatures(entry.key, {*mine});
  REQUIRE(added.ok());
  CHECK(added->added == 0);
  CHECK(added->present == 1);
  CHECK((*plain->lookup(entry.key))->signatures == Signatures{*mine});
  CHECK(plain->add_signatures(std::string(64, '9'), {*mine}).error().code() == ErrorCode::not_found);
}

TEST_CASE("store::LocalStore::sign_entries signs every entry once and leaves a corrupt object unsigned") {
  TempDir temp;
  auto ci_key = std::make_shared<const Ed25519PrivateKey>(new_signing_key());
  std::vector<RemoteEntry> entries;
  {
    TrustFixture plain(temp / "cache", nullptr, nullptr);
    entries.push_back(make_remote_entry(plain, make_kernel(temp / "k1", "square", 8)));
    entries.push_back(make_remote_entry(plain, make_kernel(temp / "k2", "relu", 8)));
    CHECK(plain->sign_entries({}).error().code() == ErrorCode::usage);  // no signing key
  }
  // Corrupt the second object in place (hard link: rewrite the bytes).
  const auto object = temp / "cache" / "objects" / entries[1].digest.substr(0, 2) / entries[1].digest;
  std::string bytes = entries[1].bytes;
  bytes[bytes.size() / 2] ^= 0x01;
  fs::permissions(object, fs::perms::owner_write, fs::perm_options::add);
  REQUIRE(opcache::base::write_file_atomic(object, bytes).ok());

  TrustFixture signing(temp / "cache", ci_key, policy(trusted_line("ci", *ci_key), SignatureRequirement::remote));
  auto report = signing->sign_entries({});
  REQUIRE(report.ok());
  CHECK(report->signed_entries == 1);
  CHECK(report->corrupt == std::vector<std::string>{entries[1].key});
  report = signing->sign_entries({entries[0].key, std::string(64, '7')});
  REQUIRE(report.ok());
  CHECK(report->signed_entries == 0);
  CHECK(report->already_signed == 1);
  CHECK(report->missing == std::vector<std::string>{std::string(64, '7')});
  auto untrusted = signing->find_untrusted_entries();
  REQUIRE(untrusted.ok());
  REQUIRE(untrusted->size() == 1);
  CHECK((*untrusted)[0].key == entries[1].key);
  CHECK((*untrusted)[0].refusal.reason == RefusalReason::unsigned_entry);
}
