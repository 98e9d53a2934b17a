// The S3 client (remote/s3/client.cpp): retry/timeout behaviour against a scripted
// HTTP server, and real round trips against moto_server (skipped, not passed,
// when moto is not installed). Each moto case uses its own bucket, so the
// cases may share one server when the binary runs them in one process.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "remote/s3/client.hpp"
#include "base/file_io.hpp"
#include "tests/support/fault_server.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::ErrorCode;
using opcache::remote::parse_s3_url;
using opcache::remote::S3Client;
using opcache::remote::S3Credentials;
using opcache::remote::S3Location;
using opcache::remote::S3Options;
using opcache::test::MotoServer;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::write_text;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string random_bytes(std::size_t size, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::string out(size, '\0');
  for (auto& c : out) {
    c = static_cast<char>(random() & 0xFF);
  }
  return out;
}

std::string md5_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_md5(), nullptr);
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += k_hex[digest[i] >> 4];
    out += k_hex[digest[i] & 0xF];
  }
  return out;
}

// Downloads `name` into a new file and returns its contents (nullopt on a miss).
std::optional<std::string> get_bytes(S3Client& client, const fs::path& file, const std::string& name,
                                     std::int64_t max_bytes = 1 << 30) {
  opcache::base::FileDescriptor fd(::open(file.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600));
  REQUIRE(fd.valid());
  auto found = client.get_to_fd(name, fd.get(), max_bytes);
  REQUIRE_MESSAGE(found.ok(), found.error().message());
  if (!*found) {
    return std::nullopt;
  }
  return read_text(file);
}

S3Credentials any_credentials() { return {"AKIDTESTTEST", "secret/with+chars", "", "test credentials"}; }

// A client for `bucket`/`prefix` on the shared moto server, built through parse_s3_url.
S3Client moto_client(const std::string& bucket, const std::string& prefix, S3Options options = {}) {
  const std::string url = "s3://" + bucket + "/" + prefix + "?endpoint=" + MotoServer::shared().endpoint();
  auto location = parse_s3_url(url);
  REQUIRE_MESSAGE(location.ok(), location.error().message());
  return S3Client(*location, any_credentials(), options);
}

// A loopback HTTP server that answers each connection with the next scripted
// raw response and closes it ("" = accept, read, then never answer). Records
// each request line. For GET/HEAD only: request bodies are not read.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> replies) : m_replies(std::move(replies)) {
    m_listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(m_listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(m_listener, 16) == 0);
    ::getsockname(m_listener, reinterpret_cast<sockaddr*>(&address), &length);
    m_endpoint = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
    m_thread = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    m_stop = true;
    m_thread.join();
    ::close(m_listener);
  }

  const std::string& endpoint() const { return m_endpoint; }
  /// The request line of each request received so far.
  std::vector<std::string> requests() {
    std::lock_guard lock(m_mutex);
    std::vector<std::string> lines;
    for (const auto& head : m_requests) {
      lines.push_back(head.substr(0, head.find("\r\n")));
    }
    return lines;
  }
  /// The request line and headers of each request received so far.
  std::vector<std::string> request_heads() {
    std::lock_guard lock(m_mutex);
    return m_requests;
  }

 private:
  bool wait_readable(int fd) {
    while (!m_stop) {
      pollfd poll_fd{fd, POLLIN, 0};
      if (::poll(&poll_fd, 1, 50) > 0) {
        return true;
      }
    }
    return false;
  }

  void serve() {
    std::size_t next = 0;
    while (wait_readable(m_listener)) {
      const int connection = ::accept(m_listener, nullptr, nullptr);
      if (connection < 0) {
        continue;
      }
      std::string request;
      char buffer[4096];
      while (request.find("\r\n\r\n") == std::string::npos && wait_readable(connection)) {
        const ssize_t got = ::read(connection, buffer, sizeof buffer);
        if (got <= 0) {
          break;
        }
        request.append(buffer, static_cast<std::size_t>(got));
      }
      {
        std::lock_guard lock(m_mutex);
        m_requests.push_back(request.substr(0, request.find("\r\n\r\n")));
      }
      const std::string reply = next < m_replies.size() ? m_replies[next++] : "HTTP/1.1 500 No Script\r\n\r\n";
      if (reply.empty()) {
        wait_readable(connection);  // until the client gives up or the server stops
      } else {
        (void)!::write(connection, reply.data(), reply.size());
      }
      ::close(connection);
    }
  }

  std::vector<std::string> m_replies;
  int m_listener = -1;
  std::string m_endpoint;
  std::atomic<bool> m_stop{false};
  std::mutex m_mutex;
  std::vector<std::string> m_requests;
  std::thread m_thread;
};

