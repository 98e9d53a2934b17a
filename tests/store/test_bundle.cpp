// Bundle format v1: the writer and the reader (store/bundle_writer.hpp,
// store/bundle_reader.hpp). Round trips use real compiled kernels; every
// rejection path is exercised with bundles built or altered by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <zstd.h>
#include <nlohmann/json.hpp>

#include "base/canonical_json.hpp"
#include "base/sha256.hpp"
#include "store/bundle_reader.hpp"
#include "store/bundle_writer.hpp"
#include "store/directory_sink.hpp"
#include "store/key.hpp"
#include "store/manifest.hpp"
#include "store/scenario.hpp"
#include "tests/support/bundle_inputs.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using nlohmann::json;
using opcache::ErrorCode;
using opcache::Result;
using opcache::Status;
using opcache::base::ByteSink;
using opcache::base::ByteSource;
using opcache::base::sha256_hex;
using opcache::base::StringSink;
using opcache::store::BundleInput;
using opcache::store::BundleLimits;
using opcache::store::BundleReader;
using opcache::store::BundleWriteOptions;
using opcache::store::Manifest;
using opcache::store::MemberEntry;
using opcache::store::MemberSink;
using opcache::store::WrittenBundle;
using opcache::test::k_test_scenario;
using opcache::test::scenario_json;
using opcache::test::TempDir;
namespace fs = std::filesystem;

json test_descriptor(const std::string& op = "square") {
  return {{"op_type", op}, {"inputs", {{{"shape", {16}}, {"dtype", "float32"}, {"format", "ND"}}}}};
}

// Collects decoded members in memory and records the order of calls.
class CollectingSink final : public MemberSink {
 public:
  Status begin(const MemberEntry& member) override {
    CHECK_MESSAGE(!m_open, "begin() while member \"" << m_current << "\" is still open");
    begun.push_back(member.name);
    data[member.name];
    m_current = member.name;
    m_open = true;
    return {};
  }
  Status write(const char* bytes, std::size_t size) override {
    CHECK(m_open);
    data[m_current].append(bytes, size);
    total_written += size;
    return {};
  }
  Status end(const MemberEntry& member) override {
    CHECK(m_open);
    CHECK(member.name == m_current);
    if (check_digests) {
      CHECK(opcache::base::sha256_hex(data[member.name]) == member.sha256);
    }
    ended.push_back(member.name);
    m_open = false;
    return {};
  }

  std::vector<std::string> begun;
  std::vector<std::string> ended;
  std::map<std::string, std::string> data;
  std::uint64_t total_written = 0;
  bool check_digests = true;  // that an ended member matches its manifest SHA-256

 private:
  std::string m_current;
  bool m_open = false;
};

// Hands out at most `chunk` bytes per read, to exercise every buffer boundary.
class ChunkedSource final : public opcache::base::ByteSource {
 public:
  ChunkedSource(std::string_view data, std::size_t chunk) : m_data(data), m_chunk(chunk) {}
  Result<std::size_t> read(void* buffer, std::size_t size) override {
    std::size_t n = std::min({size, m_chunk, m_data.size() - m_pos});
    std::memcpy(buffer, m_data.data() + m_pos, n);
    m_pos += n;
    return n;
  }

 private:
  std::string_view m_data;
  std::size_t m_chunk;
  std::size_t m_pos = 0;
};

// Serves `good` bytes, then fails like a broken disk.
class FailingSource final : public opcache::base::ByteSource {
 public:
  FailingSource(std::string_view data, std::size_t good) : m_data(data.substr(0, good)) {}
  Result<std::size_t> read(void* buffer, std::size_t size) override {
    if (m_pos == m_data.size()) {
      return opcache::Error::io("test source: read failed (EIO)");
    }
    std::size_t n = std::min(size, m_data.size() - m_pos);
    std::memcpy(buffer, m_data.data() + m_pos, n);
    m_pos += n;
    return n;
  }

 private:
  std::string_view m_data;
  std::size_t m_pos = 0;
};

struct Encoded {
  WrittenBundle written;
  std::string bytes;
};

Encoded encode(const BundleInput& input, const BundleWriteOptions& options = {}) {
  opcache::base::StringSink sink;
  auto written = write_bundle(input, sink, options);
  REQUIRE_MESSAGE(written.ok(), (written.ok() ? "" : written.error().message()));
  return {*written, sink.data()};
}

// An input of `files` in the test scenario with a fixed build time and creation
// time, so two encodings of the same files give the same bytes.
BundleInput reproducible_input(const std::vector<fs::path>& files, json descriptor = test_descriptor()) {
  BundleInput input;
  input.descriptor = std::move(descriptor);
  input.scenario = scenario_json(k_test_scenario);
  for (const auto& file : files) {
    input.members.push_back({file.filename().string(), file, ""});
  }
  input.build_ms = 1234;
  input.created = "2026-11-22T00:51:54Z";
  return input;
}

BundleInput reproducible_input(const opcache::test::KernelTriple& kernel) {
  return reproducible_input(kernel.files(), json::parse(kernel.descriptor_json));
}

// The three parts of a bundle: 16-byte header, manifest text, compressed payload.
struct Parts {
  std::string header;
  std::string manifest;
  std::string payload;
};

Parts split(const std::string& bundle) {
  REQUIRE(bundle.size() >= opcache::store::k_bundle_header_size);
  std::uint32_t length = 0;
  for (int i = 3; i >= 0; --i) {
    length = (length << 8) | static_cast<unsigned char>(bundle[12 + i]);
  }
  REQUIRE(bundle.size() >= 16 + length);
  return {bundle.substr(0, 16), bundle.substr(16, length), bundle.substr(16 + length)};
}

std::string assemble(const std::string& manifest_text, const std::string& payload) {
  return opcache::store::encode_bundle_header(static_cast<std::uint32_t>(manifest_text.size())) + manifest_text +
         payload;
}

std::string assemble(const json& manifest, const std::string& payload) {
  auto text = opcache::base::canonical_json(manifest);
  REQUIRE(text.ok());
  return assemble(*text, payload);
}

std::string zstd_compress(const std::string& data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  std::size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3);
  REQUIRE_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

