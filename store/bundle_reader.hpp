// Decodes and verifies bundle format v1. Nothing a bundle says is trusted
// until checked: header, manifest (limits, names, key), every member's size
// and SHA-256, the end of the compressed frame, and the end of the input.
#pragma once

#include <cstdint>
#include <string>

#include "opcache/result.hpp"
#include "base/byte_stream.hpp"
#include "store/manifest.hpp"

namespace opcache::store {

/// Receives members while a bundle is decoded. `end` is called only after the
/// member's size and SHA-256 matched; a decode that fails later (a later
/// member, trailing bytes) must still be treated as failed by the sink's owner.
class MemberSink {
 public:
  virtual ~MemberSink() = default;
  virtual Status begin(const MemberEntry& member) = 0;
  virtual Status write(const char* data, std::size_t size) = 0;
  virtual Status end(const MemberEntry& member) = 0;
};

/// A sink that keeps nothing: decoding into it verifies a bundle.
class DiscardingSink final : public MemberSink {
 public:
  Status begin(const MemberEntry&) override { return {}; }
  Status write(const char*, std::size_t) override { return {}; }
  Status end(const MemberEntry&) override { return {}; }
};

/// What a reader is for, and so what it may take on trust.
enum class ReadFor {
  verification,  ///< everything checked: the manifest strictly parsed, every member's size and SHA-256
  local_hit,     ///< a hit on an object of this store, whose digest the caller checks before anything
                 ///< is published (only with KeyCheck::trust_digest). Every object was verified whole
                 ///< when it was stored, so that digest vouches for the rest: key and members may be
                 ///< read fast (scan_manifest_for_hit), descriptor and scenario may be left empty, and
                 ///< members' SHA-256 are not computed again (their sizes still are checked)
};

class MemberSplitter;  // bundle_reader.cpp: hands the payload to a sink member by member

/// Reads one bundle from a source. Use: read_manifest(), then read_members().
/// Errors about the bundle's bytes are `corrupt` and start with "bundle: ";
/// errors from the source itself (I/O) are passed through.
class BundleReader {
 public:
  explicit BundleReader(base::ByteSource& source, BundleLimits limits = {}, KeyCheck key_check = KeyCheck::recompute,
                        ReadFor purpose = ReadFor::verification);

  /// Reads and validates the header and manifest (see manifest_from_json).
  Result<Manifest> read_manifest();

  /// Decompresses the payload into `sink`, verifying every member, and checks
  /// that the frame and the input end exactly where the manifest says. A
  /// payload the source holds in memory (ByteSource::take_rest) is decoded in
  /// one call when its members are small; the checks and errors are the same.
  Status read_members(MemberSink& sink);

  /// SHA-256 (hex) of every byte read; the bundle digest after read_members().
  std::string finish_digest() { return m_source.finish_hex(); }
  std::uint64_t bytes_read() const noexcept { return m_source.bytes(); }

 private:
  Status read_exact(void* buffer, std::size_t size, const char* what);
  Status decode_streamed(MemberSplitter& splitter);
  Status decode_in_place(std::string_view payload, MemberSplitter& splitter);

  base::HashingSource m_source;
  BundleLimits m_limits;
  KeyCheck m_key_check;
  ReadFor m_purpose;
  Manifest m_manifest;
  bool m_have_manifest = false;
};

/// Verifies a whole bundle from `source` without keeping its members.
/// Returns the manifest; `digest_out`, when given, receives the bundle digest.
Result<Manifest> verify_bundle(base::ByteSource& source, const BundleLimits& limits = {}, std::string* digest_out = nullptr);

}  // namespace opcache::store
