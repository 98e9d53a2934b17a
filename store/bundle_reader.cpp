#include "store/bundle_reader.hpp"

#include <cstring>
#include <memory>
#include <vector>

#include <zstd.h>

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

std::uint32_t get_u32_le(const unsigned char* bytes) {
  return static_cast<std::uint32_t>(bytes[0]) | (static_cast<std::uint32_t>(bytes[1]) << 8) |
         (static_cast<std::uint32_t>(bytes[2]) << 16) | (static_cast<std::uint32_t>(bytes[3]) << 24);
}

Error corrupt(const std::string& message) { return Error::corrupt("bundle: " + message); }

// Splits the decompressed payload into members, hashing each one.
class MemberSplitter {
 public:
  MemberSplitter(const std::vector<MemberEntry>& members, MemberSink& sink) : m_members(members), m_sink(sink) {}

  Status start() { return open_next(); }

  Status feed(const char* data, std::size_t size) {
    while (size > 0) {
      if (m_index >= m_members.size()) {
        return corrupt("payload holds more bytes than the manifest declares");
      }
      const MemberEntry& member = m_members[m_index];
      std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(size, member.size - m_done));
      m_hash->update(data, take);
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

 private:
  // Begins the next member; members of size zero are complete at once.
  Status open_next() {
    while (m_index < m_members.size()) {
      OPCACHE_TRY(m_sink.begin(m_members[m_index]));
      m_hash = std::make_unique<base::Sha256>();
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
    if (m_hash->finish_hex() != member.sha256) {
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
  std::unique_ptr<base::Sha256> m_hash;
};

}  // namespace

BundleReader::BundleReader(base::ByteSource& source, BundleLimits limits, KeyCheck key_check,
                           ManifestFields fields)
    : m_source(source), m_limits(limits), m_key_check(key_check), m_fields(fields) {}

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
  if (m_fields == ManifestFields::for_hit && m_key_check == KeyCheck::trust_digest) {
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
  // One context and one pair of buffers per thread, reused: creating them
  // costs more than decoding a typical (few KB) kernel bundle.
  // The buffers are left uninitialised (not vectors): zeroing their 256 KiB
  // cost a hit process 64 page faults, for pages a small bundle never uses.
  static thread_local DCtxPtr dctx(ZSTD_createDCtx(), &ZSTD_freeDCtx);
  static thread_local RawBuffer in_buffer(ZSTD_DStreamInSize());
  static thread_local RawBuffer out_buffer(ZSTD_DStreamOutSize());
  if (!dctx) {
    return Error::internal("zstd: cannot create a decompression context");
  }
  ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_and_parameters);
  ZSTD_DCtx_setParameter(dctx.get(), ZSTD_d_windowLogMax, k_max_window_log);

  MemberSplitter splitter(m_manifest.members, sink);
  OPCACHE_TRY(splitter.start());

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
      return corrupt("truncated in the payload" +
                     (splitter.complete() ? std::string() : " (member \"" + splitter.missing_member_name() + "\")"));
    }
    ZSTD_inBuffer input{in_buffer.data(), n, 0};
    while (input.pos < input.size || !frame_done) {
      ZSTD_outBuffer output{out_buffer.data(), out_buffer.size(), 0};
      last_result = ZSTD_decompressStream(dctx.get(), &output, &input);
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
  if (!splitter.complete()) {
    return corrupt("payload ended before member \"" + splitter.missing_member_name() + "\" was complete");
  }
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