std::string zstd_decompress(const std::string& frame) {
  auto size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  REQUIRE(size != ZSTD_CONTENTSIZE_ERROR);
  REQUIRE(size != ZSTD_CONTENTSIZE_UNKNOWN);
  std::string out(size, '\0');
  std::size_t n = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  REQUIRE_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

// Reads a whole bundle; returns the first error (manifest or members).
Status decode(const std::string& bytes, MemberSink& sink, const BundleLimits& limits = {}, std::size_t chunk = SIZE_MAX,
              std::string* digest = nullptr, std::uint64_t* bytes_read = nullptr) {
  ChunkedSource source(bytes, chunk);
  BundleReader reader(source, limits);
  auto manifest = reader.read_manifest();
  if (!manifest) {
    return manifest.error();
  }
  Status members = reader.read_members(sink);
  if (bytes_read != nullptr) {
    *bytes_read = reader.bytes_read();
  }
  if (members && digest != nullptr) {
    *digest = reader.finish_digest();
  }
  return members;
}

template <typename R>
void expect_error(const R& result, ErrorCode code, const std::vector<std::string>& needles) {
  REQUIRE_FALSE(result.ok());
  const std::string& message = result.error().message();
  INFO("message: " << message);
  CHECK(opcache::error_code_name(result.error().code()) == std::string(opcache::error_code_name(code)));
  for (const auto& needle : needles) {
    CHECK_MESSAGE(message.find(needle) != std::string::npos, "expected \"" << needle << "\" in the message");
  }
}

// Reads a whole bundle held in memory, so that its payload is decoded in place
// (ByteSource::take_rest); returns the first error.
Status decode_in_memory(const std::string& bytes, MemberSink& sink, const BundleLimits& limits = {},
                        opcache::store::ReadFor purpose = opcache::store::ReadFor::verification,
                        std::string* digest = nullptr) {
  opcache::base::MemorySource source(bytes);
  BundleReader reader(source, limits,
                      purpose == opcache::store::ReadFor::local_hit ? opcache::store::KeyCheck::trust_digest
                                                                      : opcache::store::KeyCheck::recompute,
                      purpose);
  auto manifest = reader.read_manifest();
  if (!manifest) {
    return manifest.error();
  }
  Status members = reader.read_members(sink);
  if (members && digest != nullptr) {
    *digest = reader.finish_digest();
  }
  return members;
}

// Refused streamed and refused in place, with the same words.
void expect_corrupt(const std::string& bundle, const std::vector<std::string>& needles,
                    const BundleLimits& limits = {}) {
  for (const bool in_place : {false, true}) {
    INFO(std::string(in_place ? "decoded in place" : "streamed"));
    CollectingSink sink;
    Status status = in_place ? decode_in_memory(bundle, sink, limits) : decode(bundle, sink, limits);
    expect_error(status, ErrorCode::corrupt, needles);
    // bundle_reader.hpp: "Errors about the bundle's bytes are `corrupt` and start with "bundle: "".
    CHECK(status.error().message().rfind("bundle: ", 0) == 0);
  }
}

std::string pseudo_random_bytes(std::size_t size, std::uint32_t seed) {
  std::string out(size, '\0');
  std::uint32_t state = seed;
  for (auto& c : out) {
    state = state * 1664525u + 1013904223u;
    c = static_cast<char>(state >> 24);
  }
  return out;
}

// A zstd frame built by hand: no content size, the given window log, and RLE
// blocks of `block_size` copies of `byte` (`blocks` of them).
std::string rle_frame(int window_log, std::uint32_t block_size, std::size_t blocks, char byte) {
  std::string frame = "\x28\xB5\x2F\xFD";  // magic, little endian
  frame.push_back('\x00');                 // descriptor: no FCS, not single segment, no checksum
  frame.push_back(static_cast<char>((window_log - 10) << 3));
  for (std::size_t i = 0; i < blocks; ++i) {
    std::uint32_t last = i + 1 == blocks ? 1 : 0;
    std::uint32_t header = last | (1u << 1) | (block_size << 3);  // type 1 = RLE
    frame.push_back(static_cast<char>(header & 0xff));
    frame.push_back(static_cast<char>((header >> 8) & 0xff));
    frame.push_back(static_cast<char>((header >> 16) & 0xff));
    frame.push_back(byte);
  }
  return frame;
}

// Peak resident set size of this process (VmHWM), in KiB.
long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::stol(line.substr(6));
    }
  }
  return -1;
}

// A small member set on disk with known contents.
std::vector<fs::path> write_files(const TempDir& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<fs::path> paths;
  for (const auto& [name, contents] : files) {
    paths.push_back(dir / name);
    opcache::test::write_text(paths.back(), contents);
  }
  return paths;
}

// A manifest for the given members (names and contents), with a valid key.
json manifest_for(const std::vector<std::pair<std::string, std::string>>& members) {
  Manifest manifest;
  manifest.descriptor = test_descriptor();
  manifest.scenario = scenario_json(k_test_scenario);
  manifest.key = *opcache::store::derive_key(manifest.descriptor, manifest.scenario);
  for (const auto& [name, contents] : members) {
    manifest.members.push_back(
        {name, contents.size(), opcache::base::sha256_hex(contents), opcache::store::role_for_member_name(name)});
  }
  manifest.producer = {"opcache", "test", ""};
  manifest.created = "2026-11-22T00:51:54Z";
  return opcache::store::manifest_to_json(manifest);
}

}  // namespace

// ---------------------------------------------------------------- round trips

