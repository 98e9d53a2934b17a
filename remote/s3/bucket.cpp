#include "remote/s3/bucket.hpp"

#include <set>

#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::remote {

namespace {

// When a query names more keys than this, one listing of the bundles is
// cheaper than a HEAD per key.
constexpr std::size_t k_head_query_limit = 32;
constexpr int k_page_keys = 1000;
constexpr const char* k_bundle_content_type = "application/vnd.opcache.bundle";
// A signatures object is ~134 bytes per signer; anything near this is not ours.
constexpr std::int64_t k_max_signatures_bytes = 1 << 20;
constexpr std::int64_t k_max_tombstone_bytes = 8192;

}  // namespace

std::string json_text(const nlohmann::json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

S3IndexFields index_fields_of(const store::Manifest& manifest) {
  return S3IndexFields{json_text(manifest.scenario, "device_mode"), json_text(manifest.scenario, "phase"),
                       json_text(manifest.scenario, "toolchain"), json_text(manifest.scenario, "soc"),
                       manifest.op_type()};
}

bool matches_filter(const S3IndexFields& fields, const S3IndexFields& filter) {
  auto same = [](const std::string& want, const std::string& have) { return want.empty() || want == have; };
  return same(filter.device_mode, fields.device_mode) && same(filter.phase, fields.phase) &&
         same(filter.toolchain, fields.toolchain) && same(filter.soc, fields.soc) &&
         same(filter.op_type, fields.op_type);
}

S3Bucket::S3Bucket(S3Client client) : m_client(std::move(client)) {}

Result<std::optional<S3Object>> S3Bucket::head_bundle(const std::string& key) {
  return m_client.head(s3_bundle_name(key));
}

Result<bool> S3Bucket::get_bundle(const std::string& key, int fd, std::int64_t max_bytes) {
  return m_client.get_to_fd(s3_bundle_name(key), fd, max_bytes);
}

Status S3Bucket::put_entry(const std::string& key, const std::filesystem::path& bundle, const S3IndexFields& fields,
                           const std::string& digest, const store::Signatures& signatures) {
  const auto bundle_name = s3_bundle_name(key);
  const auto marker = s3_index_name(fields, key);
  if (!signatures.empty()) {
    OPCACHE_TRY(put_signatures(key, signatures, bundle.parent_path()));
  }
  OPCACHE_TRY(m_client.put_from_file(bundle_name, bundle, {{k_s3_meta_digest, digest}, {k_s3_meta_index, marker}},
                                     k_bundle_content_type));
  Status marked = [&]() -> Status {
    OPCACHE_TRY_ASSIGN(auto empty, base::AtomicFile::create(bundle.parent_path()));
    OPCACHE_TRY(empty.finish_writing());
    return m_client.put_from_file(marker, empty.temp_path(), {});
  }();
  if (marked) {
    return {};
  }
  // Undo the bundle: an unlisted bundle would stay unlisted for good.
  auto removed = m_client.remove(bundle_name);
  const std::string undo = removed ? "the bundle was deleted again"
                                   : "deleting the bundle failed too (" + removed.error().message() + ")";
  return Error(marked.error().code(),
               "cannot write the listing marker of " + key + ": " + marked.error().message() + "; " + undo);
}

Result<bool> S3Bucket::remove_entry(const std::string& key) {
  OPCACHE_TRY_ASSIGN(auto existing, head_bundle(key));
  if (!existing) {
    return false;
  }
  OPCACHE_TRY(m_client.remove(s3_bundle_name(key)));
  if (auto marker = existing->metadata.find(k_s3_meta_index); marker != existing->metadata.end()) {
    OPCACHE_TRY(m_client.remove(marker->second));
  }
  OPCACHE_TRY(m_client.remove(s3_signatures_name(key)));
  return true;
}

Result<store::Signatures> S3Bucket::get_signatures(const std::string& key, const std::filesystem::path& temp_dir) {
  OPCACHE_TRY_ASSIGN(auto temp, base::AtomicFile::create(temp_dir));
  const auto name = s3_signatures_name(key);
  OPCACHE_TRY_ASSIGN(bool found, m_client.get_to_fd(name, temp.fd(), k_max_signatures_bytes));
  if (!found) {
    return store::Signatures{};
  }
  OPCACHE_TRY(temp.finish_writing(base::Durability::deferred));
  OPCACHE_TRY_ASSIGN(auto text, base::read_file(temp.temp_path()));
  auto parsed = store::parse_signatures(text);
  if (!parsed) {
    return Error::remote("signatures object " + name + " is malformed: " + parsed.error().message());
  }
  return parsed;
}

Status S3Bucket::put_signatures(const std::string& key, const store::Signatures& signatures,
                                const std::filesystem::path& temp_dir) {
  OPCACHE_TRY_ASSIGN(auto temp, base::AtomicFile::create(temp_dir));
  const auto text = store::format_signatures(signatures) + "\n";
  OPCACHE_TRY(temp.write(text.data(), text.size()));
  OPCACHE_TRY(temp.finish_writing(base::Durability::deferred));
  return m_client.put_from_file(s3_signatures_name(key), temp.temp_path(), {}, "text/plain");
}

Result<std::vector<bool>> S3Bucket::present(const std::vector<std::string>& keys) {
  std::vector<bool> found;
  found.reserve(keys.size());
  if (keys.size() <= k_head_query_limit) {
    for (const auto& key : keys) {
      OPCACHE_TRY_ASSIGN(auto object, head_bundle(key));
      found.push_back(object.has_value());
    }
    return found;
  }
  const std::string root = s3_bundle_name("");
  std::set<std::string> stored;
  std::string token;
  do {
    OPCACHE_TRY_ASSIGN(auto page, m_client.list(root, "", token, k_page_keys));
    for (const auto& object : page.objects) {
      stored.insert(object.name.substr(root.size()));
    }
    token = page.next_continuation_token;
  } while (!token.empty());
  for (const auto& key : keys) {
    found.push_back(stored.count(key) != 0);
  }
  return found;
}

Status S3Bucket::put_tombstone(const store::Tombstone& tombstone, const std::filesystem::path& temp_dir) {
  OPCACHE_TRY_ASSIGN(auto temp, base::AtomicFile::create(temp_dir));
  const auto text = store::tombstone_json(tombstone);
  OPCACHE_TRY(temp.write(text.data(), text.size()));
  OPCACHE_TRY(temp.finish_writing(base::Durability::deferred));
  return m_client.put_from_file(s3_tombstone_name(tombstone.key), temp.temp_path(), {}, "application/json");
}

Result<std::optional<store::Tombstone>> S3Bucket::get_tombstone(const std::string& key,
                                                                const std::filesystem::path& temp_dir) {
  OPCACHE_TRY_ASSIGN(auto temp, base::AtomicFile::create(temp_dir));
  const auto name = s3_tombstone_name(key);
  OPCACHE_TRY_ASSIGN(bool found, m_client.get_to_fd(name, temp.fd(), k_max_tombstone_bytes));
  if (!found) {
    return std::optional<store::Tombstone>();
  }
  OPCACHE_TRY(temp.finish_writing(base::Durability::deferred));
  OPCACHE_TRY_ASSIGN(auto text, base::read_file(temp.temp_path()));
  auto parsed = store::parse_tombstone(text, key, "tombstone object " + name);
  if (!parsed) {
    return Error::remote(parsed.error().message());
  }
  return std::optional<store::Tombstone>(std::move(*parsed));
}

Result<bool> S3Bucket::remove_tombstone(const std::string& key) { return m_client.remove(s3_tombstone_name(key)); }

Result<std::vector<store::Tombstone>> S3Bucket::list_tombstones(std::int64_t since_ms, std::size_t limit,
                                                                bool* truncated,
                                                                const std::filesystem::path& temp_dir) {
  const std::string root = k_s3_revocations_root;
  std::vector<store::Tombstone> found;
  std::string token;
  do {
    OPCACHE_TRY_ASSIGN(auto page, m_client.list(root, "", token, k_page_keys));
    for (const auto& object : page.objects) {
      const auto name = object.name.substr(root.size());
      if (name.size() != 64 + 5 || name.substr(64) != ".json") {
        continue;
      }
      OPCACHE_TRY_ASSIGN(auto tombstone, get_tombstone(name.substr(0, 64), temp_dir));
      if (tombstone) {
        found.push_back(std::move(*tombstone));
      }
    }
    token = page.next_continuation_token;
  } while (!token.empty());
  return store::select_tombstones(std::move(found), since_ms, limit, truncated);
}

Result<std::optional<std::string>> S3Bucket::get_exec_manifest(const std::string& command_key,
                                                                 const std::filesystem::path& temp_dir) {
  OPCACHE_TRY_ASSIGN(auto temp, base::AtomicFile::create(temp_dir));
  OPCACHE_TRY_ASSIGN(bool found, m_client.get_to_fd(s3_exec_manifest_name(command_key), temp.fd(),
                                                    static_cast<std::int64_t>(store::k_max_manifest_bytes)));
  if (!found) {
    return std::optional<std::string>();
  }
  OPCACHE_TRY(temp.finish_writing(base::Durability::deferred));
  OPCACHE_TRY_ASSIGN(auto text, base::read_file(temp.temp_path()));
  return std::optional<std::string>(std::move(text));
}

Status S3Bucket::put_exec_manifest(const store::ExecManifest& manifest, const std::filesystem::path& temp_dir) {
  OPCACHE_TRY_ASSIGN(auto temp, base::AtomicFile::create(temp_dir));
  const auto text = store::exec_manifest_to_json(manifest);
  OPCACHE_TRY(temp.write(text.data(), text.size()));
  OPCACHE_TRY(temp.finish_writing(base::Durability::deferred));
  return m_client.put_from_file(s3_exec_manifest_name(manifest.command_key), temp.temp_path(), {},
                                "application/json");
}

Result<store::ExecManifest> S3Bucket::merge_exec_manifest(const store::ExecManifest& manifest,
                                                          const std::filesystem::path& temp_dir) {
  store::ExecManifest merged = manifest;
  OPCACHE_TRY_ASSIGN(auto stored, get_exec_manifest(manifest.command_key, temp_dir));
  if (stored) {
    auto parsed = store::parse_exec_manifest(*stored, "exec manifest object " +
                                                          s3_exec_manifest_name(manifest.command_key));
    if (parsed && parsed->command_key == manifest.command_key) {
      OPCACHE_TRY_ASSIGN(merged, store::merge_exec_manifests(manifest, *parsed));
    }
  }
  OPCACHE_TRY(put_exec_manifest(merged, temp_dir));
  return merged;
}

Status S3Bucket::for_each_marker(const S3IndexFields& filter, const std::string& start_after,
                                 const std::function<bool(const S3Marker&)>& visit) {
  const auto prefix = s3_index_prefix(filter);
  std::string token;
  do {
    OPCACHE_TRY_ASSIGN(auto page, m_client.list(prefix, token.empty() ? start_after : "", token, k_page_keys));
    for (const auto& object : page.objects) {
      auto parsed = parse_s3_index_name(object.name);
      if (parsed && matches_filter(parsed->first, filter) &&
          !visit(S3Marker{object.name, std::move(parsed->first), std::move(parsed->second)})) {
        return {};
      }
    }
    token = page.next_continuation_token;
  } while (!token.empty());
  return {};
}

}  // namespace opcache::remote
