#include "store/bundle_reader.hpp"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <zstd.h>
#include <zstd_errors.h>

#include "store/bundle_writer.hpp"
#include "store/manifest_scan.hpp"
#include "base/json_parse.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"

namespace opcache::store {

namespace {

using DCtxPtr = std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)>;

// A buffer of `size` bytes whose contents start undefined: new char[], which
// touches no page until it is written.
class RawBuffer {
 public:
  explicit RawBuffer(std::size_t size) : m_bytes(new char[size]), m_size(size) {}
  char* data() noexcept { return m_bytes.get(); }
  std::size_t size() const noexcept { return m_size; }

 private:
  std::unique_ptr<char[]> m_bytes;
  std::size_t m_size;
};

// Our writer uses levels <= 19, whose windows are at most 2^23 bytes; a larger
// window in a bundle is refused rather than allocated.
constexpr int k_max_window_log = 24;

// Members of at most this many bytes in all, whose bundle is in memory, are
// decoded in one call into one buffer (kept per thread) instead of streamed.
constexpr std::uint64_t k_in_place_max_bytes = 4u << 20;

std::uint32_t get_u32_le(const unsigned char* bytes) {
  return static_cast<std::uint32_t>(bytes[0]) | (static_cast<std::uint32_t>(bytes[1]) << 8) |
         (static_cast<std::uint32_t>(bytes[2]) << 16) | (static_cast<std::uint32_t>(bytes[3]) << 24);
}

Error corrupt(const std::string& message) { return Error::corrupt("bundle: " + message); }

// Whether a whole zstd frame declares a window larger than the streamed decoder
// accepts (k_max_window_log). Decoded in place the window is never allocated,
// but the same frames are refused either way.
bool declares_window_too_large(std::string_view frame) {
  const auto descriptor = static_cast<unsigned char>(frame[4]);
  if ((descriptor & 0x20) != 0) {
    return false;  // single segment: the window is the content size, bounded by the output
  }
  const auto window = static_cast<unsigned char>(frame[5]);
  const std::uint64_t base = 1ull << (10 + (window >> 3));
  return base + base / 8 * (window & 7u) > (1ull << k_max_window_log);
}

// One decompression context per thread, reused: creating one costs more than
// decoding a typical (few KB) kernel bundle.
Result<ZSTD_DCtx*> thread_dctx() {
  static thread_local DCtxPtr dctx(ZSTD_createDCtx(), &ZSTD_freeDCtx);
  if (!dctx) {
    return Error::internal("zstd: cannot create a decompression context");
  }
  ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_and_parameters);
  ZSTD_DCtx_setParameter(dctx.get(), ZSTD_d_windowLogMax, k_max_window_log);
  return dctx.get();
}

}  // namespace

// Splits the decompressed payload into members, checking each one's size
// and, unless told not to, its SHA-256.
class MemberSplitter {
 public:
  MemberSplitter(const std::vector<MemberEntry>& members, MemberSink& sink, bool check_digests)
      : m_members(members), m_sink(sink), m_check_digests(check_digests) {}

  Status start() { return open_next(); }

  Status feed(const char* data, std::size_t size) {
    while (size > 0) {
      if (m_index >= m_members.size()) {
        return corrupt("payload holds more bytes than the manifest declares");
      }
      const MemberEntry& member = m_members[m_index];
      std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(size, member.size - m_done));
      if (m_hash) {
        m_hash->update(data, take);
      }
      OPCACHE_TRY(m_sink.write(data, take));
      m_done += take;
      data += take;
      size -= take;
      if (m_done == member.size) {
        OPCACHE_TRY(close_current());
      }
    }
    return {};
  }

  bool complete() const { return m_index >= m_members.size(); }

  std::string missing_member_name() const { return m_index < m_members.size() ? m_members[m_index].name : ""; }

  // A payload that ended before the last member did is corrupt.
  Status check_complete() const {
    if (!complete()) {
      return corrupt("payload ended before member \"" + missing_member_name() + "\" was complete");
    }
    return {};
  }

  // " (member \"NAME\")" for the member not yet complete, or nothing.
  std::string pending_member_note() const {
    return complete() ? std::string() : " (member \"" + missing_member_name() + "\")";
  }

 private:
  // Begins the next member; members of size zero are complete at once.
  Status open_next() {
    while (m_index < m_members.size()) {
      OPCACHE_TRY(m_sink.begin(m_members[m_index]));
      if (m_check_digests) {
        m_hash.emplace();
      }
      m_done = 0;
      if (m_members[m_index].size != 0) {
        return {};
      }
      OPCACHE_TRY(finish_member());
    }
    return {};
  }

  Status finish_member() {
    const MemberEntry& member = m_members[m_index];
    if (m_hash && m_hash->finish_hex() != member.sha256) {
      return corrupt("member \"" + member.name + "\" does not match its SHA-256 (the data was altered)");
    }
    OPCACHE_TRY(m_sink.end(member));
    ++m_index;
    return {};
  }

  Status close_current() {
    OPCACHE_TRY(finish_member());
    return open_next();
  }

  const std::vector<MemberEntry>& m_members;
  MemberSink& m_sink;
  std::size_t m_index = 0;
  std::uint64_t m_done = 0;
  const bool m_check_digests;
  std::optional<base::Sha256> m_hash;  // of the current member, when digests are checked
};

