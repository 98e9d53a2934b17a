#include "remote/bundle_stream.hpp"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

#include "base/try.hpp"
#include "store/key.hpp"

namespace opcache::remote {

namespace {

using json = nlohmann::json;
using Status_ = StreamFrame::Status;

constexpr std::array<std::pair<Status_, std::string_view>, 6> k_status_names = {{
    {Status_::hit, "hit"},
    {Status_::miss, "miss"},
    {Status_::revoked, "revoked"},
    {Status_::later, "later"},
    {Status_::too_large, "too_large"},
    {Status_::end, "end"},
}};

Error malformed(const std::string& what) { return Error::remote("malformed bundle stream: " + what); }

Result<Status_> parse_status(const json& header) {
  auto status = header.find("status");
  if (status != header.end() && status->is_string()) {
    for (const auto& [value, name] : k_status_names) {
      if (status->get<std::string>() == name) {
        return value;
      }
    }
  }
  return malformed("a frame's \"status\" is not one of hit, miss, revoked, later, too_large, end");
}

// A non-negative integer member, or an error naming it.
Result<std::int64_t> count_member(const json& header, const char* name, std::int64_t high) {
  auto member = header.find(name);
  if (member == header.end() || !member->is_number_integer() || member->get<std::int64_t>() < 0 ||
      member->get<std::int64_t>() > high) {
    return malformed(std::string("a frame's \"") + name + "\" is not an integer from 0 to " + std::to_string(high));
  }
  return member->get<std::int64_t>();
}

std::string string_member(const json& header, const char* name) {
  auto member = header.find(name);
  return member != header.end() && member->is_string() ? member->get<std::string>() : std::string();
}

Result<store::Signatures> signatures_member(const json& header) {
  store::Signatures signatures;
  auto member = header.find("signatures");
  if (member == header.end()) {
    return signatures;
  }
  if (!member->is_array()) {
    return malformed("a frame's \"signatures\" is not an array");
  }
  for (const auto& item : *member) {
    if (!item.is_string()) {
      return malformed("a frame's signature is not a string");
    }
    auto signature = store::parse_signature(item.get<std::string>());
    if (!signature) {
      return malformed("a frame's signature: " + signature.error().message());
    }
    store::add_signature(signatures, std::move(*signature));
  }
  return signatures;
}

Result<StreamFrame> parse_frame(std::string_view text) {
  auto header = json::parse(text, nullptr, false);
  if (!header.is_object()) {
    return malformed("a frame header is not a JSON object");
  }
  StreamFrame frame;
  OPCACHE_TRY_ASSIGN(frame.status, parse_status(header));
  if (frame.status == Status_::end) {
    OPCACHE_TRY_ASSIGN(frame.entries, count_member(header, "entries", std::int64_t(1) << 40));
    return frame;
  }
  frame.key = string_member(header, "key");
  if (!store::check_key(frame.key)) {
    return malformed("a frame's \"key\" is not a cache key");
  }
  if (frame.status == Status_::hit) {
    OPCACHE_TRY_ASSIGN(frame.bytes, count_member(header, "bytes", k_max_frame_bundle));
    frame.digest = string_member(header, "digest");
    OPCACHE_TRY_ASSIGN(frame.signatures, signatures_member(header));
  }
  frame.reason = string_member(header, "reason");
  return frame;
}

}  // namespace

std::string_view frame_status_name(StreamFrame::Status status) noexcept {
  for (const auto& [value, name] : k_status_names) {
    if (value == status) {
      return name;
    }
  }
  return "end";
}

std::string encode_frame(const StreamFrame& frame) {
  json header = {{"status", frame_status_name(frame.status)}};
  if (frame.status == Status_::end) {
    header["entries"] = frame.entries;
  } else {
    header["key"] = frame.key;
  }
  if (frame.status == Status_::hit) {
    header["bytes"] = frame.bytes;
    header["digest"] = frame.digest;
    json signatures = json::array();
    for (const auto& signature : frame.signatures) {
      signatures.push_back(store::format_signature(signature));
    }
    header["signatures"] = std::move(signatures);
  }
  if (frame.status == Status_::revoked) {
    header["reason"] = frame.reason;
  }
  const std::string text = header.dump();
  const auto size = static_cast<std::uint32_t>(text.size());
  std::string out;
  out.reserve(4 + text.size());
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((size >> shift) & 0xff));
  }
  return out + text;
}

void BundleStreamReader::reset() noexcept {
  m_state = State::magic;
  m_pending.clear();
  m_header_size = 0;
  m_body_left = 0;
}

Status BundleStreamReader::on_header() {
  OPCACHE_TRY_ASSIGN(auto frame, parse_frame(m_pending));
  m_pending.clear();
  OPCACHE_TRY(m_sink.frame(frame));
  if (frame.status == StreamFrame::Status::end) {
    m_state = State::done;
  } else if (frame.status == StreamFrame::Status::hit) {
    m_body_left = frame.bytes;
    m_state = State::body;
    if (m_body_left == 0) {
      m_state = State::length;
      return m_sink.bundle_end();
    }
  } else {
    m_state = State::length;
  }
  return {};
}

Status BundleStreamReader::feed(const char* data, std::size_t size) {
  while (size > 0) {
    // Takes up to `wanted` bytes into m_pending; true when it holds them all.
    auto gather = [&](std::size_t wanted) {
      const std::size_t take = std::min(size, wanted - m_pending.size());
      m_pending.append(data, take);
      data += take;
      size -= take;
      return m_pending.size() == wanted;
    };
    switch (m_state) {
      case State::magic:
        if (gather(k_bundle_stream_magic.size())) {
          if (m_pending != k_bundle_stream_magic) {
            return malformed("it does not start with " + std::string(k_bundle_stream_magic));
          }
          m_pending.clear();
          m_state = State::length;
        }
        break;
      case State::length:
        if (gather(4)) {
          m_header_size = 0;
          for (unsigned char byte : m_pending) {
            m_header_size = (m_header_size << 8) | byte;
          }
          if (m_header_size < 2 || m_header_size > k_max_frame_header) {
            return malformed("a frame header of " + std::to_string(m_header_size) + " bytes");
          }
          m_pending.clear();
          m_state = State::header;
        }
        break;
      case State::header:
        if (gather(m_header_size)) {
          OPCACHE_TRY(on_header());
        }
        break;
      case State::body: {
        const auto take = static_cast<std::size_t>(std::min<std::int64_t>(m_body_left, static_cast<std::int64_t>(size)));
        OPCACHE_TRY(m_sink.bundle_bytes(data, take));
        data += take;
        size -= take;
        m_body_left -= static_cast<std::int64_t>(take);
        if (m_body_left == 0) {
          m_state = State::length;
          OPCACHE_TRY(m_sink.bundle_end());
        }
        break;
      }
      case State::done:
        return malformed(std::to_string(size) + " bytes after the end frame");
    }
  }
  return {};
}

}  // namespace opcache::remote