TEST_CASE("store::Bundle round-trips a real compiled .o/.json/.info triple byte for byte") {
  TempDir dir;
  auto kernel = opcache::test::make_kernel(dir.path(), "square", 16);
  BundleInput input = reproducible_input(kernel);
  Encoded encoded = encode(input);

  CHECK(encoded.written.bytes == encoded.bytes.size());
  CHECK(encoded.written.digest == opcache::base::sha256_hex(encoded.bytes));
  CHECK(encoded.bytes.compare(0, 8, "OPCBUNDL") == 0);

  const Manifest& written = encoded.written.manifest;
  CHECK(written.key == *opcache::store::derive_key(input.descriptor, input.scenario));
  CHECK(written.descriptor == input.descriptor);
  CHECK(written.scenario == input.scenario);
  CHECK(written.created == "2026-11-22T00:51:54Z");
  CHECK(written.build_ms == 1234);
  CHECK(written.producer.tool == "opcache");
  CHECK_FALSE(written.producer.version.empty());
  REQUIRE(written.members.size() == 3);
  const std::vector<std::string> roles = {"object", "metadata", "info"};
  for (std::size_t i = 0; i < 3; ++i) {
    fs::path file = kernel.files()[i];
    std::string contents = opcache::test::read_text(file);
    CHECK(written.members[i].name == file.filename().string());
    CHECK(written.members[i].size == contents.size());
    CHECK(written.members[i].sha256 == opcache::base::sha256_hex(contents));
    CHECK(written.members[i].role == roles[i]);
  }

  opcache::base::MemorySource source(encoded.bytes);
  BundleReader reader(source);
  auto manifest = reader.read_manifest();
  REQUIRE_MESSAGE(manifest.ok(), (manifest.ok() ? "" : manifest.error().message()));
  CHECK(opcache::store::manifest_to_json(*manifest) == opcache::store::manifest_to_json(written));
  CollectingSink sink;
  Status members = reader.read_members(sink);
  REQUIRE_MESSAGE(members.ok(), (members.ok() ? "" : members.error().message()));
  CHECK(reader.bytes_read() == encoded.bytes.size());
  CHECK(reader.finish_digest() == encoded.written.digest);

  std::vector<std::string> names = {kernel.object.filename().string(), kernel.metadata.filename().string(),
                                    kernel.info.filename().string()};
  CHECK(sink.begun == names);
  CHECK(sink.ended == names);
  for (const auto& file : kernel.files()) {
    CHECK(sink.data[file.filename().string()] == opcache::test::read_text(file));
  }
  // The decoded .o is the real ELF the compiler wrote.
  CHECK(sink.data[names[0]].compare(0, 4,
                                    "\x7f"
                                    "ELF") == 0);
}

TEST_CASE("store::BundleReader gives the same members, digest and byte count streamed and decoded in place") {
  TempDir dir;
  auto kernel = opcache::test::make_kernel(dir.path(), "square", 16);
  Encoded encoded = encode(reproducible_input(kernel));
  CollectingSink in_place;
  std::string in_place_digest;
  REQUIRE(decode_in_memory(encoded.bytes, in_place, {}, opcache::store::ReadFor::verification, &in_place_digest).ok());
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, SIZE_MAX}) {
    INFO("chunk " << chunk);
    CollectingSink streamed;
    std::string digest;
    std::uint64_t bytes_read = 0;
    REQUIRE(decode(encoded.bytes, streamed, {}, chunk, &digest, &bytes_read).ok());
    CHECK(streamed.data == in_place.data);
    CHECK(streamed.begun == in_place.begun);
    CHECK(streamed.ended == in_place.ended);
    CHECK(digest == in_place_digest);
    CHECK(bytes_read == encoded.bytes.size());
  }
  CHECK(in_place_digest == encoded.written.digest);
  CHECK(in_place.ended.size() == 3);
}

TEST_CASE("store::BundleReader for a local hit checks members' sizes, not their SHA-256 again") {
  // ReadFor::local_hit: the caller checks the object's digest before anything
  // is published, and every stored object was verified whole when stored.
  const std::string contents = "the member's real bytes";
  json manifest = manifest_for({{"k.o", contents}});
  manifest["members"][0]["sha256"] = opcache::base::sha256_hex("other bytes of some length");
  const std::string bundle = assemble(manifest, zstd_compress(contents));

  expect_corrupt(bundle, {"member \"k.o\" does not match its SHA-256"});
  for (const bool in_place : {false, true}) {
    INFO(std::string(in_place ? "decoded in place" : "streamed"));
    CollectingSink sink;
    sink.check_digests = false;  // the reader does not, and this member's is wrong
    Status status = in_place ? decode_in_memory(bundle, sink, {}, opcache::store::ReadFor::local_hit)
                             : [&] {
                                 ChunkedSource source(bundle, 5);
                                 BundleReader reader(source, {}, opcache::store::KeyCheck::trust_digest,
                                                     opcache::store::ReadFor::local_hit);
                                 auto read = reader.read_manifest();
                                 return read ? reader.read_members(sink) : Status(read.error());
                               }();
    REQUIRE_MESSAGE(status.ok(), (status.ok() ? "" : status.error().message()));
    CHECK(sink.data["k.o"] == contents);
    CHECK(sink.ended == std::vector<std::string>{"k.o"});
  }

  json short_member = manifest_for({{"k.o", contents + "!"}});
  CollectingSink sink;
  expect_error(decode_in_memory(assemble(short_member, zstd_compress(contents)), sink, {},
                                opcache::store::ReadFor::local_hit),
               ErrorCode::corrupt, {"payload ended before member \"k.o\" was complete"});
}

TEST_CASE("store::verify_bundle returns the manifest and the digest the writer reported") {
  TempDir dir;
  auto kernel = opcache::test::make_kernel(dir.path(), "relu", 32);
  Encoded encoded = encode(reproducible_input(kernel));
  opcache::base::MemorySource source(encoded.bytes);
  std::string digest;
  auto manifest = opcache::store::verify_bundle(source, {}, &digest);
  REQUIRE(manifest.ok());
  CHECK(manifest->key == encoded.written.manifest.key);
  CHECK(manifest->op_type() == "relu");
  CHECK(digest == encoded.written.digest);
}

TEST_CASE("store::Bundle writing is deterministic for the same input") {
  TempDir dir;
  auto kernel = opcache::test::make_kernel(dir.path(), "neg", 8);
  BundleInput input = reproducible_input(kernel);
  Encoded first = encode(input);
  Encoded second = encode(input);
  CHECK(first.bytes == second.bytes);
  CHECK(first.written.digest == second.written.digest);
}

TEST_CASE("store::Bundle round-trips zero-length members at the start, middle and end") {
  TempDir dir;
  auto files = write_files(dir, {{"empty_first.o", ""},
                                 {"kernel.o",
                                  "\x7f"
                                  "ELF payload"},
                                 {"empty_mid.json", ""},
                                 {"kernel.info", "{\"job_id\":1}"},
                                 {"empty_last.run", ""}});
  Encoded encoded = encode(reproducible_input(files));
  CollectingSink sink;
  std::string digest;
  Status status = decode(encoded.bytes, sink, {}, SIZE_MAX, &digest);
  REQUIRE_MESSAGE(status.ok(), (status.ok() ? "" : status.error().message()));
  std::vector<std::string> names = {"empty_first.o", "kernel.o", "empty_mid.json", "kernel.info", "empty_last.run"};
  CHECK(sink.begun == names);
  CHECK(sink.ended == names);
  CHECK(sink.data["empty_first.o"].empty());
  CHECK(sink.data["empty_mid.json"].empty());
  CHECK(sink.data["empty_last.run"].empty());
  CHECK(sink.data["kernel.o"] ==
        "\x7f"
        "ELF payload");
  CHECK(encoded.written.manifest.members[0].sha256 == opcache::base::sha256_hex(""));
  CHECK(encoded.written.manifest.members[4].role == "package");
  CHECK(digest == encoded.written.digest);
}

