#include "store/revocation.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <nlohmann/json.hpp>

#include "base/file_io.hpp"
#include "base/json_parse.hpp"
#include "base/try.hpp"
#include "base/utf8.hpp"
#include "store/key.hpp"

namespace opcache::store {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr std::size_t k_max_tombstone_bytes = 8192;

}  // namespace

Status check_revocation_reason(std::string_view reason) {
  if (reason.empty()) {
    return Error::usage("a revocation needs a reason (--reason TEXT): say what is wrong with the kernel");
  }
  if (reason.size() > k_max_revocation_reason) {
    return Error::usage("the revocation reason has " + std::to_string(reason.size()) + " bytes; at most " +
                        std::to_string(k_max_revocation_reason) + " are kept");
  }
  if (!base::is_valid_utf8(reason)) {
    return Error::usage("the revocation reason is not UTF-8");
  }
  for (unsigned char c : reason) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return Error::usage("the revocation reason holds a control character (one line of text, please)");
    }
  }
  return {};
}

std::string tombstone_json(const Tombstone& tombstone) {
  return json{{"key", tombstone.key},
              {"reason", tombstone.reason},
              {"time", tombstone.time_s()},
              {"time_ms", tombstone.time_ms}}
             .dump() +
         "\n";
}

Result<Tombstone> parse_tombstone(std::string_view text, const std::string& expected_key, const std::string& what) {
  auto parsed = base::parse_json(text, what);
  if (!parsed) {
    return Error::corrupt(parsed.error().message());
  }
  const json& body = *parsed;
  if (!body.is_object() || !body.contains("key") || !body["key"].is_string() || !body.contains("reason") ||
      !body["reason"].is_string() || !body.contains("time_ms") || !body["time_ms"].is_number_integer()) {
    return Error::corrupt(what + " is not a tombstone ({\"key\", \"reason\", \"time\", \"time_ms\"})");
  }
  Tombstone tombstone{body["key"].get<std::string>(), body["reason"].get<std::string>(),
                      body["time_ms"].get<std::int64_t>()};
  if (tombstone.key != expected_key) {
    return Error::corrupt(what + " names key " + tombstone.key + ", not " + expected_key);
  }
  return tombstone;
}

std::string revocation_message(const std::vector<std::string>& keys, std::string_view reason, std::int64_t time_s) {
  std::string message = "opcache-revoke-v1\n" + std::to_string(time_s) + "\n" + std::string(reason) + "\n";
  for (const auto& key : keys) {
    message += key + "\n";
  }
  return message;
}

Result<Signature> sign_revocation(const base::Ed25519PrivateKey& signing_key, const std::vector<std::string>& keys,
                                  std::string_view reason, std::int64_t time_s) {
  OPCACHE_TRY_ASSIGN(auto signature, signing_key.sign(revocation_message(keys, reason, time_s)));
  return Signature{signing_key.public_key(), std::move(signature)};
}

bool revocation_signature_verifies(const Signature& signature, const std::vector<std::string>& keys,
                                   std::string_view reason, std::int64_t time_s) {
  return base::ed25519_verify(signature.public_key, revocation_message(keys, reason, time_s), signature.signature);
}

Status TombstoneDirectory::add(const Tombstone& tombstone) const {
  OPCACHE_TRY(check_key(tombstone.key));
  OPCACHE_TRY(base::ensure_directory(m_dir));
  return base::write_file_atomic(path_of(tombstone.key), tombstone_json(tombstone));
}

Result<std::optional<Tombstone>> TombstoneDirectory::find(const std::string& key) const {
  const auto path = path_of(key);
  auto text = base::read_small_file(path, k_max_tombstone_bytes);
  if (!text) {
    if (text.error().code() == ErrorCode::not_found) {
      return std::optional<Tombstone>();
    }
    return text.error();
  }
  OPCACHE_TRY_ASSIGN(auto tombstone, parse_tombstone(*text, key, "tombstone " + path.string()));
  return std::optional<Tombstone>(std::move(tombstone));
}

Result<bool> TombstoneDirectory::remove(const std::string& key) const {
  const auto path = path_of(key);
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) {
      return false;
    }
    return base::errno_error("cannot remove the tombstone", path, errno);
  }
  (void)base::fsync_directory(m_dir);
  return true;
}

Result<std::vector<Tombstone>> TombstoneDirectory::list(std::int64_t since_ms, std::size_t limit,
                                                        bool* truncated) const {
  std::vector<Tombstone> found;
  std::error_code ec;
  fs::directory_iterator it(m_dir, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) {
      if (truncated != nullptr) {
        *truncated = false;
      }
      return found;
    }
    return Error::io("cannot list the tombstones in " + m_dir.string() + ": " + ec.message());
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.size() != 64 + 5 || name.substr(64) != ".json") {
      continue;  // temp files of a write in progress, anything else
    }
    auto tombstone = find(name.substr(0, 64));
    if (tombstone && *tombstone) {
      found.push_back(std::move(**tombstone));
    }
  }
  return select_tombstones(std::move(found), since_ms, limit, truncated);
}

std::vector<Tombstone> select_tombstones(std::vector<Tombstone> tombstones, std::int64_t since_ms, std::size_t limit,
                                         bool* truncated) {
  std::erase_if(tombstones, [since_ms](const Tombstone& t) { return t.time_ms < since_ms; });
  std::sort(tombstones.begin(), tombstones.end(), [](const Tombstone& a, const Tombstone& b) {
    return a.time_ms != b.time_ms ? a.time_ms < b.time_ms : a.key < b.key;
  });
  if (truncated != nullptr) {
    *truncated = tombstones.size() > limit;
  }
  if (tombstones.size() > limit) {
    tombstones.resize(limit);
  }
  return tombstones;
}

}  // namespace opcache::store
