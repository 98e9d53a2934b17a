#include "store/key_table.hpp"

#include <unistd.h>

#include <cerrno>

#include <nlohmann/json.hpp>

#include "base/file_io.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"
#include "store/signature.hpp"

namespace opcache::store {

namespace {

// A record holds one row; signatures make it grow, nothing else does.
constexpr std::size_t k_max_record_bytes = 64 * 1024;

nlohmann::json record_json(const IndexEntry& entry) {
  return {{"format", k_key_record_format},    {"key", entry.key},
          {"digest", entry.digest},           {"bundle_size", entry.bundle_size},
          {"raw_size", entry.raw_size},       {"op_type", entry.op_type},
          {"device_mode", entry.device_mode}, {"phase", entry.phase},
          {"toolchain", entry.toolchain},     {"soc", entry.soc},
          {"scenario", entry.scenario},       {"created_ms", entry.created_ms},
          {"build_ms", entry.build_ms},       {"pinned", entry.pinned},
          {"signatures", format_signatures(entry.signatures)}};
}

// The entry of a record for `key`, or nothing when any field is missing or
// of the wrong type, or the record names another key or format.
std::optional<IndexEntry> entry_from_record(const nlohmann::json& record, const std::string& key) {
  try {
    if (record.at("format").get<int>() != k_key_record_format || record.at("key").get<std::string>() != key) {
      return std::nullopt;
    }
    IndexEntry entry;
    entry.key = key;
    entry.digest = record.at("digest").get<std::string>();
    entry.bundle_size = record.at("bundle_size").get<std::int64_t>();
    entry.raw_size = record.at("raw_size").get<std::int64_t>();
    entry.op_type = record.at("op_type").get<std::string>();
    entry.device_mode = record.at("device_mode").get<std::string>();
    entry.phase = record.at("phase").get<std::string>();
    entry.toolchain = record.at("toolchain").get<std::string>();
    entry.soc = record.at("soc").get<std::string>();
    entry.scenario = record.at("scenario").get<std::string>();
    entry.created_ms = record.at("created_ms").get<std::int64_t>();
    entry.build_ms = record.at("build_ms").get<std::int64_t>();
    entry.pinned = record.at("pinned").get<bool>();
    auto signatures = parse_signatures(record.at("signatures").get<std::string>());
    if (!signatures || !base::is_sha256_hex(entry.digest)) {
      return std::nullopt;
    }
    entry.signatures = std::move(*signatures);
    return entry;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::filesystem::path KeyTable::record_path(const std::string& key) const {
  return m_layout.keys() / key.substr(0, 2) / key;
}

std::optional<IndexEntry> KeyTable::read(const std::string& key) const {
  auto text = base::read_small_file(record_path(key), k_max_record_bytes);
  if (!text) {
    return std::nullopt;
  }
  auto record = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) {
    return std::nullopt;
  }
  return entry_from_record(record, key);
}

Status KeyTable::write(const IndexEntry& entry) const {
  const auto path = record_path(entry.key);
  OPCACHE_TRY(m_layout.ensure_directory(path.parent_path()));
  OPCACHE_TRY_ASSIGN(base::AtomicFile file, base::AtomicFile::create(m_layout.tmp()));
  const std::string text = record_json(entry).dump() + "\n";
  OPCACHE_TRY(file.write(text.data(), text.size()));
  return file.commit(path, base::Durability::deferred);
}

Status KeyTable::erase(const std::string& key) const {
  const auto path = record_path(key);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT && errno != ENOTDIR) {
    return base::errno_error("cannot remove", path, errno);
  }
  return {};
}

}  // namespace opcache::store