BundleReader::BundleReader(base::ByteSource& source, BundleLimits limits, KeyCheck key_check,
                           ReadFor purpose)
    : m_source(source), m_limits(limits), m_key_check(key_check), m_purpose(purpose) {}

Status BundleReader::read_exact(void* buffer, std::size_t size, const char* what) {
  auto* bytes = static_cast<char*>(buffer);
  std::size_t have = 0;
  while (have < size) {
    OPCACHE_TRY_ASSIGN(std::size_t n, m_source.read(bytes + have, size - have));
    if (n == 0) {
      return corrupt(std::string("truncated in the ") + what + " (" + std::to_string(have) + " of " +
                     std::to_string(size) + " bytes)");
    }
    have += n;
  }
  return {};
}

Result<Manifest> BundleReader::read_manifest() {
  unsigned char header[k_bundle_header_size];
  OPCACHE_TRY(read_exact(header, sizeof header, "header"));
  if (std::memcmp(header, k_bundle_magic, 8) != 0) {
    return corrupt("not an opcache bundle (bad magic)");
  }
  std::uint32_t version = get_u32_le(header + 8);
  if (version != k_bundle_format_version) {
    return corrupt("format version " + std::to_string(version) + " is not supported (this opcache reads version " +
                   std::to_string(k_bundle_format_version) + ")");
  }
  std::uint32_t manifest_length = get_u32_le(header + 12);
  if (manifest_length == 0 || manifest_length > m_limits.max_manifest_bytes) {
    return corrupt("manifest length " + std::to_string(manifest_length) + " is outside 1.." +
                   std::to_string(m_limits.max_manifest_bytes));
  }
  std::string text(manifest_length, '\0');
  OPCACHE_TRY(read_exact(text.data(), text.size(), "manifest"));
  if (m_purpose == ReadFor::local_hit && m_key_check == KeyCheck::trust_digest) {
    if (auto scanned = scan_manifest_for_hit(text, m_limits)) {
      m_manifest = std::move(*scanned);
      m_have_manifest = true;
      return m_manifest;
    }
  }
  auto parsed = base::parse_json(text, "manifest");
  if (!parsed) {
    return Error::corrupt("bundle: " + parsed.error().message());
  }
  auto manifest = manifest_from_json(*parsed, m_limits, m_key_check);
  if (!manifest) {
    return Error::corrupt("bundle: " + manifest.error().message());
  }
  m_manifest = *manifest;
  m_have_manifest = true;
  return manifest;
}

Status BundleReader::read_members(MemberSink& sink) {
  if (!m_have_manifest) {
    return Error::internal("BundleReader::read_members called before read_manifest");
  }
  MemberSplitter splitter(m_manifest.members, sink, m_purpose != ReadFor::local_hit);
  OPCACHE_TRY(splitter.start());
  if (m_manifest.total_size() <= k_in_place_max_bytes) {
    if (auto payload = m_source.take_rest()) {
      return decode_in_place(*payload, splitter);
    }
  }
  return decode_streamed(splitter);
}

