// Fuzz target: the bundle reader (store/bundle_reader, store/manifest,
// store/manifest_scan) on arbitrary bytes, with the normal limits.
//  - The bytes as a bundle, read whole from memory the way uploads, downloads
//    and imports are read (KeyCheck::recompute, every manifest field), and
//    again in 13-byte reads the way a local hit is read (the fast manifest
//    scan, KeyCheck::trust_digest).
//  - The bytes as manifest text: when the fast scan accepts a manifest, the
//    strict parse must agree on what the scan reads (key, members, created,
//    build_ms), or a hit could decode a bundle differently from its upload.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "base/byte_stream.hpp"
#include "base/json_parse.hpp"
#include "store/bundle_reader.hpp"
#include "store/manifest_scan.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

using namespace opcache;

// A memory source that returns at most `step` bytes a read.
class TricklingSource final : public base::ByteSource {
 public:
  TricklingSource(std::string_view data, std::size_t step) : m_data(data), m_step(step) {}
  Result<std::size_t> read(void* buffer, std::size_t size) override {
    const std::size_t n = std::min({size, m_step, m_data.size()});
    std::memcpy(buffer, m_data.data(), n);
    m_data.remove_prefix(n);
    return n;
  }

 private:
  std::string_view m_data;
  std::size_t m_step;
};

// Whether the bundle reads whole; its digest when it does.
std::optional<std::string> read_bundle(base::ByteSource& source, store::KeyCheck key_check, store::ReadFor purpose) {
  store::BundleReader reader(source, store::BundleLimits{}, key_check, purpose);
  auto manifest = reader.read_manifest();
  if (!manifest) {
    fuzz::trace(manifest.error().message());
    return std::nullopt;
  }
  store::DiscardingSink sink;
  auto members = reader.read_members(sink);
  fuzz::trace(members ? "read " + reader.finish_digest() : members.error().message());
  return members ? std::optional<std::string>(reader.finish_digest()) : std::nullopt;
}

[[noreturn]] void disagree(const char* what) {
  std::fprintf(stderr, "manifest_scan and manifest_from_json disagree on %s\n", what);
  std::abort();
}

void compare_scan_with_strict(std::string_view text) {
  const store::BundleLimits limits;
  auto scanned = store::scan_manifest_for_hit(text, limits);
  auto parsed = base::parse_json(text, "manifest");
  if (!scanned || !parsed) {
    return;  // the scan only skips over descriptor, scenario and producer: the strict parse may refuse those
  }
  auto strict = store::manifest_from_json(*parsed, limits, store::KeyCheck::trust_digest);
  if (!strict) {
    return;
  }
  if (scanned->key != strict->key) disagree("key");
  if (scanned->members != strict->members) disagree("members");
  if (scanned->created != strict->created) disagree("created");
  if (scanned->build_ms != strict->build_ms) disagree("build_ms");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = fuzz::as_text(data, size);
  // A bundle in memory is decoded in one call, one trickled in is streamed:
  // the two must accept and refuse the same bytes.
  base::MemorySource whole(bytes);
  const bool in_place = read_bundle(whole, store::KeyCheck::recompute, store::ReadFor::verification).has_value();
  TricklingSource trickle(bytes, 13);
  const bool streamed = read_bundle(trickle, store::KeyCheck::recompute, store::ReadFor::verification).has_value();
  if (in_place != streamed) disagree("a bundle decoded in place and streamed");
  TricklingSource hit(bytes, 13);
  read_bundle(hit, store::KeyCheck::trust_digest, store::ReadFor::local_hit);
  compare_scan_with_strict(bytes);
  return 0;
}
