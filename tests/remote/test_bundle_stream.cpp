// The bundle stream of POST /v1/entries/fetch (remote/bundle_stream): what
// the server encodes the client reads back, in pieces of every size; a
// malformed stream is refused with a precise error; and the client's sink
// (remote/batch_stream_sink) answers each key once, keeps `later` keys
// pending and drops a bundle cut short.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "base/ed25519.hpp"
#include "remote/batch_stream_sink.hpp"
#include "remote/bundle_stream.hpp"
#include "store/signature.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache;
using namespace opcache::remote;
using opcache::test::TempDir;

namespace {

const std::string k_key_a(64, 'a');
const std::string k_key_b(64, 'b');
const std::string k_key_c(64, 'c');
const std::string k_key_d(64, 'd');

// Records every call, as text.
struct RecordingSink final : BundleStreamReader::Sink {
  std::vector<std::string> events;
  std::map<std::string, std::string> bundles;
  std::string current;
  std::string current_bytes;

  Status frame(const StreamFrame& frame) override {
    events.push_back(std::string(frame_status_name(frame.status)) + " " + frame.key.substr(0, 1));
    current = frame.key;
    current_bytes.clear();
    return {};
  }
  Status bundle_bytes(const char* data, std::size_t size) override {
    current_bytes.append(data, size);
    return {};
  }
  Status bundle_end() override {
    bundles[current] = current_bytes;
    return {};
  }
};

StreamFrame hit(const std::string& key, const std::string& bytes, store::Signatures signatures = {}) {
  StreamFrame frame = StreamFrame::about(StreamFrame::Status::hit, key);
  frame.bytes = static_cast<std::int64_t>(bytes.size());
  frame.digest = std::string(64, '0');
  frame.signatures = std::move(signatures);
  return frame;
}

StreamFrame simple(StreamFrame::Status status, const std::string& key) { return StreamFrame::about(status, key); }

StreamFrame end_frame(std::int64_t entries) {
  StreamFrame frame = StreamFrame::about(StreamFrame::Status::end);
  frame.entries = entries;
  return frame;
}

// magic, a hit of "bundle-a", a miss, a revoked key, an empty hit, a later key, the end.
std::string sample_stream() {
  std::string stream(k_bundle_stream_magic);
  stream += encode_frame(hit(k_key_a, "bundle-a")) + "bundle-a";
  stream += encode_frame(simple(StreamFrame::Status::miss, k_key_b));
  StreamFrame revoked = simple(StreamFrame::Status::revoked, k_key_c);
  revoked.reason = "miscompiled";
  stream += encode_frame(revoked);
  stream += encode_frame(hit(k_key_d, ""));
  stream += encode_frame(simple(StreamFrame::Status::later, std::string(64, 'e')));
  stream += encode_frame(end_frame(5));
  return stream;
}

// The error of feeding `stream` whole, or "" when it was accepted.
std::string feed_error(const std::string& stream) {
  RecordingSink sink;
  BundleStreamReader reader(sink);
  auto fed = reader.feed(stream.data(), stream.size());
  return fed ? std::string() : fed.error().message();
}

// A receiver that keeps what it is given, in files under `dir`.
struct KeepingReceiver final : BatchReceiver {
  explicit KeepingReceiver(const std::filesystem::path& dir) : dir(dir) {}
  std::filesystem::path dir;
  std::map<std::string, std::string> received_bytes;
  std::map<std::string, store::Signatures> received_signatures;
  std::vector<std::string> absent_keys;

  Result<base::AtomicFile> create_file() override { return base::AtomicFile::create(dir); }
  void received(const std::string& key, base::AtomicFile file, store::Signatures signatures) override {
    REQUIRE(file.finish_writing(base::Durability::deferred).ok());
    received_bytes[key] = test::read_text(file.temp_path());
    received_signatures[key] = std::move(signatures);
  }
  void absent(const std::string& key, Fetched why) override {
    absent_keys.push_back(key.substr(0, 1) + (why == Fetched::revoked ? " revoked" : " miss"));
  }
};

}  // namespace

TEST_CASE("remote::bundle stream: the reader gives back what encode_frame wrote, in pieces of any size") {
  const std::string stream = sample_stream();
  for (std::size_t piece : {std::size_t(1), std::size_t(3), std::size_t(7), std::size_t(64), stream.size()}) {
    RecordingSink sink;
    BundleStreamReader reader(sink);
    for (std::size_t at = 0; at < stream.size(); at += piece) {
      REQUIRE(reader.feed(stream.data() + at, std::min(piece, stream.size() - at)).ok());
      CHECK(reader.complete() == (at + piece >= stream.size()));
    }
    CHECK(sink.events ==
          std::vector<std::string>{"hit a", "miss b", "revoked c", "hit d", "later e", "end "});
    CHECK(sink.bundles == std::map<std::string, std::string>{{k_key_a, "bundle-a"}, {k_key_d, ""}});
  }
}