std::string reply(const std::string& status_line, const std::string& body, const std::string& extra_headers = "") {
  return "HTTP/1.1 " + status_line + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n" + extra_headers + "\r\n" + body;
}

S3Client scripted_client(const ScriptedServer& server, S3Options options,
                         opcache::remote::RetryTiming timing = opcache::remote::RetryTiming::system()) {
  S3Location location{server.endpoint(), "bucket", "pre", "us-east-1", true};
  return S3Client(location, any_credentials(), options, std::move(timing));
}

}  // namespace

// ---------------------------------------------------------------------------
// Transport behaviour against a scripted server: retries, limits, timeouts.

TEST_CASE("remote::S3Client retries 503 and 429 (honouring Retry-After) and then succeeds") {
  TempDir temp;
  ScriptedServer server({reply("503 Slow Down", "<Error><Code>SlowDown</Code></Error>"),
                         reply("429 Too Many Requests", "", "Retry-After: 1\r\n"), reply("200 OK", "hello")});
  std::vector<std::chrono::milliseconds> pauses;  // the retries' waits, recorded instead of slept
  S3Client client = scripted_client(server, {500, 5000, 2},
                                    {[&pauses](std::chrono::milliseconds delay) { pauses.push_back(delay); },
                                     [] { return 0.0; }});
  auto body = get_bytes(client, temp / "out", "some key");
  CHECK(body == std::optional<std::string>("hello"));
  const auto requests = server.requests();
  REQUIRE(requests.size() == 3);
  CHECK(requests[0] == "GET /bucket/pre/some%20key HTTP/1.1");
  REQUIRE(pauses.size() == 2);
  CHECK(pauses[1] == std::chrono::milliseconds(1000));  // Retry-After: 1
}