TEST_CASE("store::Bundle round-trips a bundle whose members are all empty") {
  TempDir dir;
  auto files = write_files(dir, {{"a.o", ""}, {"a.json", ""}});
  Encoded encoded = encode(reproducible_input(files));
  CHECK(encoded.written.manifest.total_size() == 0);
  CollectingSink sink;
  Status status = decode(encoded.bytes, sink);
  REQUIRE_MESSAGE(status.ok(), (status.ok() ? "" : status.error().message()));
  CHECK(sink.ended == std::vector<std::string>{"a.o", "a.json"});
  CHECK(sink.total_written == 0);
}

TEST_CASE("store::Bundle round-trips the maximum member count and members larger than zstd's buffers") {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> files;
  // One member spans several ZSTD_DStreamOutSize() buffers and is incompressible.
  files.emplace_back("big.o", pseudo_random_bytes(3 * ZSTD_DStreamOutSize() + 17, 7));
  for (int i = 1; i < 128; ++i) {
    files.emplace_back("m" + std::to_string(i) + (i % 3 == 0 ? ".json" : ".o"),
                       i % 10 == 0 ? std::string() : pseudo_random_bytes(static_cast<std::size_t>(i * 37 % 1000), i));
  }
  auto paths = write_files(dir, files);
  Encoded encoded = encode(reproducible_input(paths));
  REQUIRE(encoded.written.manifest.members.size() == 128);

  // Whole reads, one byte at a time, and an odd chunk size all decode the same.
  for (std::size_t chunk : {SIZE_MAX, std::size_t{1}, std::size_t{4093}}) {
    CAPTURE(chunk);
    CollectingSink sink;
    std::string digest;
    Status status = decode(encoded.bytes, sink, {}, chunk, &digest);
    REQUIRE_MESSAGE(status.ok(), (status.ok() ? "" : status.error().message()));
    REQUIRE(sink.ended.size() == 128);
    for (std::size_t i = 0; i < files.size(); ++i) {
      CHECK(sink.ended[i] == files[i].first);
      CHECK(sink.data[files[i].first] == files[i].second);
    }
    CHECK(digest == encoded.written.digest);
  }
}

TEST_CASE("store::Bundle writer keeps explicit roles and clamps a negative build time") {
  TempDir dir;
  auto files = write_files(dir, {{"kernel.o", "obj"}, {"notes.txt", "n"}});
  BundleInput input = reproducible_input(files);
  input.members[0].role = "other";
  input.build_ms = -5;
  Encoded encoded = encode(input);
  CHECK(encoded.written.manifest.members[0].role == "other");
  CHECK(encoded.written.manifest.members[1].role == "other");
  CHECK(encoded.written.manifest.build_ms == 0);
  // An empty `created` means now, in RFC 3339 UTC.
  input.created.clear();
  Encoded now = encode(input);
  CHECK(now.written.manifest.created.size() == 20);
  CHECK(now.written.manifest.created.back() == 'Z');
}

// ---------------------------------------------------------------- header

TEST_CASE("store::BundleReader rejects a bundle with a bad magic") {
  TempDir dir;
  auto files = write_files(dir, {{"k.o", "data"}});
  std::string bundle = encode(reproducible_input(files)).bytes;
  bundle[0] = 'X';
  expect_corrupt(bundle, {"bundle: ", "not an opcache bundle", "bad magic"});
  // A zstd frame or any other file is not a bundle either.
  expect_corrupt(zstd_compress("hello, this is not a bundle at all"), {"bad magic"});
}

TEST_CASE("store::BundleReader rejects an unsupported format version") {
  TempDir dir;
  auto files = write_files(dir, {{"k.o", "data"}});
  std::string bundle = encode(reproducible_input(files)).bytes;
  bundle[8] = 2;
  expect_corrupt(bundle, {"format version 2 is not supported", "reads version 1"});
  bundle[8] = 0;
  expect_corrupt(bundle, {"format version 0 is not supported"});
}

TEST_CASE("store::BundleReader rejects a manifest length of 0 or above the limit") {
  TempDir dir;
  auto files = write_files(dir, {{"k.o", "data"}});
  std::string bundle = encode(reproducible_input(files)).bytes;
  Parts parts = split(bundle);

  std::string zero = opcache::store::encode_bundle_header(0) + parts.manifest + parts.payload;
  expect_corrupt(zero, {"manifest length 0 is outside 1..4194304"});

  // 4 GiB - 1 is refused from the header alone (nothing of that size is allocated).
  std::string huge = opcache::store::encode_bundle_header(0xffffffffu) + parts.manifest + parts.payload;
  expect_corrupt(huge, {"manifest length 4294967295 is outside 1..4194304"});

  BundleLimits limits;
  limits.max_manifest_bytes = static_cast<std::uint32_t>(parts.manifest.size() - 1);
  expect_corrupt(bundle,
                 {"manifest length " + std::to_string(parts.manifest.size()) + " is outside 1.." +
                  std::to_string(parts.manifest.size() - 1)},
                 limits);
  limits.max_manifest_bytes = static_cast<std::uint32_t>(parts.manifest.size());
  CollectingSink sink;
  CHECK(decode(bundle, sink, limits).ok());
}

// ---------------------------------------------------------------- truncation