TEST_CASE("remote::bundle stream: signatures travel in the frame header and read back equal") {
  auto signer = base::Ed25519PrivateKey::generate();
  REQUIRE(signer.ok());
  auto signature = store::sign_entry(*signer, k_key_a, std::string(64, '0'));
  REQUIRE(signature.ok());
  std::string stream(k_bundle_stream_magic);
  stream += encode_frame(hit(k_key_a, "xyz", {*signature})) + "xyz" + encode_frame(end_frame(1));
  struct SignatureSink final : BundleStreamReader::Sink {
    store::Signatures seen;
    Status frame(const StreamFrame& frame) override {
      if (frame.status == StreamFrame::Status::hit) {
        seen = frame.signatures;
      }
      return {};
    }
    Status bundle_bytes(const char*, std::size_t) override { return {}; }
    Status bundle_end() override { return {}; }
  } sink;
  BundleStreamReader reader(sink);
  REQUIRE(reader.feed(stream.data(), stream.size()).ok());
  REQUIRE(sink.seen.size() == 1);
  CHECK(store::format_signature(sink.seen[0]) == store::format_signature(*signature));
}

TEST_CASE("remote::bundle stream: a malformed stream is a remote error that says what is wrong") {
  const std::string magic(k_bundle_stream_magic);
  CHECK(feed_error("{\"present\":[]}").find("does not start with OPCSTRM1") != std::string::npos);
  CHECK(feed_error(magic + std::string("\0\0\0\1", 4) + "x").find("a frame header of 1 bytes") != std::string::npos);
  CHECK(feed_error(magic + std::string("\0\2\0\0", 4)).find("a frame header of 131072 bytes") != std::string::npos);
  CHECK(feed_error(magic + std::string("\0\0\0\2", 4) + "[]").find("not a JSON object") != std::string::npos);
  const std::string bad_status = R"({"status":"maybe","key":")" + k_key_a + "\"}";
  CHECK(feed_error(magic + std::string("\0\0\0", 3) + static_cast<char>(bad_status.size()) + bad_status)
            .find("\"status\" is not one of") != std::string::npos);
  const std::string bad_key = R"({"status":"miss","key":"ABC"})";
  CHECK(feed_error(magic + std::string("\0\0\0", 3) + static_cast<char>(bad_key.size()) + bad_key)
            .find("\"key\" is not a cache key") != std::string::npos);
  const std::string no_bytes = R"({"status":"hit","key":")" + k_key_a + "\"}";
  CHECK(feed_error(magic + std::string("\0\0\0", 3) + static_cast<char>(no_bytes.size()) + no_bytes)
            .find("\"bytes\" is not an integer") != std::string::npos);
  CHECK(feed_error(sample_stream() + "x").find("1 bytes after the end frame") != std::string::npos);
  auto fed = [] {
    RecordingSink sink;
    BundleStreamReader reader(sink);
    const std::string stream = sample_stream();
    return reader.feed(stream.data(), stream.size() - 1).ok() && !reader.complete();
  }();
  CHECK(fed);  // cut short: accepted so far, and not complete
}

TEST_CASE("remote::batch stream sink: hands over each key once, keeps later keys pending, drops a bundle cut "
          "short") {
  TempDir temp;
  KeepingReceiver receiver(temp.path());
  const std::vector<std::string> asked = {k_key_a, k_key_b, k_key_c, k_key_d, std::string(64, 'e')};
  BatchStreamSink sink(asked, receiver);
  BundleStreamReader reader(sink);
  std::string stream = sample_stream();
  // A frame of a key nobody asked for is skipped, bytes and all.
  stream.insert(k_bundle_stream_magic.size(), encode_frame(hit(std::string(64, 'f'), "unasked")) + "unasked");
  REQUIRE(reader.feed(stream.data(), stream.size()).ok());
  CHECK(receiver.received_bytes == std::map<std::string, std::string>{{k_key_a, "bundle-a"}, {k_key_d, ""}});
  CHECK(receiver.absent_keys == std::vector<std::string>{"b miss", "c revoked"});
  CHECK(sink.pending() == std::vector<std::string>{std::string(64, 'e')});
  CHECK(sink.answered() == 4);

  // The same response again (a retried request): nothing is handed over twice.
  reader.reset();
  REQUIRE(reader.feed(stream.data(), stream.size()).ok());
  CHECK(receiver.received_bytes.size() == 2);
  CHECK(receiver.absent_keys.size() == 2);

  // The next response answers the later key, but is cut inside its bundle.
  std::string next(k_bundle_stream_magic);
  next += encode_frame(hit(std::string(64, 'e'), "0123456789")) + "01234";
  BundleStreamReader second(sink);
  REQUIRE(second.feed(next.data(), next.size()).ok());
  CHECK(test::count_files(temp.path()) == 1);  // the half-received bundle's temp file
  sink.abandon_bundle();
  CHECK(test::count_files(temp.path()) == 0);  // discarded
  CHECK(receiver.received_bytes.count(std::string(64, 'e')) == 0);
  CHECK(sink.pending() == std::vector<std::string>{std::string(64, 'e')});
}