TEST_CASE("remote::S3Client sends SigV4-signed requests with encoded keys and sorted queries") {
  TempDir temp;
  const std::string listing = "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";
  ScriptedServer server({reply("200 OK", "", "ETag: \"e\"\r\nx-amz-meta-a: 1\r\n"), reply("200 OK", listing),
                         reply("200 OK", "")});
  S3Client client = scripted_client(server, {500, 5000, 0});
  auto head = client.head("dir/a b+c&d\xC3\xA9~_.-");
  REQUIRE_MESSAGE(head.ok(), head.error().message());
  REQUIRE(head->has_value());
  CHECK((*head)->size == 0);
  CHECK((*head)->etag == "e");
  CHECK((*head)->metadata == std::map<std::string, std::string>{{"a", "1"}});
  REQUIRE(client.list("a b/", "x", "tok/=", 5).ok());

  // A virtual-hosted client with a session token (curl resolves *.localhost to loopback).
  const std::string port = server.endpoint().substr(server.endpoint().rfind(':') + 1);
  S3Client hosted(S3Location{"http://localhost:" + port, "bucket", "", "eu-west-1", false},
                  S3Credentials{"AKIDTESTTEST", "secret", "session-token", "test"}, {500, 5000, 0});
  write_text(temp / "f", "body");
  auto put = hosted.put_from_file("k", temp / "f", {{"m", "v"}}, "text/plain");
  REQUIRE_MESSAGE(put.ok(), put.error().message());

  const auto heads = server.request_heads();
  REQUIRE(heads.size() == 3);
  CHECK(heads[0].find("HEAD /bucket/pre/dir/a%20b%2Bc%26d%C3%A9~_.- HTTP/1.1\r\n") == 0);
  CHECK(heads[1].find("GET /bucket?continuation-token=tok%2F%3D&list-type=2&max-keys=5&prefix=pre%2Fa%20b%2F"
                      "&start-after=pre%2Fx HTTP/1.1\r\n") == 0);
  CHECK(heads[2].find("PUT /k HTTP/1.1\r\n") == 0);
  CHECK(heads[2].find("\r\nHost: bucket.localhost:" + port + "\r\n") != std::string::npos);
  CHECK(heads[2].find("\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD\r\n") != std::string::npos);
  CHECK(heads[2].find("\r\nx-amz-security-token: session-token\r\n") != std::string::npos);
  CHECK(heads[2].find("\r\nContent-Length: 4\r\n") != std::string::npos);
  CHECK(heads[2].find("Credential=AKIDTESTTEST/") != std::string::npos);
  CHECK(heads[2].find("/eu-west-1/s3/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;"
                      "x-amz-meta-m;x-amz-security-token, Signature=") != std::string::npos);
  // The SHA-256 of the empty payload (the captured head may end right after it).
  INFO(heads[0]);
  CHECK(heads[0].find("\r\nx-amz-content-sha256: "
                      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") != std::string::npos);
  for (const auto& request : heads) {
    CHECK(request.find("secret") == std::string::npos);
  }
}

TEST_CASE("remote::S3Client gives up after its retries and names the attempts") {
  ScriptedServer server({reply("500 Internal Server Error", ""), reply("500 Internal Server Error", ""),
                         reply("500 Internal Server Error", "<Error><Code>InternalError</Code></Error>")});
  S3Client client = scripted_client(server, {500, 5000, 2});
  auto object = client.head("k");
  REQUIRE_FALSE(object.ok());
  CHECK(object.error().code() == ErrorCode::remote);
  CHECK(object.error().message().find("S3 HEAD " + server.endpoint() + "/bucket/pre/k: HTTP 500") == 0);
  CHECK(object.error().message().find("after 3 attempts") != std::string::npos);
  CHECK(server.requests().size() == 3);
}

TEST_CASE("remote::S3Client does not retry 4xx and says refused credentials on 403") {
  TempDir temp;
  ScriptedServer server({reply("403 Forbidden",
                               "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we "
                               "calculated does not match</Message></Error>"),
                         reply("400 Bad Request", "<Error><Code>InvalidArgument</Code><Message>no</Message></Error>"),
                         reply("503 Slow Down", "", "Retry-After: 3600\r\n")});
  S3Client client = scripted_client(server, {500, 5000, 2});
  opcache::base::FileDescriptor fd(::open((temp / "out").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));

  auto refused = client.get_to_fd("k", fd.get(), 100);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == ErrorCode::remote);
  const std::string message = refused.error().message();
  CHECK(message.find("HTTP 403 Forbidden: the credentials from test credentials were refused") != std::string::npos);
  CHECK(message.find("SignatureDoesNotMatch") != std::string::npos);
  CHECK(message.find("secret/with+chars") == std::string::npos);
  CHECK(server.requests().size() == 1);

  auto bad_request = client.get_to_fd("k", fd.get(), 100);
  REQUIRE_FALSE(bad_request.ok());
  CHECK(bad_request.error().message().find("HTTP 400 Bad Request: InvalidArgument: no") != std::string::npos);
  CHECK(server.requests().size() == 2);

  // A Retry-After longer than we are willing to wait ends the retries at once.
  auto slow = client.get_to_fd("k", fd.get(), 100);
  REQUIRE_FALSE(slow.ok());
  CHECK(slow.error().message().find("HTTP 503") != std::string::npos);
  CHECK(server.requests().size() == 3);
  CHECK(read_text(temp / "out").empty());  // error bodies never reach the caller's file
}

TEST_CASE("remote::S3Client restarts a download that broke midway from the file's start") {
  TempDir temp;
  const std::string full = "0123456789";
  ScriptedServer server({"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123",
                         reply("200 OK", full)});
  S3Client client = scripted_client(server, {500, 5000, 2});
  const fs::path file = temp / "out";
  write_text(file, "KEEP:");
  opcache::base::FileDescriptor fd(::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
  auto found = client.get_to_fd("k", fd.get(), 100);
  REQUIRE_MESSAGE(found.ok(), found.error().message());
  CHECK(*found);
  CHECK(read_text(file) == "KEEP:" + full);
  CHECK(server.requests().size() == 2);
}

TEST_CASE("remote::S3Client refuses a body larger than max_bytes before writing it") {
  TempDir temp;
  ScriptedServer server({reply("200 OK", std::string(100, 'x'))});
  S3Client client = scripted_client(server, {500, 5000, 2});
  opcache::base::FileDescriptor fd(::open((temp / "out").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  auto found = client.get_to_fd("k", fd.get(), 99);
  REQUIRE_FALSE(found.ok());
  CHECK(found.error().code() == ErrorCode::remote);
  CHECK(found.error().message().find("larger than the limit of 99 bytes (announced 100 bytes)") != std::string::npos);
  CHECK(read_text(temp / "out").empty());
  CHECK(server.requests().size() == 1);
}

TEST_CASE("remote::S3Client reports a server that never answers as a timeout") {
  ScriptedServer server({"", ""});
  S3Client client = scripted_client(server, {500, 300, 1});
  const auto start = Clock::now();
  auto object = client.head("k");
  REQUIRE_FALSE(object.ok());
  CHECK(object.error().code() == ErrorCode::timeout);
  CHECK(object.error().message().find("S3 HEAD " + server.endpoint()) == 0);
  CHECK(object.error().message().find("after 2 attempts") != std::string::npos);
  // A hang catcher, over ten times the two 300 ms timeouts: they were applied.
  CHECK(Clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("remote::S3Client fails fast with a remote error naming the endpoint when nothing listens") {
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(opcache::test::refused_port());
  S3Client client(S3Location{endpoint, "bucket", "prefix", "us-east-1", true}, any_credentials(), {500, 2000, 2});
  const auto start = Clock::now();
  auto object = client.head("missing");
  const auto elapsed = Clock::now() - start;
  REQUIRE_FALSE(object.ok());
  CHECK(object.error().code() == ErrorCode::remote);
  CHECK_MESSAGE(object.error().message().find("S3 HEAD " + endpoint + "/bucket/prefix/missing") == 0,
                object.error().message());
  CHECK(object.error().message().find("after 3 attempts") != std::string::npos);
  CHECK(object.error().message().find("secret") == std::string::npos);
  CHECK(elapsed < std::chrono::seconds(5));

  TempDir temp;
  write_text(temp / "f", "x");
  auto put = client.put_from_file("missing", temp / "f", {});
  REQUIRE_FALSE(put.ok());
  CHECK(put.error().message().find("S3 PUT " + endpoint) == 0);
}

TEST_CASE("remote::S3Client validates names, metadata and arguments before any request") {
  S3Client client(S3Location{"http://127.0.0.1:9", "bucket", "", "us-east-1", true}, any_credentials());
  TempDir temp;
  write_text(temp / "f", "x");
  const auto usage = [](const opcache::Status& status, const std::string& expected) {
    REQUIRE_FALSE(status.ok());
    CHECK(status.error().code() == ErrorCode::usage);
    CHECK_MESSAGE(status.error().message().find(expected) != std::string::npos, status.error().message());
  };
  usage(client.put_from_file("", temp / "f", {}), "is empty");
  usage(client.put_from_file("a\nb", temp / "f", {}), "control character");
  usage(client.put_from_file("\xFF", temp / "f", {}), "not valid UTF-8");
  usage(client.put_from_file(std::string(1025, 'a'), temp / "f", {}), "longer than 1024 bytes");
  usage(client.put_from_file("k", temp / "f", {{"Upper", "v"}}), "metadata name 'Upper'");
  usage(client.put_from_file("k", temp / "f", {{"k", " padded"}}), "leading or trailing blanks");
  usage(client.put_from_file("k", temp / "f", {{"k", "caf\xC3\xA9"}}), "printable ASCII");
  usage(client.put_from_file("k", temp / "f", {{"big", std::string(3000, 'v')}}), "the limit is 2048");
  usage(client.put_from_file("k", temp.path(), {}), "not a regular file");
  usage(client.put_from_file("k", temp / "f", {}, "text/plain\r\nX-Injected: 1"), "line break");
  auto missing = client.put_from_file("k", temp / "absent", {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == ErrorCode::not_found);
  auto page = client.list("", "", "", 0);
  REQUIRE_FALSE(page.ok());
  CHECK(page.error().message().find("max_keys must be 1 to 1000") != std::string::npos);
  auto bad_fd = client.get_to_fd("k", -1, 10);
  REQUIRE_FALSE(bad_fd.ok());
  CHECK(bad_fd.error().code() == ErrorCode::usage);
}

// ---------------------------------------------------------------------------
// Against moto

TEST_CASE("remote::S3Client round-trips a file with metadata through moto") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  TempDir temp;
  S3Client client = moto_client("opcache-roundtrip", "team/kernels");
  REQUIRE(client.create_bucket_if_missing().ok());
  REQUIRE(client.create_bucket_if_missing().ok());  // idempotent

  const std::string data = random_bytes(3 * 1024 * 1024 + 17, 1);
  write_text(temp / "big", data);
  write_text(temp / "empty", "");
  const std::map<std::string, std::string> metadata = {
      {"producer", "ci-runner-7"}, {"kernel-key", "0123abcd"}, {"note", "a value with spaces, = and : signs"}};
  auto put = client.put_from_file("ab/cdef.bundle", temp / "big", metadata);
  REQUIRE_MESSAGE(put.ok(), put.error().message());
  REQUIRE(client.put_from_file("ab/empty.bundle", temp / "empty", {}, "application/x-opcache").ok());

  auto head = client.head("ab/cdef.bundle");
  REQUIRE_MESSAGE(head.ok(), head.error().message());
  REQUIRE(head->has_value());
  CHECK((*head)->name == "ab/cdef.bundle");
  CHECK((*head)->size == static_cast<std::int64_t>(data.size()));
  CHECK((*head)->etag == md5_hex(data));  // single-part PUT: the ETag is the MD5 of the body
  CHECK((*head)->metadata == metadata);

  auto empty_head = client.head("ab/empty.bundle");
  REQUIRE(empty_head.ok());
  REQUIRE(empty_head->has_value());
  CHECK((*empty_head)->size == 0);
  CHECK((*empty_head)->metadata.empty());

  CHECK(get_bytes(client, temp / "got", "ab/cdef.bundle") == std::optional<std::string>(data));
  CHECK(get_bytes(client, temp / "got-empty", "ab/empty.bundle") == std::optional<std::string>(""));
  CHECK(get_bytes(client, temp / "got-missing", "ab/absent.bundle") == std::nullopt);
  auto absent = client.head("ab/absent.bundle");
  REQUIRE(absent.ok());
  CHECK_FALSE(absent->has_value());

  // The object lives under the prefix: a client without it sees the full key.
  S3Client unprefixed = moto_client("opcache-roundtrip", "");
  auto full = unprefixed.head("team/kernels/ab/cdef.bundle");
  REQUIRE(full.ok());
  CHECK(full->has_value());

  {
    opcache::base::FileDescriptor fd(::open((temp / "limited").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    auto limited = client.get_to_fd("ab/cdef.bundle", fd.get(), 1024 * 1024);
    REQUIRE_FALSE(limited.ok());
    CHECK(limited.error().code() == ErrorCode::remote);
    CHECK(limited.error().message().find("larger than the limit of 1048576 bytes") != std::string::npos);
    CHECK(fs::file_size(temp / "limited") == 0);
  }

  // Overwrite replaces body and metadata.
  write_text(temp / "small", "new body");
  REQUIRE(client.put_from_file("ab/cdef.bundle", temp / "small", {{"producer", "other"}}).ok());
  auto replaced = client.head("ab/cdef.bundle");
  REQUIRE(replaced.ok());
  REQUIRE(replaced->has_value());
  CHECK((*replaced)->size == 8);
  CHECK((*replaced)->metadata == std::map<std::string, std::string>{{"producer", "other"}});

  auto removed = client.remove("ab/cdef.bundle");
  REQUIRE(removed.ok());
  CHECK(*removed);
  auto gone = client.head("ab/cdef.bundle");
  REQUIRE(gone.ok());
  CHECK_FALSE(gone->has_value());
  auto removed_again = client.remove("ab/cdef.bundle");
  REQUIRE(removed_again.ok());
  CHECK_FALSE(*removed_again);
}

TEST_CASE("remote::S3Client reports a missing bucket as an error, not as a miss") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  TempDir temp;
  S3Client client = moto_client("opcache-no-such-bucket", "p");
  opcache::base::FileDescriptor fd(::open((temp / "out").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  auto got = client.get_to_fd("k", fd.get(), 100);
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().code() == ErrorCode::remote);
  CHECK(got.error().message().find("NoSuchBucket") != std::string::npos);
  auto page = client.list("", "", "", 10);
  REQUIRE_FALSE(page.ok());
  CHECK(page.error().message().find("HTTP 404 Not Found: NoSuchBucket") != std::string::npos);
}

TEST_CASE("remote::S3Client creates a bucket outside us-east-1 with a LocationConstraint") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  const std::string url =
      "s3://opcache-eu/p?region=eu-west-1&endpoint=" + MotoServer::shared().endpoint();
  auto location = parse_s3_url(url);
  REQUIRE(location.ok());
  S3Client client(*location, any_credentials());
  auto created = client.create_bucket_if_missing();
  REQUIRE_MESSAGE(created.ok(), created.error().message());
  REQUIRE(client.create_bucket_if_missing().ok());
  TempDir temp;
  write_text(temp / "f", "eu");
  REQUIRE(client.put_from_file("k", temp / "f", {}).ok());
  CHECK(get_bytes(client, temp / "got", "k") == std::optional<std::string>("eu"));
}

TEST_CASE("remote::S3Client lists with a prefix, page by page, with names relative to the prefix") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  TempDir temp;
  S3Client client = moto_client("opcache-listing", "ci/kernels");
  REQUIRE(client.create_bucket_if_missing().ok());
  std::set<std::string> expected;
  for (int i = 0; i < 25; ++i) {
    const std::string name = "obj-" + std::string(i < 10 ? "0" : "") + std::to_string(i);
    write_text(temp / "f", "body of " + name);
    REQUIRE(client.put_from_file(name, temp / "f", {}).ok());
    expected.insert(name);
  }
  const std::vector<std::string> special = {"with space/a b", "plus+sign", "unicode/\xC3\xA9t\xC3\xA9-\xE6\xA0\xB8",
                                            "amp&and<lt>", "quote\"'", "tilde~and%percent"};
  for (const auto& name : special) {
    write_text(temp / "f", "special " + name);
    auto put = client.put_from_file(name, temp / "f", {});
    REQUIRE_MESSAGE(put.ok(), put.error().message());
    expected.insert(name);
  }
  // Keys outside the prefix must not show up.
  S3Client outer = moto_client("opcache-listing", "ci");
  write_text(temp / "f", "outside");
  REQUIRE(outer.put_from_file("kernels-sibling/x", temp / "f", {}).ok());
  REQUIRE(outer.put_from_file("other/y", temp / "f", {}).ok());

  // Continuation tokens.
  std::vector<std::string> names;
  std::string token;
  int pages = 0;
  do {
    auto page = client.list("", "", token, 10);
    REQUIRE_MESSAGE(page.ok(), page.error().message());
    ++pages;
    CHECK(page->objects.size() <= 10);
    for (const auto& object : page->objects) {
      names.push_back(object.name);
      CHECK(object.size == static_cast<std::int64_t>(8 + object.name.size()));  // "body of " or "special " + name
      CHECK_FALSE(object.etag.empty());
    }
    token = page->next_continuation_token;
  } while (!token.empty() && pages < 10);
  CHECK(pages == 4);
  CHECK(names == std::vector<std::string>(expected.begin(), expected.end()));  // key order, every name once

  // start_after, with a name prefix.
  std::vector<std::string> obj_names;
  std::string after;
  while (true) {
    auto page = client.list("obj-", after, "", 10);
    REQUIRE(page.ok());
    if (page->objects.empty()) {
      break;
    }
    for (const auto& object : page->objects) {
      obj_names.push_back(object.name);
    }
    after = obj_names.back();
  }
  REQUIRE(obj_names.size() == 25);
  CHECK(obj_names.front() == "obj-00");
  CHECK(obj_names.back() == "obj-24");
  CHECK(std::is_sorted(obj_names.begin(), obj_names.end()));

  auto tens = client.list("obj-1", "", "", 1000);
  REQUIRE(tens.ok());
  CHECK(tens->objects.size() == 10);
  CHECK(tens->next_continuation_token.empty());

  // Names that need encoding in URLs and escaping in XML round trip through every call.
  for (const auto& name : special) {
    CAPTURE(name);
    auto page = client.list(name, "", "", 10);
    REQUIRE_MESSAGE(page.ok(), page.error().message());
    REQUIRE(page->objects.size() == 1);
    CHECK(page->objects[0].name == name);
    auto head = client.head(name);
    REQUIRE(head.ok());
    REQUIRE(head->has_value());
    CHECK(get_bytes(client, temp / "got", name) == std::optional<std::string>("special " + name));
  }
}

TEST_CASE("remote::S3Client serves 8 threads at once, byte-exact") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  TempDir temp;
  S3Client client = moto_client("opcache-concurrent", "c");
  REQUIRE(client.create_bucket_if_missing().ok());
  constexpr int k_threads = 8;
  constexpr int k_objects_per_thread = 3;
  std::mutex mutex;
  std::vector<std::string> failures;
  const auto fail = [&](const std::string& what) {
    std::lock_guard lock(mutex);
    failures.push_back(what);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < k_objects_per_thread; ++i) {
        const std::string name = "t" + std::to_string(t) + "/o" + std::to_string(i);
        const std::string data = random_bytes(150000 + 1000 * t + i, 100 + t * 10 + i);
        const fs::path source = temp / ("src-" + std::to_string(t) + "-" + std::to_string(i));
        const fs::path target = temp / ("dst-" + std::to_string(t) + "-" + std::to_string(i));
        write_text(source, data);
        if (auto put = client.put_from_file(name, source, {{"thread", std::to_string(t)}}); !put) {
          fail(name + " put: " + put.error().message());
          continue;
        }
        opcache::base::FileDescriptor fd(::open(target.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600));
        auto got = client.get_to_fd(name, fd.get(), 1 << 20);
        if (!got || !*got) {
          fail(name + " get: " + (got ? std::string("missing") : got.error().message()));
        } else if (read_text(target) != data) {
          fail(name + " bytes differ");
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (const auto& failure : failures) {
    FAIL_CHECK(failure);
  }
  CHECK(failures.empty());
  auto page = client.list("", "", "", 1000);
  REQUIRE(page.ok());
  CHECK(page->objects.size() == k_threads * k_objects_per_thread);
}

TEST_CASE("remote::S3Client signs requests moto verifies, and reports refused credentials") {
  // A dedicated server: enabling authentication cannot be undone.
  MotoServer server;
  OPCACHE_SKIP_IF(server.start_error().has_value(), *server.start_error());
  const MotoServer::AuthenticationKeys keys = server.enable_authentication();
  TempDir temp;
  write_text(temp / "f", random_bytes(2 * 1024 * 1024, 7));  // large enough for Expect: 100-continue
  write_text(temp / "empty", "");
  S3Location location{server.endpoint(), "opcache-auth", "signed/prefix", "us-east-1", true};

  // Moto recomputes the signature over the URL as werkzeug decodes it
  // (request.url is an IRI: %26, %2B, %21, %2F and UTF-8 escapes come back
  // decoded), so it refuses correct signatures for keys with '+', '&', '!' or
  // non-ASCII bytes (checked against botocore's signer: libcurl's are right).
  // Names here stay within what survives that decoding; the other names are
  // covered by the listing test, where moto does not check signatures.
  S3Client user(location, {keys.user.access_key_id, keys.user.secret_access_key, "", "moto user"});
  auto created = user.create_bucket_if_missing();
  REQUIRE_MESSAGE(created.ok(), created.error().message());
  auto put = user.put_from_file("dir/a b_c-d.e~f", temp / "f", {{"producer", "signed"}});
  REQUIRE_MESSAGE(put.ok(), put.error().message());
  REQUIRE(user.put_from_file("dir/empty", temp / "empty", {}).ok());
  auto head = user.head("dir/a b_c-d.e~f");
  REQUIRE_MESSAGE(head.ok(), head.error().message());
  REQUIRE(head->has_value());
  CHECK((*head)->metadata.at("producer") == "signed");
  CHECK(get_bytes(user, temp / "got", "dir/a b_c-d.e~f") == std::optional<std::string>(read_text(temp / "f")));
  // Moto also decodes %2F in the query before checking, so the signed listing
  // uses a client without a prefix (no '/' in any parameter value).
  S3Location flat_location = location;
  flat_location.prefix.clear();
  S3Client flat(flat_location, {keys.user.access_key_id, keys.user.secret_access_key, "", "moto user"});
  auto page = flat.list("", "signed", "", 10);
  REQUIRE_MESSAGE(page.ok(), page.error().message());
  REQUIRE(page->objects.size() == 2);
  CHECK(page->objects[0].name == "signed/prefix/dir/a b_c-d.e~f");

  // Temporary credentials: the session token travels in x-amz-security-token.
  S3Client session(location, {keys.session.access_key_id, keys.session.secret_access_key,
                              keys.session.session_token, "moto session"});
  auto session_head = session.head("dir/empty");
  REQUIRE_MESSAGE(session_head.ok(), session_head.error().message());
  CHECK(session_head->has_value());
  REQUIRE(session.put_from_file("dir/by-session", temp / "empty", {}).ok());

  const auto refused = [&](const S3Credentials& credentials, const std::string& code, int head_status = 403) {
    CAPTURE(credentials.source);
    S3Client wrong(location, credentials, {1000, 5000, 2});
    auto denied_head = wrong.head("dir/empty");
    REQUIRE_FALSE(denied_head.ok());
    CHECK(denied_head.error().code() == ErrorCode::remote);
    // HEAD responses have no body, so a 400 (InvalidToken) cannot name its cause.
    const std::string expected_head = head_status == 403 ? "HTTP 403 Forbidden: the credentials from " +
                                                               credentials.source + " were refused"
                                                         : "HTTP 400 Bad Request: a HEAD response carries no error";
    CHECK_MESSAGE(denied_head.error().message().find(expected_head) != std::string::npos,
                  denied_head.error().message());
    opcache::base::FileDescriptor fd(::open((temp / "denied").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    auto denied_get = wrong.get_to_fd("dir/empty", fd.get(), 100);
    REQUIRE_FALSE(denied_get.ok());
    CHECK_MESSAGE(denied_get.error().message().find(code) != std::string::npos, denied_get.error().message());
    CHECK(denied_get.error().message().find("attempts") == std::string::npos);  // 403 is not retried
    auto denied_put = wrong.put_from_file("dir/intruder", temp / "empty", {});
    REQUIRE_FALSE(denied_put.ok());
    CHECK(denied_put.error().message().find("refused") != std::string::npos);
  };
  refused({keys.user.access_key_id, "wrong-secret", "", "wrong secret"}, "SignatureDoesNotMatch");
  refused({"AKIAUNKNOWNUNKNOWN00", keys.user.secret_access_key, "", "unknown key"}, "InvalidAccessKeyId");
  refused({keys.session.access_key_id, keys.session.secret_access_key, "", "session without token"},
          "InvalidAccessKeyId");
  refused({keys.session.access_key_id, keys.session.secret_access_key, "not-the-token", "wrong token"},
          "InvalidToken", 400);
  auto intruder = user.head("dir/intruder");
  REQUIRE(intruder.ok());
  CHECK_FALSE(intruder->has_value());
}
