// LocalStore's signatures: signing what it writes, the trust policy applied
// to adopted and local entries, adding signatures, `opcache sign` and
// `opcache verify --signatures` (declared in store/local_store.hpp).
#include "base/sha256.hpp"
#include "base/try.hpp"
#include "store/local_store.hpp"

namespace opcache::store {

namespace {

// The SHA-256 of an object file, streamed.
Result<std::string> object_digest(const std::filesystem::path& object) {
  OPCACHE_TRY_ASSIGN(base::FileDescriptor fd, base::open_for_reading(object, /*follow_symlinks=*/false));
  return base::sha256_hex_of_file(fd.get(), object);
}

// The signatures that verify for (key, digest), without repeats.
Signatures verifying_signatures(const Signatures& signatures, const std::string& key, const std::string& digest) {
  Signatures kept;
  for (const auto& signature : signatures) {
    if (signature_verifies(signature, key, digest)) {
      add_signature(kept, signature);
    }
  }
  return kept;
}

}  // namespace

Result<Signatures> LocalStore::own_signatures(const std::string& key, const std::string& digest) const {
  if (!m_options.signing_key) {
    return Signatures{};
  }
  OPCACHE_TRY_ASSIGN(Signature signature, sign_entry(*m_options.signing_key, key, digest));
  return Signatures{std::move(signature)};
}

Result<Signatures> LocalStore::admit(const std::string& key, const std::string& digest,
                                     const Provenance& provenance) {
  const bool checked = provenance.from_remote && m_options.trust && m_options.trust->checks_remote_entries();
  if (checked) {
    if (auto refusal = judge_signatures(m_options.trust->trusted, key, digest, provenance.signatures)) {
      const std::string from = provenance.origin.empty() ? "" : " from " + provenance.origin;
      m_options.warn("entry " + key + from + " refused: " + refusal->describe());
      (void)count(counter::refused_untrusted);
      return Error::untrusted("entry " + key + from + " refused: " + refusal->describe());
    }
  }
  return verifying_signatures(provenance.signatures, key, digest);
}

std::optional<Refusal> LocalStore::local_refusal(const IndexEntry& entry) const {
  if (!m_options.trust || !m_options.trust->checks_local_entries()) {
    return std::nullopt;
  }
  return judge_signatures(m_options.trust->trusted, entry.key, entry.digest, entry.signatures);
}

Result<SignatureUpdate> LocalStore::add_signatures(const std::string& key, const Signatures& signatures) {
  base::MutexLock lock(m_index_mutex);
  OPCACHE_TRY(open_index());
  OPCACHE_TRY_ASSIGN(Transaction transaction, m_index->begin());
  OPCACHE_TRY_ASSIGN(auto entry, m_index->lookup(key));
  if (!entry) {
    return Error::not_found("no entry " + key);
  }
  Signatures merged = entry->signatures;
  OPCACHE_TRY_ASSIGN(const int added, merge_verified_signatures(merged, signatures, key, entry->digest));
  const SignatureUpdate update{added, static_cast<int>(signatures.size()) - added};
  if (update.added > 0) {
    OPCACHE_TRY(m_index->set_signatures(key, entry->digest, merged));
    OPCACHE_TRY(transaction.commit());
  }
  return update;
}

Result<SignReport> LocalStore::sign_entries(const std::vector<std::string>& keys) {
  if (!m_options.signing_key) {
    return Error::usage("no signing key: give --signing-key FILE (or OPCACHE_SIGNING_KEY, or signing_key in the "
                        "config file)");
  }
  std::vector<IndexEntry> entries;
  if (keys.empty()) {
    OPCACHE_TRY_ASSIGN(entries, list(ListFilter{}));
  }
  SignReport report;
  for (const auto& key : keys) {
    OPCACHE_TRY_ASSIGN(auto entry, find(key));
    if (entry) {
      entries.push_back(std::move(*entry));
    } else {
      report.missing.push_back(key);
    }
  }
  for (const auto& entry : entries) {
    auto digest = object_digest(m_layout.object_path(entry.digest));
    if (!digest || *digest != entry.digest) {
      report.corrupt.push_back(entry.key);
      continue;
    }
    OPCACHE_TRY_ASSIGN(Signatures own, own_signatures(entry.key, entry.digest));
    OPCACHE_TRY_ASSIGN(SignatureUpdate update, add_signatures(entry.key, own));
    ++(update.added > 0 ? report.signed_entries : report.already_signed);
  }
  return report;
}

Result<std::vector<SignatureFinding>> LocalStore::find_untrusted_entries() {
  const TrustedKeys no_keys;
  const TrustedKeys& trusted = m_options.trust ? m_options.trust->trusted : no_keys;
  std::vector<SignatureFinding> findings;
  OPCACHE_TRY(fold_hits());
  base::MutexLock lock(m_index_mutex);
  OPCACHE_TRY(open_index());
  OPCACHE_TRY(m_index->for_each([&](const IndexEntry& entry) {
    if (auto refusal = judge_signatures(trusted, entry.key, entry.digest, entry.signatures)) {
      findings.push_back({entry.key, entry.op_type, *refusal});
    }
    return true;
  }));
  return findings;
}

}  // namespace opcache::store
