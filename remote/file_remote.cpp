// The file:// remote: a shared directory (NFS, a mounted volume). No SQLite
// there (shared file systems break its locking): one file per key,
// <root>/v1/bundles/<first two hex>/<key>, written through <root>/tmp with
// fsync + link, so a reader sees a whole bundle or none. The entry's
// signatures live beside it in <key>.sig (one "<public key base64>:<signature
// base64>" a line), written before the bundle and replaced atomically
// (rename) when signatures are added; no .sig file: unsigned. A revoked key
// has a tombstone, <root>/v1/revocations/<key>.json (store/revocation.hpp):
// its bundle is deleted, fetches answer Fetched::revoked and uploads are
// refused until it is removed. The exec manifest of a command key is
// <root>/v1/manifests/<first two hex>/<command key>.json (the JSON of
// store/exec_manifest.hpp), replaced by rename after a read and a merge: of
// two writers racing on one key the last one wins (the other's builds cost a
// miss until they are uploaded again).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "remote/client_revocation.hpp"
#include "remote/remote_store.hpp"
#include "base/file_io.hpp"
#include "base/sha256.hpp"
#include "store/exec_manifest.hpp"
#include "store/key.hpp"
#include "store/signature.hpp"
#include "base/try.hpp"

namespace opcache::remote {

namespace {

namespace fs = std::filesystem;


class FileRemote final : public RemoteStore {
 public:
  FileRemote(RemoteOptions options, fs::path root)
      : RemoteStore(options.read_only), m_options(std::move(options)), m_root(std::move(root)) {}

  std::string name() const override { return m_options.url; }

  Result<Fetched> fetch(const std::string& key, int fd, store::Signatures* signatures,
                        const LookupHint& /*hint: no server to tell*/) override {
    if (signatures != nullptr) {
      OPCACHE_TRY_ASSIGN(*signatures, read_signatures(key));
    }
    auto input = base::open_for_reading(path_of(key), /*follow_symlinks=*/false);
    if (!input) {
      if (input.error().code() == ErrorCode::not_found) {
        OPCACHE_TRY_ASSIGN(auto tombstone, as_remote_result(tombstones().find(key)));
        return tombstone ? Fetched::revoked : Fetched::miss;
      }
      return Error::remote("remote " + name() + ": " + input.error().message());
    }
    char buffer[1 << 16];
    for (;;) {
      auto n = base::read_some(input->get(), buffer, sizeof buffer, path_of(key));
      if (!n) {
        return Error::remote("remote " + name() + ": " + n.error().message());
      }
      if (*n == 0) {
        return Fetched::hit;
      }
      OPCACHE_TRY(base::write_all(fd, buffer, *n, "download"));
    }
  }

  // Read, merge, replace: two concurrent additions may lose one of them;
  // the next `push --add-signatures` adds it again.
  Status do_add_signatures(const std::string& key, const store::Signatures& signatures) override {
    struct stat info {};
    if (::stat(path_of(key).c_str(), &info) != 0) {
      return Error::not_found("remote " + name() + " has no entry " + key);
    }
    OPCACHE_TRY_ASSIGN(auto merged, read_signatures(key));
    const bool changed = store::merge_signatures(merged, signatures) > 0;
    return changed ? as_remote_error(write_signatures(key, merged)) : Status{};
  }

  Status do_upload(const std::string& key, const fs::path& bundle, const store::Signatures& signatures) override {
    const auto target = path_of(key);
    struct stat info {};
    if (::stat(target.c_str(), &info) == 0) {
      return {};  // idempotent: keep what is there
    }
    OPCACHE_TRY_ASSIGN(auto tombstone, as_remote_result(tombstones().find(key)));
    if (tombstone) {
      return Error::usage("remote " + name() + " refuses " + key + ": revoked (" + tombstone->reason +
                          "); `opcache unrevoke --remote " + name() + " " + key + "` accepts it again");
    }
    // The signatures first: the bundle never shows without them.
    if (!signatures.empty()) {
      OPCACHE_TRY(as_remote_error(write_signatures(key, signatures)));
    }
    return as_remote_error(write_bundle(bundle, target));
  }