TEST_CASE("store::BundleReader rejects a bundle truncated at every stage") {
  TempDir dir;
  auto kernel = opcache::test::make_kernel(dir.path(), "square", 64);
  std::string bundle = encode(reproducible_input(kernel)).bytes;
  Parts parts = split(bundle);
  const std::size_t manifest_end = 16 + parts.manifest.size();
  REQUIRE(parts.payload.size() > 16);

  SUBCASE("empty input") {
    expect_corrupt("", {"truncated in the header (0 of 16 bytes)"});
  }
  SUBCASE("inside the header") {
    expect_corrupt(bundle.substr(0, 10), {"truncated in the header (10 of 16 bytes)"});
  }
  SUBCASE("after the header") {
    expect_corrupt(bundle.substr(0, 16),
                   {"truncated in the manifest (0 of " + std::to_string(parts.manifest.size()) + " bytes)"});
  }
  SUBCASE("inside the manifest") {
    expect_corrupt(bundle.substr(0, 16 + parts.manifest.size() / 2),
                   {"truncated in the manifest (" + std::to_string(parts.manifest.size() / 2) + " of " +
                    std::to_string(parts.manifest.size()) + " bytes)"});
  }
  SUBCASE("right after the manifest") {
    expect_corrupt(bundle.substr(0, manifest_end),
                   {"truncated in the payload (0 of 4 bytes)"});
  }
  SUBCASE("in the middle of the payload") {
    expect_corrupt(bundle.substr(0, manifest_end + parts.payload.size() / 2), {"truncated in the payload"});
  }
  SUBCASE("one byte before the end of the payload") {
    expect_corrupt(bundle.substr(0, bundle.size() - 1), {"truncated in the payload"});
  }
  SUBCASE("at every length, read one byte at a time") {
    for (std::size_t length = 0; length < bundle.size(); length += 7) {
      CAPTURE(length);
      CollectingSink sink;
      Status status = decode(bundle.substr(0, length), sink, {}, 1);
      REQUIRE_FALSE(status.ok());
      CHECK(status.error().message().find("truncated") != std::string::npos);
      // Never a complete, verified set of members from a truncated bundle.
      CHECK(sink.ended.size() < 3);
    }
  }
}

TEST_CASE("store::BundleReader rejects a frame that ends before the declared members do") {
  TempDir dir;
  auto files = write_files(dir, {{"k.o", "object bytes"}, {"k.json", "{}"}});
  Parts parts = split(encode(reproducible_input(files)).bytes);
  json manifest = json::parse(parts.manifest);
  // Member sizes and digests are not part of the key, so this manifest is
  // otherwise valid: it promises 5 more bytes of k.json than the frame holds.
  manifest["members"][1]["size"] = 7;
  CollectingSink sink;
  Status status = decode(assemble(manifest, parts.payload), sink);
  expect_error(status, ErrorCode::corrupt, {"payload ended before member \"k.json\" was complete"});
  CHECK(sink.ended == std::vector<std::string>{"k.o"});
}

// ---------------------------------------------------------------- tampering

TEST_CASE("store::BundleReader rejects a flipped bit in the manifest") {
  TempDir dir;
  auto files = write_files(dir, {{"k.o", "object bytes"}});
  std::string bundle = encode(reproducible_input(files)).bytes;
  Parts parts = split(bundle);

  SUBCASE("in the descriptor: the key no longer matches") {
    std::size_t at = parts.manifest.find("\"square\"");
    REQUIRE(at != std::string::npos);
    std::string tampered = bundle;
    tampered[16 + at + 1] ^= 0x01;  // "square" -> "rquare"
    expect_corrupt(tampered, {"bundle: ", "does not match its descriptor and scenario"});
  }
  SUBCASE("in the scenario: the key no longer matches") {
    std::size_t at = parts.manifest.find("\"train\"");
    REQUIRE(at != std::string::npos);
    std::string tampered = bundle;
    tampered.replace(16 + at, 7, "\"infer\"");
    expect_corrupt(tampered, {"does not match its descriptor and scenario"});
  }
  SUBCASE("in the key itself") {
    std::size_t at = parts.manifest.find("\"key\":\"");
    REQUIRE(at != std::string::npos);
    std::string tampered = bundle;
    char& c = tampered[16 + at + 7];
    c = c == '0' ? '1' : '0';
    expect_corrupt(tampered, {"manifest key", "does not match its descriptor and scenario"});
  }
  SUBCASE("in the JSON structure") {
    std::string tampered = bundle;
    tampered[16] ^= 0x01;  // '{' -> 'z'
    expect_corrupt(tampered, {"bundle: manifest", "invalid JSON"});
  }
  SUBCASE("in a member's sha256: caught when the member is decoded") {
    std::size_t at = parts.manifest.find("\"sha256\":\"");
    REQUIRE(at != std::string::npos);
    std::string tampered = bundle;
    char& c = tampered[16 + at + 10];
    c = c == '0' ? '1' : '0';
    CollectingSink sink;
    Status status = decode(tampered, sink);
    expect_error(status, ErrorCode::corrupt, {"member \"k.o\" does not match its SHA-256"});
    CHECK(sink.begun == std::vector<std::string>{"k.o"});
    CHECK(sink.ended.empty());
  }
}

TEST_CASE("store::BundleReader rejects a flipped bit in the compressed payload") {
  TempDir dir;
  auto kernel = opcache::test::make_kernel(dir.path(), "square", 16);
  std::string bundle = encode(reproducible_input(kernel)).bytes;
  Parts parts = split(bundle);
  const std::size_t payload_start = 16 + parts.manifest.size();

  SUBCASE("in the zstd frame header") {
    std::string tampered = bundle;
    tampered[payload_start] ^= 0x01;  // the first byte of the zstd magic number
    expect_corrupt(tampered, {"bundle: ", "payload is not a zstd frame"});
  }
  SUBCASE("anywhere: altered data never reaches the sink as a complete member") {
    // A flip is caught by zstd, by the declared sizes or by a member's SHA-256.
    // A few flips land in slack bits of zstd's entropy tables and decode to the
    // very same bytes; those bundles are accepted, with the original members.
    std::size_t rejected = 0;
    std::size_t identical = 0;
    for (std::size_t at = payload_start; at < bundle.size(); ++at) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string tampered = bundle;
        tampered[at] ^= static_cast<char>(1 << bit);
        CollectingSink sink;
        Status status = decode(tampered, sink);
        CAPTURE(at - payload_start);
        CAPTURE(bit);
        if (status.ok()) {
          ++identical;
          REQUIRE(sink.ended.size() == 3);
        } else {
          ++rejected;
          CHECK(status.error().message().rfind("bundle: ", 0) == 0);
        }
        for (const auto& name : sink.ended) {
          CHECK(sink.data[name] == opcache::test::read_text(dir / name));
        }
      }
    }
    CHECK(rejected + identical == 8 * parts.payload.size());
    CHECK(rejected > 20 * identical);
  }
}

