#include "store/manifest_scan.hpp"

#include <cstdint>
#include <string>

#include "base/sha256.hpp"

namespace opcache::store {

namespace {

// A cursor over JSON text. Every method returns false on anything it does
// not accept; the caller then gives up (and the strict parser decides).
class Scanner {
 public:
  explicit Scanner(std::string_view text) : m_text(text) {}

  bool at_end() {
    skip_space();
    return m_pos == m_text.size();
  }

  bool consume(char c) {
    skip_space();
    if (m_pos < m_text.size() && m_text[m_pos] == c) {
      ++m_pos;
      return true;
    }
    return false;
  }

  bool peek(char c) {
    skip_space();
    return m_pos < m_text.size() && m_text[m_pos] == c;
  }

  // A string with no escapes (names and hex digests our writer never
  // escapes); an escape makes the caller give up.
  bool plain_string(std::string& out) {
    if (!consume('"')) {
      return false;
    }
    const std::size_t start = m_pos;
    for (; m_pos < m_text.size(); ++m_pos) {
      const auto byte = static_cast<unsigned char>(m_text[m_pos]);
      if (byte == '"') {
        out.assign(m_text.data() + start, m_pos - start);
        ++m_pos;
        return true;
      }
      if (byte == '\\' || byte < 0x20) {
        return false;
      }
    }
    return false;
  }

  // A non-negative integer without sign, fraction or exponent.
  bool unsigned_integer(std::uint64_t& out) {
    skip_space();
    const std::size_t start = m_pos;
    out = 0;
    for (; m_pos < m_text.size() && m_text[m_pos] >= '0' && m_text[m_pos] <= '9'; ++m_pos) {
      if (out > (UINT64_MAX - 9) / 10) {
        return false;
      }
      out = out * 10 + static_cast<std::uint64_t>(m_text[m_pos] - '0');
    }
    const std::size_t digits = m_pos - start;
    if (digits == 0 || (digits > 1 && m_text[start] == '0')) {
      return false;
    }
    return m_pos == m_text.size() || (m_text[m_pos] != '.' && m_text[m_pos] != 'e' && m_text[m_pos] != 'E');
  }

  // Skips one value of any kind, checking only its bracket structure and its
  // strings' ends; the strict parse at store time vouched for the rest.
  bool skip_value() {
    skip_space();
    int depth = 0;
    do {
      if (m_pos >= m_text.size()) {
        return false;
      }
      const char c = m_text[m_pos];
      if (c == '"') {
        if (!skip_string()) {
          return false;
        }
        continue;
      }
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth < 0) {
          return false;
        }
      } else if (depth == 0 && (c == ',' || c == ':')) {
        return false;
      }
      ++m_pos;
      if (depth == 0) {
        // A scalar ends at the next delimiter.
        while (m_pos < m_text.size() && m_text[m_pos] != ',' && m_text[m_pos] != '}' && m_text[m_pos] != ']' &&
               c != '}' && c != ']') {
          ++m_pos;
        }
      }
    } while (depth > 0);
    return true;
  }

 private:
  void skip_space() {
    while (m_pos < m_text.size() &&
           (m_text[m_pos] == ' ' || m_text[m_pos] == '\n' || m_text[m_pos] == '\r' || m_text[m_pos] == '\t')) {
      ++m_pos;
    }
  }

  bool skip_string() {
    for (++m_pos; m_pos < m_text.size(); ++m_pos) {
      if (m_text[m_pos] == '\\') {
        ++m_pos;
      } else if (m_text[m_pos] == '"') {
        ++m_pos;
        return true;
      }
    }
    return false;
  }

  std::string_view m_text;
  std::size_t m_pos = 0;
};

// One member object: exactly name, size, sha256 and role, once each.
bool scan_member(Scanner& in, MemberEntry& member) {
  if (!in.consume('{')) {
    return false;
  }
  unsigned seen = 0;
  do {
    std::string field;
    if (!in.plain_string(field) || !in.consume(':')) {
      return false;
    }
    unsigned bit = 0;
    bool ok = false;
    if (field == "name") {
      bit = 1, ok = in.plain_string(member.name);
    } else if (field == "size") {
      bit = 2, ok = in.unsigned_integer(member.size);
    } else if (field == "sha256") {
      bit = 4, ok = in.plain_string(member.sha256);
    } else if (field == "role") {
      bit = 8, ok = in.plain_string(member.role);
    }
    if (!ok || (seen & bit) != 0) {
      return false;
    }
    seen |= bit;
  } while (in.consume(','));
  return seen == 15 && in.consume('}');
}

bool scan_members(Scanner& in, std::vector<MemberEntry>& members) {
  if (!in.consume('[')) {
    return false;
  }
  if (in.consume(']')) {
    return true;
  }
  do {
    MemberEntry member{};
    if (!scan_member(in, member)) {
      return false;
    }
    members.push_back(std::move(member));
  } while (in.consume(','));
  return in.consume(']');
}

// Reads the value of top-level `field` into `manifest`; `bit` marks it seen.
bool scan_field(Scanner& in, const std::string& field, Manifest& manifest, unsigned& bit) {
  std::string text;
  std::uint64_t number = 0;
  if (field == "key") {
    return bit = 1, in.plain_string(manifest.key);
  }
  if (field == "members") {
    return bit = 2, scan_members(in, manifest.members);
  }
  if (field == "created") {
    return bit = 4, in.plain_string(manifest.created);
  }
  if (field == "build_ms") {
    bit = 8;
    if (!in.unsigned_integer(number) || number > static_cast<std::uint64_t>(INT64_MAX)) {
      return false;
    }
    manifest.build_ms = static_cast<std::int64_t>(number);
    return true;
  }
  if (field == "format") {
    return bit = 16, in.plain_string(text) && text == "opcache-bundle";
  }
  if (field == "format_version") {
    return bit = 32, in.unsigned_integer(number) && number == k_bundle_format_version;
  }
  if (field == "compression") {
    return bit = 64, in.plain_string(text) && text == "zstd";
  }
  if (field == "descriptor" || field == "scenario" || field == "producer") {
    bit = field == "descriptor" ? 128u : field == "scenario" ? 256u : 512u;
    return in.peek('{') && in.skip_value();
  }
  return false;
}

}  // namespace

std::optional<Manifest> scan_manifest_for_hit(std::string_view text, const BundleLimits& limits) {
  Scanner in(text);
  Manifest manifest;
  if (!in.consume('{')) {
    return std::nullopt;
  }
  unsigned seen = 0;
  do {
    std::string field;
    unsigned bit = 0;
    if (!in.plain_string(field) || !in.consume(':') || !scan_field(in, field, manifest, bit) || (seen & bit) != 0) {
      return std::nullopt;
    }
    seen |= bit;
  } while (in.consume(','));
  if (!in.consume('}') || !in.at_end() || seen != 1023 || !base::is_sha256_hex(manifest.key) ||
      !check_member_entries(manifest.members, limits)) {
    return std::nullopt;
  }
  return manifest;
}

}  // namespace opcache::store