Status BundleReader::decode_in_place(std::string_view payload, MemberSplitter& splitter) {
  // The payload must be one regular zstd frame: a skippable frame would carry
  // bytes nobody checks.
  if (payload.size() < 4) {
    return corrupt("truncated in the payload (" + std::to_string(payload.size()) + " of 4 bytes)");
  }
  if (get_u32_le(reinterpret_cast<const unsigned char*>(payload.data())) != ZSTD_MAGICNUMBER) {
    return corrupt("payload is not a zstd frame");
  }
  const std::size_t frame_size = ZSTD_findFrameCompressedSize(payload.data(), payload.size());
  if (ZSTD_isError(frame_size)) {
    return ZSTD_getErrorCode(frame_size) == ZSTD_error_srcSize_wrong
               ? corrupt("truncated in the payload" + splitter.pending_member_note())
               : corrupt(std::string("payload does not decompress: ") + ZSTD_getErrorName(frame_size));
  }
  if (declares_window_too_large(payload)) {
    return corrupt(std::string("payload does not decompress: ") +
                   ZSTD_getErrorString(ZSTD_error_frameParameter_windowTooLarge));
  }
  // One byte of room past the declared size tells "more bytes than declared"
  // from "exactly as declared".
  const std::size_t room = static_cast<std::size_t>(m_manifest.total_size()) + 1;
  static thread_local RawBuffer output(0);
  if (output.size() < room) {
    output = RawBuffer(room);
  }
  OPCACHE_TRY_ASSIGN(ZSTD_DCtx * dctx, thread_dctx());
  const std::size_t produced = ZSTD_decompressDCtx(dctx, output.data(), room, payload.data(), frame_size);
  if (ZSTD_isError(produced)) {
    return ZSTD_getErrorCode(produced) == ZSTD_error_dstSize_tooSmall
               ? corrupt("payload holds more bytes than the manifest declares")
               : corrupt(std::string("payload does not decompress: ") + ZSTD_getErrorName(produced));
  }
  OPCACHE_TRY(splitter.feed(output.data(), produced));
  if (frame_size != payload.size()) {
    return corrupt("unexpected bytes after the compressed payload");
  }
  OPCACHE_TRY(splitter.check_complete());
  return {};
}

Status BundleReader::decode_streamed(MemberSplitter& splitter) {
  // One pair of buffers per thread, reused, and left uninitialised (not
  // vectors): zeroing their 256 KiB cost a hit process 64 page faults, for
  // pages a small bundle never uses.
  static thread_local RawBuffer in_buffer(ZSTD_DStreamInSize());
  static thread_local RawBuffer out_buffer(ZSTD_DStreamOutSize());
  OPCACHE_TRY_ASSIGN(ZSTD_DCtx * dctx, thread_dctx());

  // The payload must be a regular zstd frame: a skippable frame would carry
  // bytes nobody checks.
  unsigned char magic[4];
  OPCACHE_TRY(read_exact(magic, sizeof magic, "payload"));
  if (get_u32_le(magic) != ZSTD_MAGICNUMBER) {
    return corrupt("payload is not a zstd frame");
  }
  std::memcpy(in_buffer.data(), magic, sizeof magic);
  std::size_t pending = sizeof magic;  // bytes already in in_buffer
  bool frame_done = false;
  std::size_t last_result = 1;
  while (!frame_done) {
    std::size_t n = pending;
    pending = 0;
    if (n == 0) {
      OPCACHE_TRY_ASSIGN(n, m_source.read(in_buffer.data(), in_buffer.size()));
    }
    if (n == 0) {
      return corrupt("truncated in the payload" + splitter.pending_member_note());
    }
    ZSTD_inBuffer input{in_buffer.data(), n, 0};
    while (input.pos < input.size || !frame_done) {
      ZSTD_outBuffer output{out_buffer.data(), out_buffer.size(), 0};
      last_result = ZSTD_decompressStream(dctx, &output, &input);
      if (ZSTD_isError(last_result)) {
        return corrupt(std::string("payload does not decompress: ") + ZSTD_getErrorName(last_result));
      }
      OPCACHE_TRY(splitter.feed(out_buffer.data(), output.pos));
      if (last_result == 0) {
        frame_done = true;
        if (input.pos < input.size) {
          return corrupt("unexpected bytes after the compressed payload");
        }
        break;
      }
      // Need more input and the decoder has flushed what it could.
      if (input.pos == input.size && output.pos < output.size) {
        break;
      }
    }
  }
  OPCACHE_TRY(splitter.check_complete());
  char extra = 0;
  OPCACHE_TRY_ASSIGN(std::size_t trailing, m_source.read(&extra, 1));
  if (trailing != 0) {
    return corrupt("unexpected bytes after the compressed payload");
  }
  return {};
}

Result<Manifest> verify_bundle(base::ByteSource& source, const BundleLimits& limits, std::string* digest_out) {
  BundleReader reader(source, limits);
  OPCACHE_TRY_ASSIGN(Manifest manifest, reader.read_manifest());
  DiscardingSink sink;
  OPCACHE_TRY(reader.read_members(sink));
  if (digest_out != nullptr) {
    *digest_out = reader.finish_digest();
  }
  return manifest;
}

}  // namespace opcache::store