TEST_CASE("store::BundleReader rejects a member whose data was altered and never ends it in the sink") {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> files = {{"k.o",
                                                             "\x7f"
                                                             "ELF object"},
                                                            {"k.json", "{\"blockDim\":1}"},
                                                            {"k.info", "{\"job_id\":1}"}};
  auto paths = write_files(dir, files);
  Parts parts = split(encode(reproducible_input(paths)).bytes);

  // Re-encode the payload with one bit of k.json flipped; the manifest is untouched.
  std::string plain = zstd_decompress(parts.payload);
  REQUIRE(plain == files[0].second + files[1].second + files[2].second);
  plain[files[0].second.size() + 3] ^= 0x04;
  std::string tampered = assemble(parts.manifest, zstd_compress(plain));

  CollectingSink sink;
  Status status = decode(tampered, sink);
  expect_error(status, ErrorCode::corrupt, {"bundle: ", "member \"k.json\" does not match its SHA-256", "altered"});
  CHECK(sink.begun == std::vector<std::string>{"k.o", "k.json"});
  CHECK(sink.ended == std::vector<std::string>{"k.o"});
  CHECK(sink.data["k.o"] == files[0].second);

  // The same with the last member, so a failure at the very end is caught too.
  plain = zstd_decompress(parts.payload);
  plain.back() ^= 0x01;
  CollectingSink last_sink;
  Status last = decode(assemble(parts.manifest, zstd_compress(plain)), last_sink);
  expect_error(last, ErrorCode::corrupt, {"member \"k.info\" does not match its SHA-256"});
  CHECK(last_sink.ended == std::vector<std::string>{"k.o", "k.json"});
}

TEST_CASE("store::BundleReader rejects members swapped in the payload") {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> files = {{"a.o", "AAAA"}, {"b.o", "BBBB"}};
  Parts parts = split(encode(reproducible_input(write_files(dir, files))).bytes);
  std::string tampered = assemble(parts.manifest, zstd_compress("BBBBAAAA"));
  CollectingSink sink;
  expect_error(decode(tampered, sink), ErrorCode::corrupt, {"member \"a.o\" does not match its SHA-256"});
  CHECK(sink.ended.empty());
}

// ---------------------------------------------------------------- framing

TEST_CASE("store::BundleReader rejects trailing bytes after the compressed frame") {
  TempDir dir;
  auto files = write_files(dir, {{"k.o", "object bytes"}});
  std::string bundle = encode(reproducible_input(files)).bytes;

  SUBCASE("garbage in the same read") {
    expect_corrupt(bundle + "x", {"unexpected bytes after the compressed payload"});
  }
  SUBCASE("garbage in a later read") {
    CollectingSink sink;
    // One byte per read: the frame ends exactly at a read boundary.
    Status status = decode(bundle + "junk", sink, {}, 1);
    expect_error(status, ErrorCode::corrupt, {"unexpected bytes after the compressed payload"});
  }
  SUBCASE("a second zstd frame") {
    expect_corrupt(bundle + zstd_compress(""), {"unexpected bytes after the compressed payload"});
  }
  SUBCASE("a second copy of the whole bundle") {
    expect_corrupt(bundle + bundle, {"unexpected bytes after the compressed payload"});
  }
}

TEST_CASE("store::BundleReader rejects a payload with more bytes than the manifest declares") {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> files = {{"k.o", "object bytes"}};
  Parts parts = split(encode(reproducible_input(write_files(dir, files))).bytes);
  std::string tampered = assemble(parts.manifest, zstd_compress(files[0].second + "more"));
  CollectingSink sink;
  expect_error(decode(tampered, sink), ErrorCode::corrupt, {"payload holds more bytes than the manifest declares"});
  CHECK(sink.total_written == files[0].second.size());
}

TEST_CASE("store::BundleReader stops a zstd decompression bomb built with the zstd API") {
  // The manifest declares one 1000-byte member; the frame (a few KiB, no
  // content size) inflates to 64 MiB of zeros.
  const std::string declared(1000, '\0');
  const std::size_t inflated = 64u << 20;
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(), &ZSTD_freeCCtx);
  REQUIRE(cctx);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 0);
  const std::string zeros(1u << 20, '\0');
  std::string frame;
  std::string out_buffer(ZSTD_CStreamOutSize(), '\0');
  for (std::size_t fed = 0; fed < inflated; fed += zeros.size()) {
    bool last = fed + zeros.size() == inflated;
    ZSTD_inBuffer input{zeros.data(), zeros.size(), 0};
    for (;;) {
      ZSTD_outBuffer output{out_buffer.data(), out_buffer.size(), 0};
      std::size_t remaining = ZSTD_compressStream2(cctx.get(), &output, &input, last ? ZSTD_e_end : ZSTD_e_continue);
      REQUIRE_FALSE(ZSTD_isError(remaining));
      frame.append(out_buffer.data(), output.pos);
      if (last ? remaining == 0 : input.pos == input.size) {
        break;
      }
    }
  }
  REQUIRE(frame.size() < inflated / 1000);
  REQUIRE(ZSTD_getFrameContentSize(frame.data(), frame.size()) == ZSTD_CONTENTSIZE_UNKNOWN);

  std::string bundle = assemble(manifest_for({{"bomb.o", declared}}), frame);
  long rss_before = peak_rss_kib();
  CollectingSink sink;
  Status status = decode(bundle, sink);
  long rss_after = peak_rss_kib();
  expect_error(status, ErrorCode::corrupt, {"bundle: ", "payload holds more bytes than the manifest declares"});
  CHECK(sink.total_written == declared.size());
  REQUIRE(rss_before > 0);
  // Far below the 64 MiB the frame expands to: the reader streams, it never inflates the whole.
  CHECK(rss_after - rss_before < 16 * 1024);
}

TEST_CASE("store::BundleReader stops reading a hand-made 64 GiB RLE bomb early") {
  // 2^19 RLE blocks of 128 KiB each: 2 MiB of input, 64 GiB of output.
  const std::size_t blocks = 1u << 19;
  std::string frame = rle_frame(17, 128u << 10, blocks, 'A');
  REQUIRE(ZSTD_findFrameCompressedSize(frame.data(), frame.size()) == frame.size());
  const std::string declared(16, 'A');
  std::string bundle = assemble(manifest_for({{"bomb.o", declared}}), frame);

  CollectingSink sink;
  std::uint64_t bytes_read = 0;
  Status status = decode(bundle, sink, {}, SIZE_MAX, nullptr, &bytes_read);
  expect_error(status, ErrorCode::corrupt, {"payload holds more bytes than the manifest declares"});
  // The declared member matched and was ended; nothing beyond it was passed on.
  CHECK(sink.ended == std::vector<std::string>{"bomb.o"});
  CHECK(sink.total_written == declared.size());
  // It stopped after the first input buffer instead of decoding 64 GiB.
  CHECK(bytes_read < bundle.size() / 4);
}