  Result<std::vector<bool>> query(const std::vector<std::string>& keys) override {
    std::vector<bool> present;
    for (const auto& key : keys) {
      struct stat info {};
      present.push_back(::stat(path_of(key).c_str(), &info) == 0 && S_ISREG(info.st_mode));
    }
    return present;
  }

  bool lists_by_scenario() const override { return false; }

  Result<std::vector<std::string>> list_keys(const ListFilter& filter) override {
    if (!filter.device_mode.empty() || !filter.phase.empty() || !filter.toolchain.empty() || !filter.soc.empty() ||
        !filter.op_type.empty()) {
      return Error::usage("remote " + name() +
                          ": a file:// remote cannot filter by scenario or op type; give keys (--keys FILE) instead");
    }
    std::vector<std::string> keys;
    std::error_code ec;
    for (const auto& shard : fs::directory_iterator(m_root / "v1" / "bundles", ec)) {
      for (const auto& file : fs::directory_iterator(shard.path(), ec)) {
        if (base::is_sha256_hex(file.path().filename().string())) {
          keys.push_back(file.path().filename().string());
        }
      }
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  Result<std::optional<RevocationPage>> revocations(std::int64_t since_s) override {
    return list_revocations(since_s, [&](std::int64_t since_ms, std::size_t limit, bool* truncated) {
      return as_remote_result(tombstones().list(since_ms, limit, truncated));
    });
  }

  Result<std::vector<bool>> do_revoke(const std::vector<std::string>& keys, const std::string& reason,
                                   const base::Ed25519PrivateKey* /*signer: no server to judge it*/) override {
    return revoke_each(
        keys, reason,
        [&](const store::Tombstone& tombstone) { return as_remote_error(tombstones().add(tombstone)); },
        [&](const std::string& key) -> Result<bool> {
          const bool had = ::unlink(path_of(key).c_str()) == 0;
          ::unlink(signatures_path_of(key).c_str());
          return had;
        });
  }

  Result<bool> do_unrevoke(const std::string& key) override {
    return as_remote_result(tombstones().remove(key));
  }

  Result<std::optional<std::string>> fetch_exec_manifest(const std::string& command_key) override {
    OPCACHE_TRY(store::check_key(command_key));
    auto text = base::read_small_file(manifest_path_of(command_key), store::k_max_manifest_bytes);
    if (!text) {
      if (text.error().code() == ErrorCode::not_found) {
        return std::optional<std::string>();
      }
      if (text.error().code() == ErrorCode::corrupt) {
        return text.error();  // too large: not a manifest opcache wrote
      }
      return Error::remote("remote " + name() + ": " + text.error().message());
    }
    return std::optional<std::string>(std::move(*text));
  }

  // Read, merge, replace: see the file comment for the race.
  Status do_store_exec_manifest(const store::ExecManifest& manifest) override {
    OPCACHE_TRY(store::check_key(manifest.command_key));
    store::ExecManifest merged = manifest;
    // What is there but is not a valid manifest of the key (too large,
    // malformed, another key's) counts as none: it is replaced.
    auto stored = fetch_exec_manifest(manifest.command_key);
    if (!stored && stored.error().code() != ErrorCode::corrupt) {
      return stored.error();
    }
    if (stored && *stored) {
      auto parsed = store::parse_exec_manifest(**stored, manifest_path_of(manifest.command_key).string());
      if (parsed && parsed->command_key == manifest.command_key) {
        OPCACHE_TRY_ASSIGN(merged, store::merge_exec_manifests(manifest, *parsed));
      }
    }
    return as_remote_error(write_manifest(merged));
  }

 private:
  fs::path path_of(const std::string& key) const { return m_root / "v1" / "bundles" / key.substr(0, 2) / key; }
  fs::path signatures_path_of(const std::string& key) const {
    return m_root / "v1" / "bundles" / key.substr(0, 2) / (key + ".sig");
  }

  fs::path manifest_path_of(const std::string& command_key) const {
    return m_root / "v1" / "manifests" / command_key.substr(0, 2) / (command_key + ".json");
  }

  store::TombstoneDirectory tombstones() const { return store::TombstoneDirectory(m_root / "v1" / "revocations"); }

  template <typename T>
  Result<T> as_remote_result(Result<T> result) const {
    if (!result && result.error().code() != ErrorCode::usage) {
      return Error::remote("remote " + name() + ": " + result.error().message());
    }
    return result;
  }

  // A failure of our own writes is the remote's (a usage error stays one).
  Status as_remote_error(Status status) const {
    if (!status && status.error().code() != ErrorCode::usage) {
      return Error::remote("remote " + name() + ": " + status.error().message());
    }
    return status;
  }

  // The signatures beside the bundle; none when there is no .sig file.
  Result<store::Signatures> read_signatures(const std::string& key) const {
    const auto path = signatures_path_of(key);
    auto text = base::read_file(path);
    if (!text) {
      if (text.error().code() == ErrorCode::not_found) {
        return store::Signatures{};
      }
      return Error::remote("remote " + name() + ": " + text.error().message());
    }
    auto parsed = store::parse_signatures(*text);
    if (!parsed) {
      return Error::remote("remote " + name() + ": " + path.string() + " is malformed: " + parsed.error().message());
    }
    return parsed;
  }

  Status write_signatures(const std::string& key, const store::Signatures& signatures) {
    const auto target = signatures_path_of(key);
    OPCACHE_TRY(base::ensure_directory(m_root / "tmp"));
    OPCACHE_TRY(base::ensure_directory(target.parent_path()));
    OPCACHE_TRY_ASSIGN(auto file, base::AtomicFile::create(m_root / "tmp"));
    const auto text = store::format_signatures(signatures) + "\n";
    OPCACHE_TRY(file.write(text.data(), text.size()));
    return file.commit(target);
  }

  // Not fsynced: a manifest lost to a power cut costs misses, never a wrong hit.
  Status write_manifest(const store::ExecManifest& manifest) {
    const auto target = manifest_path_of(manifest.command_key);
    OPCACHE_TRY(base::ensure_directory(m_root / "tmp"));
    OPCACHE_TRY(base::ensure_directory(target.parent_path()));
    OPCACHE_TRY_ASSIGN(auto file, base::AtomicFile::create(m_root / "tmp"));
    const auto text = store::exec_manifest_to_json(manifest);
    OPCACHE_TRY(file.write(text.data(), text.size()));
    return file.commit(target, base::Durability::deferred);
  }

  Status write_bundle(const fs::path& bundle, const fs::path& target) {
    OPCACHE_TRY(base::ensure_directory(m_root / "tmp"));
    OPCACHE_TRY(base::ensure_directory(target.parent_path()));
    OPCACHE_TRY_ASSIGN(auto file, base::AtomicFile::create(m_root / "tmp"));
    OPCACHE_TRY_ASSIGN(auto input, base::open_for_reading(bundle));
    char buffer[1 << 16];
    for (;;) {
      OPCACHE_TRY_ASSIGN(std::size_t n, base::read_some(input.get(), buffer, sizeof buffer, bundle));
      if (n == 0) {
        break;
      }
      OPCACHE_TRY(file.write(buffer, n));
    }
    OPCACHE_TRY(file.link_if_absent(target));
    return {};
  }

  RemoteOptions m_options;
  fs::path m_root;
};

}  // namespace

Result<std::unique_ptr<RemoteStore>> make_file_remote(const RemoteOptions& options) {
  std::string path = options.url.substr(std::string("file://").size());
  if (path.empty() || path.front() != '/') {
    return Error::usage("remote \"" + options.url + "\" must be file:///absolute/path");
  }
  return std::unique_ptr<RemoteStore>(new FileRemote(options, path));
}

}  // namespace opcache::remote
