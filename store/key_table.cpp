#include "store/key_table.hpp"

#include <unistd.h>

#include <cerrno>

#include <nlohmann/json.hpp>

#include "base/file_io.hpp"
#include "base/json_scanner.hpp"
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

// Reads one field of a record into `entry` (`bit` marks it seen); unknown
// fields are skipped, as entry_from_record ignores them.
bool scan_record_field(base::JsonScanner& in, const std::string& field, IndexEntry& entry, std::string& signatures,
                       std::uint64_t& format, unsigned& bit) {
  std::uint64_t number = 0;
  auto integer = [&](std::int64_t& out, unsigned mark) {
    bit = mark;
    if (!in.unsigned_integer(number) || number > static_cast<std::uint64_t>(INT64_MAX)) {
      return false;
    }
    out = static_cast<std::int64_t>(number);
    return true;
  };
  auto text = [&](std::string& out, unsigned mark) { return bit = mark, in.string(out); };
  if (field == "format") return bit = 1u << 0, in.unsigned_integer(format);
  if (field == "key") return text(entry.key, 1u << 1);
  if (field == "digest") return text(entry.digest, 1u << 2);
  if (field == "bundle_size") return integer(entry.bundle_size, 1u << 3);
  if (field == "raw_size") return integer(entry.raw_size, 1u << 4);
  if (field == "op_type") return text(entry.op_type, 1u << 5);
  if (field == "device_mode") return text(entry.device_mode, 1u << 6);
  if (field == "phase") return text(entry.phase, 1u << 7);
  if (field == "toolchain") return text(entry.toolchain, 1u << 8);
  if (field == "soc") return text(entry.soc, 1u << 9);
  if (field == "scenario") return text(entry.scenario, 1u << 10);
  if (field == "created_ms") return integer(entry.created_ms, 1u << 11);
  if (field == "build_ms") return integer(entry.build_ms, 1u << 12);
  if (field == "pinned") return bit = 1u << 13, in.boolean(entry.pinned);
  if (field == "signatures") return text(signatures, 1u << 14);
  return bit = 0, in.skip_value();
}

constexpr unsigned k_all_record_fields = (1u << 15) - 1;

// The entry of a record as our writer lays it out, read without building a
// JSON tree (a hit reads one per lookup); std::nullopt when the text is of
// any other shape (a negative number, a \u escape, a repeated field...) or
// the record is not valid: the caller then asks entry_from_record.
std::optional<IndexEntry> scan_record(std::string_view text, const std::string& key) {
  base::JsonScanner in(text);
  IndexEntry entry;
  std::string signatures;
  std::uint64_t format = 0;
  unsigned seen = 0;
  if (!in.consume('{')) {
    return std::nullopt;
  }
  do {
    std::string field;
    unsigned bit = 0;
    if (!in.plain_string(field) || !in.consume(':') ||
        !scan_record_field(in, field, entry, signatures, format, bit) || (seen & bit) != 0) {
      return std::nullopt;
    }
    seen |= bit;
  } while (in.consume(','));
  if (!in.consume('}') || !in.at_end() || seen != k_all_record_fields ||
      format != static_cast<std::uint64_t>(k_key_record_format) || entry.key != key ||
      !base::is_sha256_hex(entry.digest)) {
    return std::nullopt;
  }
  auto parsed = parse_signatures(signatures);
  if (!parsed) {
    return std::nullopt;
  }
  entry.signatures = std::move(*parsed);
  return entry;
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
  if (auto scanned = scan_record(*text, key)) {
    return scanned;
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