TEST_CASE("store::BundleReader refuses a frame that asks for a huge decoding window") {
  // windowLog 31 would make the decoder allocate 2 GiB.
  std::string frame = rle_frame(31, 16, 1, 'A');
  std::string bundle = assemble(manifest_for({{"w.o", std::string(16, 'A')}}), frame);
  expect_corrupt(bundle, {"bundle: ", "payload does not decompress"});
}

TEST_CASE("store::BundleReader rejects a skippable frame in place of the member frame") {
  // A zstd skippable frame (magic 0x184D2A50, u32 length, opaque bytes)
  // decodes to nothing. Even when every member is empty the payload must be
  // the one frame holding the members, not unverified opaque bytes.
  std::string skippable = "\x50\x2A\x4D\x18";
  const std::string hidden = "#!/bin/sh\nrm -rf ~\n";
  skippable.push_back(static_cast<char>(hidden.size()));
  skippable.append("\0\0\0", 3);
  skippable += hidden;
  SUBCASE("alone, with only empty members") {
    std::string bundle = assemble(manifest_for({{"empty.o", ""}}), skippable);
    CollectingSink sink;
    expect_error(decode(bundle, sink), ErrorCode::corrupt, {"bundle: "});
  }
  SUBCASE("before the real frame") {
    std::string bundle = assemble(manifest_for({{"k.o", "data"}}), skippable + zstd_compress("data"));
    for (std::size_t chunk : {SIZE_MAX, std::size_t{1}}) {
      CAPTURE(chunk);
      CollectingSink sink;
      expect_error(decode(bundle, sink, {}, chunk), ErrorCode::corrupt, {"bundle: "});
      CHECK(sink.ended.empty());
    }
  }
}

TEST_CASE("store::BundleReader rejects a payload that is not zstd") {
  std::string bundle = assemble(manifest_for({{"k.o", "abcd"}}), "this is plain text, not a zstd frame");
  expect_corrupt(bundle, {"payload is not a zstd frame"});
}

// ---------------------------------------------------------------- limits

TEST_CASE("store::BundleReader enforces member count, member size and total size limits") {
  TempDir dir;
  auto files = write_files(
      dir, {{"a.o", std::string(100, 'a')}, {"b.o", std::string(100, 'b')}, {"c.o", std::string(100, 'c')}});
  std::string bundle = encode(reproducible_input(files)).bytes;

  SUBCASE("too many members") {
    BundleLimits limits;
    limits.max_members = 2;
    expect_corrupt(bundle, {"manifest lists 3 members, above the limit of 2"}, limits);
  }
  SUBCASE("a member too large") {
    BundleLimits limits;
    limits.max_member_bytes = 99;
    expect_corrupt(bundle, {"manifest member 0", "\"a.o\"", "declares 100 bytes, above the limit of 99"}, limits);
  }
  SUBCASE("members too large in total") {
    BundleLimits limits;
    limits.max_total_bytes = 299;
    expect_corrupt(bundle, {"manifest members add up to more than the limit of 299 bytes"}, limits);
  }
  SUBCASE("exactly at every limit is fine") {
    BundleLimits limits;
    limits.max_members = 3;
    limits.max_member_bytes = 100;
    limits.max_total_bytes = 300;
    CollectingSink sink;
    CHECK(decode(bundle, sink, limits).ok());
  }
}

TEST_CASE("store::write_bundle enforces member count, member size, total size and manifest size limits") {
  TempDir dir;
  auto files = write_files(
      dir, {{"a.o", std::string(100, 'a')}, {"b.o", std::string(100, 'b')}, {"c.o", std::string(100, 'c')}});
  BundleInput input = reproducible_input(files);
  BundleWriteOptions options;
  opcache::base::StringSink out;

  SUBCASE("too many members") {
    options.limits.max_members = 2;
    expect_error(write_bundle(input, out, options), ErrorCode::usage, {"at most 2 members, not 3"});
  }
  SUBCASE("a member too large") {
    options.limits.max_member_bytes = 99;
    expect_error(write_bundle(input, out, options), ErrorCode::usage,
                 {(dir / "a.o").string(), "larger than the member limit of 99 bytes"});
  }
  SUBCASE("members too large in total") {
    options.limits.max_total_bytes = 299;
    expect_error(write_bundle(input, out, options), ErrorCode::usage, {"more than the bundle limit of 299 bytes"});
  }
  SUBCASE("a manifest too large") {
    options.limits.max_manifest_bytes = 64;
    expect_error(write_bundle(input, out, options), ErrorCode::usage, {"manifest would be", "above the limit of 64"});
  }
  SUBCASE("no members") {
    input.members.clear();
    expect_error(write_bundle(input, out, options), ErrorCode::usage, {"at least one member"});
  }
  CHECK(out.data().empty());
}

// ---------------------------------------------------------------- writer input

TEST_CASE("store::write_bundle rejects unsafe member names before writing anything") {
  TempDir dir;
  auto files = write_files(dir, {{"k.o", "object"}});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"../x", "contain \"..\""},
      {"a/b", "no '/' or '\\'"},
      {"a\\b", "no '/' or '\\'"},
      {"..", "contain \"..\""},
      {".", "must not be \".\""},
      {"", "1 to 255 bytes"},
      {std::string("a\nb.o"), "control character"},
      {std::string("a\x01.o"), "control character"},
      {std::string("a\x7f.o"), "control character"},
      {std::string(256, 'n'), "1 to 255 bytes"},
      {std::string("\xff\xfe.o"), "not valid UTF-8"},
  };
  for (const auto& [name, needle] : cases) {
    CAPTURE(name);
    BundleInput input = reproducible_input(files);
    input.members[0].name = name;
    opcache::base::StringSink out;
    expect_error(write_bundle(input, out), ErrorCode::usage, {"member name", needle});
    CHECK(out.data().empty());
  }
  // 255 bytes is the longest accepted name.
  BundleInput input = reproducible_input(files);
  input.members[0].name = std::string(253, 'n') + ".o";
  opcache::base::StringSink out;
  CHECK(write_bundle(input, out).ok());
}

TEST_CASE("store::write_bundle rejects duplicate member names") {
  TempDir dir;
  auto files = write_files(dir, {{"k.o", "one"}, {"other.o", "two"}});
  BundleInput input = reproducible_input(files);
  input.members[1].name = "k.o";
  opcache::base::StringSink out;
  expect_error(write_bundle(input, out), ErrorCode::usage, {"two member files share the name \"k.o\""});
  CHECK(out.data().empty());
}

TEST_CASE("store::write_bundle rejects missing files, directories and invalid descriptors") {
  TempDir dir;
  auto files = write_files(dir, {{"k.o", "one"}});
  opcache::base::StringSink out;

  BundleInput missing = reproducible_input(files);
  missing.members.push_back({"gone.o", dir / "gone.o", ""});
  auto result = write_bundle(missing, out);
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code() == ErrorCode::not_found);
  CHECK(result.error().message().find("gone.o") != std::string::npos);

  BundleInput directory = reproducible_input(files);
  fs::create_directory(dir / "sub");
  directory.members.push_back({"sub", dir / "sub", ""});
  expect_error(write_bundle(directory, out), ErrorCode::usage, {"sub", "not a regular file"});

  // A descriptor with invalid UTF-8 cannot be hashed.
  BundleInput bad_descriptor = reproducible_input(files);
  bad_descriptor.descriptor["attrs"] = std::string("\xc3\x28");
  auto bad = write_bundle(bad_descriptor, out);
  CHECK_FALSE(bad.ok());
  CHECK(out.data().empty());
}

namespace {

// Runs `change` on the first write to the output, i.e. after the writer hashed
// the members (pass 1) and before it compresses them (pass 2).
class ChangingSink final : public opcache::base::ByteSink {
 public:
  explicit ChangingSink(std::function<void()> change) : m_change(std::move(change)) {}
  Status write(const void* data, std::size_t size) override {
    if (m_change) {
      std::exchange(m_change, nullptr)();
    }
    m_data.append(static_cast<const char*>(data), size);
    return {};
  }

 private:
  std::function<void()> m_change;
  std::string m_data;
};

void overwrite_in_place(const fs::path& path, std::size_t offset, char byte) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(file);
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(byte);
  REQUIRE(file);
}

}  // namespace

TEST_CASE("store::write_bundle fails with io when a member file changes between the hash and compress passes") {
  TempDir dir;
  auto files = write_files(dir, {{"k.o", std::string(5000, 'o')}, {"k.json", "{\"blockDim\":1}"}});
  BundleInput input = reproducible_input(files);

  SUBCASE("same size, one byte changed") {
    ChangingSink out([&] { overwrite_in_place(files[1], 2, 'X'); });
    expect_error(write_bundle(input, out), ErrorCode::io, {files[1].string(), "changed while it was being stored"});
  }
  SUBCASE("grown") {
    ChangingSink out([&] { std::ofstream(files[0], std::ios::app | std::ios::binary) << "more"; });
    expect_error(write_bundle(input, out), ErrorCode::io, {files[0].string(), "changed while it was being stored"});
  }
  SUBCASE("shrunk") {
    ChangingSink out([&] { fs::resize_file(files[0], 10); });
    expect_error(write_bundle(input, out), ErrorCode::io, {files[0].string(), "changed while it was being stored"});
  }
}

// ---------------------------------------------------------------- sinks and sources

namespace {

class RefusingSink final : public MemberSink {
 public:
  Status begin(const MemberEntry& member) override {
    if (member.name == "b.o") {
      return opcache::Error::io("disk full while creating b.o");
    }
    return {};
  }
  Status write(const char*, std::size_t) override { return {}; }
  Status end(const MemberEntry&) override { return {}; }
};

}  // namespace

TEST_CASE("store::BundleReader passes sink and source errors through unchanged") {
  TempDir dir;
  auto files = write_files(dir, {{"a.o", "aaaa"}, {"b.o", "bbbb"}});
  std::string bundle = encode(reproducible_input(files)).bytes;

  SUBCASE("sink") {
    opcache::base::MemorySource source(bundle);
    BundleReader reader(source);
    REQUIRE(reader.read_manifest().ok());
    RefusingSink sink;
    expect_error(reader.read_members(sink), ErrorCode::io, {"disk full while creating b.o"});
  }
  SUBCASE("source in the header") {
    FailingSource source(bundle, 4);
    BundleReader reader(source);
    expect_error(reader.read_manifest(), ErrorCode::io, {"read failed"});
  }
  SUBCASE("source in the payload") {
    FailingSource source(bundle, bundle.size() - 2);
    BundleReader reader(source);
    REQUIRE(reader.read_manifest().ok());
    CollectingSink sink;
    expect_error(reader.read_members(sink), ErrorCode::io, {"read failed"});
  }
}

TEST_CASE("store::BundleReader refuses read_members before read_manifest") {
  TempDir dir;
  auto files = write_files(dir, {{"a.o", "aaaa"}});
  std::string bundle = encode(reproducible_input(files)).bytes;
  opcache::base::MemorySource source(bundle);
  BundleReader reader(source);
  CollectingSink sink;
  expect_error(reader.read_members(sink), ErrorCode::internal, {"before read_manifest"});
  CHECK(sink.begun.empty());
}

// ------------------------------------------------- hostile member names

TEST_CASE("store::BundleReader refuses a crafted bundle whose member names leave the output directory, writing "
          "nothing") {
  for (const std::string name : {"../escape.o", "/tmp/absolute.o", "..", ".", "sub/dir.o", "a\\..\\b.o"}) {
    CAPTURE(name);
    TempDir temp;
    const auto out = temp / "out" / "inner";
    fs::create_directories(out);
    const std::string contents = "planted";
    // The manifest builder does not check names: this is what a hostile remote could send.
    auto manifest = manifest_for({{name, contents}});
    const auto bundle = assemble(manifest, zstd_compress(contents));
    opcache::store::DirectorySink sink(out);
    auto status = decode(bundle, sink);
    REQUIRE_FALSE(status.ok());
    CHECK(fs::is_empty(out));
    CHECK_FALSE(fs::exists(temp / "out" / "escape.o"));
    CHECK_FALSE(fs::exists("/tmp/absolute.o"));
  }
}
