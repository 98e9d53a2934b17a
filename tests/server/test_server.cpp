// End-to-end tests of `opcache serve` (docs/protocol.md): a real server
// process on loopback per test case, driven over HTTP(S) with libcurl and over
// raw sockets for clients that misbehave. Bundles are real: write_bundle over
// kernels compiled by the system compiler. Response bodies are validated
// against schemas/api/*.schema.json.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <latch>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/canonical_json.hpp"
#include "base/sha256.hpp"
#include "store/bundle_reader.hpp"
#include "store/bundle_writer.hpp"
#include "store/scenario.hpp"
#include "tests/support/api_schema.hpp"
#include "tests/support/bundle_inputs.hpp"
#include "tests/support/children.hpp"
#include "tests/support/cli_runner.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/metrics_text.hpp"
#include "tests/support/process.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/server.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"
#include "tests/support/tokens.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using opcache::test::contains;
using opcache::test::eventually;
using opcache::test::hermetic;
using opcache::test::HttpClient;
using opcache::test::HttpOptions;
using opcache::test::HttpResponse;
using opcache::test::joined_lines;
using opcache::test::k_absent_key;
using opcache::test::k_admin_token;
using opcache::test::k_infer_scenario;
using opcache::test::k_read_token;
using opcache::test::k_write_token;
using opcache::test::RawConnection;
using opcache::test::scenario_json;
using opcache::test::seconds_since;
using opcache::test::ServerProcess;
using opcache::test::TempDir;
using opcache::test::token_line;

// The request header that presents `token`.
std::string authorization_header(const std::string& token) {
  return "Authorization: Bearer " + token;
}

// An error response: exact status and code, a valid error body.
void check_error(const HttpResponse& response, long status, const std::string& code) {
  INFO("response: " << response.status << " " << response.body << " " << response.error);
  CHECK(response.status == status);
  json body = checked_json(response, "error.schema.json");
  CHECK(body.value("error", "") == code);
  CHECK_FALSE(body.value("message", "").empty());
}

// ---------------------------------------------------------------------------
// Real bundles

struct TestBundle {
  std::string key;
  std::string bytes;
  std::string digest;  // SHA-256 of `bytes`, computed here
  fs::path file;       // `bytes` on disk
  opcache::test::KernelTriple kernel;
  json manifest;       // the manifest as written in the bundle
  std::string op_type;
};

std::uint32_t manifest_length(const std::string& bundle) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(bundle[12])) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bundle[13])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bundle[14])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bundle[15])) << 24;
}

// Compiles a kernel for (op, length) and writes its bundle. `padding_bytes`
// adds an incompressible member to make the bundle bigger.
TestBundle make_bundle(const fs::path& dir, const std::string& op, int length,
                       const std::string& spec = opcache::test::k_test_scenario, std::size_t padding_bytes = 0) {
  const std::string name = op + "_" + std::to_string(length) + (spec == k_infer_scenario ? "_infer" : "");
  TestBundle bundle;
  bundle.op_type = op;
  bundle.kernel = opcache::test::make_kernel(dir / name, op, length);
  opcache::store::BundleInput input;
  input.descriptor = json::parse(bundle.kernel.descriptor_json);
  input.scenario = scenario_json(spec);
  for (const auto& file : bundle.kernel.files()) {
    input.members.push_back({file.filename().string(), file, ""});
  }
  if (padding_bytes > 0) {
    std::mt19937_64 random(static_cast<std::uint64_t>(length));
    std::string noise(padding_bytes, '\0');
    for (auto& c : noise) {
      c = static_cast<char>(random());
    }
    const fs::path padding = dir / name / "padding.bin";
    opcache::test::write_text(padding, noise);
    input.members.push_back({"padding.bin", padding, ""});
  }
  input.build_ms = 250 + length;
  opcache::base::StringSink sink;
  auto written = opcache::store::write_bundle(input, sink);
  REQUIRE_MESSAGE(written.ok(), (written.ok() ? "" : written.error().message()));
  bundle.key = written->manifest.key;
  bundle.bytes = sink.data();
  bundle.digest = opcache::base::sha256_hex(bundle.bytes);
  bundle.file = dir / (name + ".bundle");
  opcache::test::write_text(bundle.file, bundle.bytes);
  bundle.manifest = json::parse(bundle.bytes.substr(opcache::store::k_bundle_header_size, manifest_length(bundle.bytes)));
  return bundle;
}

// ---------------------------------------------------------------------------
// A server with the standard tokens file, and checks of its storage.

// reader (read), writer (write), boss (admin), hashed by hand.
fs::path write_tokens_file(const fs::path& path) {
  opcache::test::write_text(path, "# opcache tokens\n" + token_line(k_read_token, "reader", "read") +
                                      token_line(k_write_token, "writer", "write") +
                                      token_line(k_admin_token, "boss", "admin"));
  return path;
}

struct Served {
  TempDir dir;
  fs::path storage = dir / "storage";
  fs::path tokens = write_tokens_file(dir / "tokens");
  std::unique_ptr<ServerProcess> server;

  /// Starts `opcache serve --tokens <standard tokens file> <extra>`; with
  /// `tokens_text`, the tokens file holds that instead.
  explicit Served(std::vector<std::string> extra = {}, const std::string& tokens_text = {}) {
    if (!tokens_text.empty()) {
      opcache::test::write_text(tokens, tokens_text);
    }
    extra.insert(extra.begin(), {"--tokens", tokens.string()});
    server = std::make_unique<ServerProcess>(storage, extra);
  }

  std::string url(const std::string& path) const { return server->base_url() + path; }
  std::string entry(const std::string& key) const { return url("/v1/entries/" + key); }
  int port() const { return server->port(); }
};

// Regular files under `dir` (recursively); none when it does not exist.
std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return out;
  }
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file()) {
      out.push_back(it->path().string());
    }
  }
  return out;
}

// The entry is absent and nothing of the refused upload remains: GET is 404,
// tmp/ is empty once the server is done, objects/ holds nothing, and
// `opcache verify` finds no entries and no problems.
void check_nothing_left(const Served& served, const std::string& key) {
  auto get = opcache::test::http_request("GET", served.entry(key), {authorization_header(k_read_token)});
  check_error(get, 404, "not_found");
  const fs::path tmp = served.storage / "tmp";
  CHECK_MESSAGE(eventually([&] { return files_under(tmp).empty(); }),
                "left in tmp/: " << joined_lines(files_under(tmp)));
  CHECK_MESSAGE(files_under(served.storage / "objects").empty(),
                "left in objects/: " << joined_lines(files_under(served.storage / "objects")));
  auto verify = opcache::test::run_cli({"--json", "--cache-dir", served.storage.string(), "verify"}, hermetic());
  INFO("verify: " << verify.out << verify.err);
  CHECK(verify.exit_code == 0);
  json report = json::parse(verify.out, nullptr, false);
  REQUIRE(report.is_object());
  CHECK(report["entries_checked"] == 0);
  CHECK(report["objects_checked"] == 0);
  CHECK(report["problems"] == json::array());
  CHECK(report["ok"] == true);
}

// The server still answers.
void check_healthy(const Served& served) {
  auto health = opcache::test::http_request("GET", served.url("/healthz"));
  CHECK(health.status == 200);
  CHECK(json::parse(health.body, nullptr, false) == json{{"status", "ok"}});
  CHECK_FALSE(served.server->exited());
}

// "PUT /v1/entries/<key> HTTP/1.1" with a write token and Content-Length.
std::string upload_head(const std::string& key, std::size_t length, const std::string& extra_headers = {}) {
  return "PUT /v1/entries/" + key + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + authorization_header(k_write_token) +
         "\r\nContent-Type: application/vnd.opcache.bundle\r\nContent-Length: " + std::to_string(length) + "\r\n" +
         extra_headers + "\r\n";
}

// The bundle of (op, length), `padding_bytes` bigger, stored on `served` by a PUT (201).
TestBundle put_bundle(const Served& served, const fs::path& dir, const std::string& op, int length,
                      std::size_t padding_bytes = 0) {
  TestBundle bundle = make_bundle(dir, op, length, opcache::test::k_test_scenario, padding_bytes);
  REQUIRE(opcache::test::http_request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)},
                                      bundle.bytes)
              .status == 201);
  return bundle;
}

// Lines of the access log (requests, not events), parsed from the text format.
std::vector<std::string> access_lines(const std::string& log) {
  std::vector<std::string> out;
  std::stringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    if (contains(line, " token=") && !contains(line, "opcache serve:")) {
      out.push_back(line);
    }
  }
  return out;
}

std::string metric_line(const std::string& metrics, const std::string& prefix) {
  std::stringstream lines(opcache::test::without_replica_label(metrics));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix + " ", 0) == 0) {
      return line;
    }
  }
  return {};
}

// The value of the sample `name{labels}` (exact text before the value), or -1.
double metric_value(const std::string& metrics, const std::string& sample) {
  const std::string line = metric_line(metrics, sample);
  return line.empty() ? -1 : std::stod(line.substr(sample.size() + 1));
}

// After rejected uploads of `key`: nothing of it is stored or left behind, and
// /metrics counts `count` rejections for `reason`.
void check_rejected_upload(const Served& served, const std::string& key, const std::string& reason, int count) {
  check_nothing_left(served, key);
  auto metrics = opcache::test::http_request("GET", served.url("/metrics"), {authorization_header(k_read_token)});
  CHECK(metric_value(metrics.body, "opcache_uploads_rejected_total{reason=\"" + reason + "\"}") == count);
}

// The body and one header of a raw HTTP response.
std::string raw_body(const std::string& raw) {
  const auto end = raw.find("\r\n\r\n");
  return end == std::string::npos ? std::string() : raw.substr(end + 4);
}

bool raw_has_header(const std::string& raw, const std::string& line) {
  return contains(raw.substr(0, raw.find("\r\n\r\n")), "\r\n" + line + "\r\n");
}

// The error code of a raw response's JSON error body ("" when there is none).
std::string raw_error_code(const std::string& raw) {
  json body = json::parse(raw_body(raw), nullptr, false);
  return body.is_object() ? body.value("error", "") : "";
}

// The members' bytes, in manifest (= payload) order.
std::string member_bytes(const TestBundle& bundle) {
  std::string out;
  const fs::path dir = bundle.kernel.object.parent_path();
  for (const auto& member : bundle.manifest["members"]) {
    out += opcache::test::read_text(dir / member["name"].get<std::string>());
  }
  return out;
}

// `bundle` with its payload replaced by `members` compressed anew.
std::string with_payload(const TestBundle& bundle, const std::string& members) {
  const std::size_t payload_at = opcache::store::k_bundle_header_size + manifest_length(bundle.bytes);
  std::string compressed(ZSTD_compressBound(members.size()), '\0');
  const std::size_t size = ZSTD_compress(compressed.data(), compressed.size(), members.data(), members.size(), 3);
  REQUIRE_FALSE(ZSTD_isError(size));
  compressed.resize(size);
  return bundle.bytes.substr(0, payload_at) + compressed;
}

// `bundle` with `manifest` (canonical JSON) instead of its own manifest.
std::string with_manifest(const TestBundle& bundle, const json& manifest) {
  auto text = opcache::base::canonical_json(manifest);
  REQUIRE(text.ok());
  return opcache::store::encode_bundle_header(static_cast<std::uint32_t>(text->size())) + *text +
         bundle.bytes.substr(opcache::store::k_bundle_header_size + manifest_length(bundle.bytes));
}

// Whether verify_bundle (what the server runs on uploads) accepts `bytes`.
bool verifies(const std::string& bytes) {
  opcache::base::MemorySource source(bytes);
  return opcache::store::verify_bundle(source).ok();
}

bool have_openssl() { return opcache::test::run_process({"openssl", "version"}).exit_code == 0; }

// A self-signed certificate for 127.0.0.1 (and localhost).
void make_certificate(const fs::path& cert, const fs::path& key, const std::string& common_name) {
  auto made = opcache::test::run_process({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                                          key.string(), "-out", cert.string(), "-days", "1", "-subj",
                                          "/CN=" + common_name, "-addext",
                                          "subjectAltName=IP:127.0.0.1,DNS:localhost"});
  REQUIRE_MESSAGE(made.exit_code == 0, made.err);
}

std::string without_whitespace(std::string text) {
  text.erase(std::remove_if(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); }), text.end());
  return text;
}

// Threads of a process, from /proc/PID/status.
int thread_count(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) {
      return std::stoi(line.substr(8));
    }
  }
  return -1;
}

// Open sockets of a process, from /proc/PID/fd.
int socket_count(pid_t pid) {
  int count = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code link_ec;
    if (fs::read_symlink(entry.path(), link_ec).string().rfind("socket:", 0) == 0) {
      ++count;
    }
  }
  return count;
}

}  // namespace

// ===========================================================================
// Entries: PUT, GET, HEAD, ETag, and the local store behind the server

TEST_CASE("server::PUT stores a real bundle, GET and HEAD return it with its ETag, and the storage is a local store") {
  Served served;
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "square", 8);
  const std::string url = served.entry(bundle.key);
  const std::string etag = "\"" + bundle.digest + "\"";

  // A miss first, for GET and HEAD.
  check_error(opcache::test::http_request("GET", url, {authorization_header(k_read_token)}), 404, "not_found");
  auto head_miss = opcache::test::http_request("HEAD", url, {authorization_header(k_read_token)});
  CHECK(head_miss.status == 404);
  CHECK(head_miss.body.empty());

  // PUT from the file: 201, stored.
  HttpOptions from_file;
  from_file.body_file = bundle.file;
  auto put = opcache::test::http_request("PUT", url, {authorization_header(k_write_token)}, {}, from_file);
  REQUIRE_MESSAGE(put.status == 201, put.body << put.error << served.server->log_text());
  json stored = checked_json(put, "put-response.schema.json");
  CHECK(stored == json{{"key", bundle.key}, {"digest", bundle.digest},
                       {"bytes", bundle.bytes.size()}, {"stored", true}});
  CHECK(put.header("etag") == etag);

  // The same PUT again is idempotent: 200, "stored": false.
  auto again = opcache::test::http_request("PUT", url, {authorization_header(k_write_token)}, bundle.bytes);
  CHECK(again.status == 200);
  json kept = checked_json(again, "put-response.schema.json");
  CHECK(kept == json{{"key", bundle.key}, {"digest", bundle.digest}, {"bytes", bundle.bytes.size()},
                     {"stored", false}});

  // GET: the exact bytes, with type, length and ETag.
  auto get = opcache::test::http_request("GET", url, {authorization_header(k_read_token)});
  CHECK(get.status == 200);
  CHECK(get.body == bundle.bytes);
  CHECK(get.header("etag") == etag);
  CHECK(get.header("content-type") == "application/vnd.opcache.bundle");
  CHECK(get.header("content-length") == std::to_string(bundle.bytes.size()));
  CHECK(contains(get.header("server"), "opcache/"));

  // HEAD: the same headers, no body.
  auto head = opcache::test::http_request("HEAD", url, {authorization_header(k_read_token)});
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(head.header("content-length") == std::to_string(bundle.bytes.size()));
  CHECK(head.header("etag") == etag);

  // Conditional GET.
  auto not_modified =
      opcache::test::http_request("GET", url, {authorization_header(k_read_token), "If-None-Match: " + etag});
  CHECK(not_modified.status == 304);
  CHECK(not_modified.body.empty());
  CHECK(not_modified.header("etag") == etag);
  auto modified = opcache::test::http_request(
      "GET", url, {authorization_header(k_read_token), "If-None-Match: \"" + std::string(64, '0') + "\""});
  CHECK(modified.status == 200);
  CHECK(modified.body == bundle.bytes);

  // The server's storage is a normal local store: the CLI reads the entry.
  const fs::path out = work / "out";
  auto cli = opcache::test::run_cli({"get", "--cache-dir", served.storage.string(), bundle.key, "--out", out.string()},
                                    hermetic());
  INFO("opcache get: " << cli.out << cli.err);
  CHECK(cli.exit_code == 0);
  for (const auto& file : bundle.kernel.files()) {
    CAPTURE(file);
    REQUIRE(fs::exists(out / file.filename()));
    CHECK(opcache::test::read_text(out / file.filename()) == opcache::test::read_text(file));
  }
  CHECK(files_under(served.storage / "tmp").empty());
}

TEST_CASE("server::PUT and GET a bundle larger than 1 MiB under the default --max-body (512 MiB)") {
  Served served;
  TempDir work;
  const TestBundle big = make_bundle(work.path(), "relu", 12, opcache::test::k_test_scenario, 3u << 20);
  REQUIRE(big.bytes.size() > (3u << 20));
  HttpOptions from_file;
  from_file.body_file = big.file;
  auto put =
      opcache::test::http_request("PUT", served.entry(big.key), {authorization_header(k_write_token)}, {}, from_file);
  INFO("PUT: " << put.status << " " << put.error << " " << put.body);
  CHECK(put.status == 201);
  auto get = opcache::test::http_request("GET", served.entry(big.key), {authorization_header(k_read_token)});
  CHECK(get.status == 200);
  CHECK(get.body.size() == big.bytes.size());
  CHECK(opcache::base::sha256_hex(get.body) == big.digest);  // the bytes, without printing 3 MiB on failure
  CHECK(files_under(served.storage / "tmp").empty());

  // libcurl sent that one with "Expect: 100-continue" (it does above 1 MiB);
  // a client that sends the body at once is served the same.
  const TestBundle other = make_bundle(work.path(), "relu", 13, opcache::test::k_test_scenario, 3u << 20);
  HttpOptions other_file;
  other_file.body_file = other.file;
  auto at_once = opcache::test::http_request("PUT", served.entry(other.key),
                                             {authorization_header(k_write_token), "Expect:"}, {}, other_file);
  INFO("PUT without Expect: " << at_once.status << " " << at_once.error << " " << at_once.body);
  CHECK(at_once.status == 201);
  auto head = opcache::test::http_request("HEAD", served.entry(other.key), {authorization_header(k_read_token)});
  CHECK(head.status == 200);
  CHECK(head.header("content-length") == std::to_string(other.bytes.size()));
  CHECK(head.header("etag") == "\"" + other.digest + "\"");
  CHECK(files_under(served.storage / "tmp").empty());
}

TEST_CASE("server::PUT with Expect: 100-continue gets 100 Continue before the body, then 201") {
  Served served;
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "neg", 14);
  RawConnection connection(served.port());
  REQUIRE(connection.send(upload_head(bundle.key, bundle.bytes.size(), "Expect: 100-continue\r\n")));
  const std::string interim = connection.receive(5s, "\r\n\r\n");
  INFO("interim: " << interim);
  CHECK(opcache::test::raw_status(interim) == 100);
  CHECK(files_under(served.storage / "objects").empty());  // nothing stored before the body
  REQUIRE(connection.send(bundle.bytes));
  const std::string response = connection.receive_response(5s);
  INFO("response: " << response);
  CHECK(opcache::test::raw_status(response) == 201);
  json body = json::parse(raw_body(response), nullptr, false);
  CHECK(body.value("stored", false) == true);
  auto get = opcache::test::http_request("GET", served.entry(bundle.key), {authorization_header(k_read_token)});
  CHECK(get.status == 200);
  CHECK(get.body == bundle.bytes);
}

TEST_CASE("server::a header split across reads, and a request with a body pipelined behind another, are each answered once") {
  // The session parses the bytes it has read when they hold a whole header,
  // and reads on when they do not; a body's bytes are never taken for the
  // next request's header.
  Served served;
  TempDir work;
  const TestBundle bundle = put_bundle(served, work.path(), "neg", 17);
  RawConnection connection(served.port());
  const std::string get = "GET /v1/entries/" + bundle.key + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                          authorization_header(k_read_token) + "\r\n\r\n";
  const std::size_t half = get.size() / 2;
  REQUIRE(connection.send(get.substr(0, half)));
  CHECK(connection.receive(200ms).empty());  // half a header: nothing to answer yet
  REQUIRE(connection.send(get.substr(half)));
  const std::string first = connection.receive_response(5s);
  CHECK(opcache::test::raw_status(first) == 200);
  CHECK(raw_body(first) == bundle.bytes);

  const std::string query_body = R"({"keys": [")" + bundle.key + R"("]})";
  const std::string query = "POST /v1/entries/query HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                            authorization_header(k_read_token) + "\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(query_body.size()) + "\r\n\r\n" + query_body;
  const std::string last = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  REQUIRE(connection.send(get + query + last));
  CHECK(connection.wait_closed(5s));
  const std::string& stream = connection.received();
  const std::string rest = stream.substr(stream.find("HTTP/1.1", first.size()));
  std::vector<int> statuses;
  for (std::size_t at = rest.find("HTTP/1.1 "); at != std::string::npos; at = rest.find("HTTP/1.1 ", at + 1)) {
    statuses.push_back(std::stoi(rest.substr(at + 9, 3)));
  }
  CHECK(statuses == std::vector<int>{200, 200, 200});
  CHECK(contains(rest, R"("present":[")" + bundle.key + R"("])"));
}

TEST_CASE("server::a bundle's GET is one well-formed response on a kept-alive connection, and closes when asked") {
  Served served;
  TempDir work;
  const TestBundle bundle = put_bundle(served, work.path(), "neg", 15);
  const std::string get = "GET /v1/entries/" + bundle.key + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                          authorization_header(k_read_token) + "\r\n";
  // Every header line, the last one included.
  const auto has_header = [](const std::string& response, const std::string& line) {
    return contains(response.substr(0, response.find("\r\n\r\n")) + "\r\n", "\r\n" + line + "\r\n");
  };
  RawConnection connection(served.port());
  // The first GET reads the bundle's file, the second is answered from memory
  // on the same connection and asks it to close.
  for (const bool last : {false, true}) {
    CAPTURE(last);
    REQUIRE(connection.send(get + (last ? "Connection: close\r\n\r\n" : "\r\n")));
    const std::string response = connection.receive_response(5s);
    INFO("response: " << response.substr(0, response.find("\r\n\r\n")));
    CHECK(response.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(has_header(response, "Content-Length: " + std::to_string(bundle.bytes.size())));
    CHECK(has_header(response, "Content-Type: application/vnd.opcache.bundle"));
    CHECK(has_header(response, "ETag: \"" + opcache::base::sha256_hex(bundle.bytes) + "\""));
    CHECK(has_header(response, "Connection: close") == last);
    CHECK(contains(response, "\r\nServer: opcache/"));
    CHECK(raw_body(response) == bundle.bytes);
  }
  CHECK(connection.wait_closed(5s));
}

TEST_CASE("server::a large bundle kept in memory is sent whole from its file, to a slow reader too") {
  // From 32 KiB (k_zero_copy_bytes) a plain-HTTP answer sends the object file
  // with sendfile; what a full socket buffer leaves goes from memory.
  Served served;
  TempDir work;
  const TestBundle bundle = put_bundle(served, work.path(), "neg", 16, 700 * 1024);
  REQUIRE(bundle.bytes.size() > 700 * 1024);
  RawConnection connection(served.port(), 8 * 1024);
  // Six GETs sent at once and read only after a pause, the last asking to
  // close: the first reads the file into memory, the others send it from the
  // file until the socket buffer is full (an 8 KiB receive buffer, 4 MiB of
  // answers waiting) and the rest from memory once the reader drains it.
  constexpr int k_requests = 6;
  std::string requests;
  for (int i = 0; i < k_requests; ++i) {
    requests += "GET /v1/entries/" + bundle.key + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                authorization_header(k_read_token) + (i + 1 == k_requests ? "\r\nConnection: close" : "") +
                "\r\n\r\n";
  }
  REQUIRE(connection.send(requests));
  std::this_thread::sleep_for(300ms);
  CHECK(connection.wait_closed(20s));
  const std::string& stream = connection.received();
  std::size_t at = 0;
  for (int i = 0; i < k_requests; ++i) {
    CAPTURE(i);
    const auto head_end = stream.find("\r\n\r\n", at);
    REQUIRE(head_end != std::string::npos);
    const std::string head = stream.substr(at, head_end + 2 - at);
    CHECK(head.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    REQUIRE(contains(head, "\r\nContent-Length: " + std::to_string(bundle.bytes.size()) + "\r\n"));
    const std::string body = stream.substr(head_end + 4, bundle.bytes.size());
    CHECK(opcache::base::sha256_hex(body) == bundle.digest);  // not 700 KiB printed on failure
    at = head_end + 4 + bundle.bytes.size();
  }
  CHECK(at == stream.size());
}

TEST_CASE("server::POST /v1/entries/query reports present and missing keys in request order") {
  Served served;
  TempDir work;
  std::vector<TestBundle> bundles;
  for (int length : {4, 5, 6}) {
    bundles.push_back(make_bundle(work.path(), "relu", length));
    auto put = opcache::test::http_request("PUT", served.entry(bundles.back().key),
                                           {authorization_header(k_write_token)}, bundles.back().bytes);
    REQUIRE(put.status == 201);
  }
  const std::string other_absent(64, 'e');
  const json request = {{"keys", {k_absent_key, bundles[2].key, bundles[0].key, other_absent, bundles[1].key}}};
  CHECK(opcache::test::schema_errors("query-request.schema.json", request).empty());
  const std::string query_url = served.url("/v1/entries/query");
  auto query = opcache::test::http_request(
      "POST", query_url, {authorization_header(k_read_token), "Content-Type: application/json"}, request.dump());
  REQUIRE(query.status == 200);
  json answer = checked_json(query, "query-response.schema.json");
  CHECK(answer["present"] == json{bundles[2].key, bundles[0].key, bundles[1].key});
  CHECK(answer["missing"] == json{k_absent_key, other_absent});

  // No keys; exactly the limit.
  auto empty = opcache::test::http_request("POST", query_url, {authorization_header(k_read_token)}, R"({"keys": []})");
  CHECK(empty.status == 200);
  CHECK(checked_json(empty, "query-response.schema.json") == json{{"present", json::array()}, {"missing", json::array()}});
  json many = {{"keys", json::array()}};
  for (int i = 0; i < 10000; ++i) {
    many["keys"].push_back(opcache::base::sha256_hex(std::to_string(i)));
  }
  many["keys"][5000] = bundles[1].key;
  CHECK(opcache::test::schema_errors("query-request.schema.json", many).empty());
  auto at_limit = opcache::test::http_request("POST", query_url, {authorization_header(k_read_token)}, many.dump());
  CHECK(at_limit.status == 200);
  json limit_answer = checked_json(at_limit, "query-response.schema.json");
  CHECK(limit_answer["present"] == json{bundles[1].key});
  CHECK(limit_answer["missing"].size() == 9999);

  // Refusals.
  many["keys"].push_back(k_absent_key);
  CHECK_FALSE(opcache::test::schema_errors("query-request.schema.json", many).empty());
  check_error(opcache::test::http_request("POST", query_url, {authorization_header(k_read_token)}, many.dump()), 413,
              "too_many_keys");
  check_error(
      opcache::test::http_request("POST", query_url, {authorization_header(k_read_token)}, "{\"keys\": [\"abc\""), 400,
      "bad_request");
  check_error(
      opcache::test::http_request("POST", query_url, {authorization_header(k_read_token)}, R"({"keys": "abc"})"), 400,
      "bad_request");
  check_error(opcache::test::http_request("POST", query_url, {authorization_header(k_read_token)}, R"([1, 2])"), 400,
              "bad_request");
  const json bad_key = {{"keys", {bundles[0].key, std::string(64, 'A')}}};
  CHECK_FALSE(opcache::test::schema_errors("query-request.schema.json", bad_key).empty());
  check_error(opcache::test::http_request("POST", query_url, {authorization_header(k_read_token)}, bad_key.dump()), 400,
              "invalid_key");
  auto wrong_method = opcache::test::http_request("GET", query_url, {authorization_header(k_read_token)});
  check_error(wrong_method, 405, "method_not_allowed");
  CHECK(wrong_method.header("allow") == "POST");
}

TEST_CASE("server::GET /v1/entries lists with scenario and op_type filters and pages with the next cursor") {
  Served served;
  TempDir work;
  std::map<std::string, TestBundle> by_key;
  const std::vector<std::string> ops = {"square", "relu", "neg"};
  HttpClient client;
  auto upload = [&](const TestBundle& bundle) {
    auto put = client.request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)}, bundle.bytes);
    REQUIRE_MESSAGE(put.status == 201, put.body);
    by_key.emplace(bundle.key, bundle);
  };
  for (int i = 0; i < 25; ++i) {
    upload(make_bundle(work.path(), ops[i % 3], 16 + i));
  }
  for (int i = 0; i < 3; ++i) {
    upload(make_bundle(work.path(), "square", 100 + i, k_infer_scenario));
  }
  REQUIRE(by_key.size() == 28);

  // Pages through a listing until "next" is null; checks every page.
  auto list_all = [&](const std::string& query, std::vector<std::size_t>* page_sizes) {
    std::vector<json> entries;
    std::string after;
    for (int page = 0; page < 20; ++page) {
      const std::string url = served.url("/v1/entries?" + query + (after.empty() ? "" : "&after=" + after));
      auto listed = client.request("GET", url, {authorization_header(k_read_token)});
      REQUIRE_MESSAGE(listed.status == 200, url << " " << listed.body);
      json body = checked_json(listed, "list-response.schema.json");
      page_sizes->push_back(body["entries"].size());
      for (auto& entry : body["entries"]) {
        entries.push_back(entry);
      }
      if (body["next"].is_null()) {
        return entries;
      }
      after = body["next"].get<std::string>();
    }
    FAIL("more than 20 pages for " << query);
    return entries;
  };

  {  // everything, 10 per page
    std::vector<std::size_t> pages;
    auto entries = list_all("limit=10", &pages);
    CHECK(pages == std::vector<std::size_t>{10, 10, 8});
    std::set<std::string> seen;
    for (const auto& entry : entries) {
      const std::string key = entry["key"];
      CAPTURE(key);
      CHECK(seen.insert(key).second);  // no entry twice
      REQUIRE(by_key.count(key) == 1);
      const TestBundle& bundle = by_key.at(key);
      CHECK(entry["op_type"] == bundle.op_type);
      CHECK(entry["scenario"] == bundle.manifest["scenario"]);
      CHECK(entry["bundle_bytes"] == bundle.bytes.size());
      CHECK(entry["created_ms"].get<std::int64_t>() > 1'600'000'000'000);
    }
    CHECK(seen.size() == 28);
  }
  {  // scenario filter phase=train (URL-encoded), 10 per page
    std::vector<std::size_t> pages;
    auto entries = list_all("scenario=phase%3Dtrain&limit=10", &pages);
    CHECK(pages == std::vector<std::size_t>{10, 10, 5});
    for (const auto& entry : entries) {
      CHECK(entry["scenario"]["phase"] == "train");
    }
    pages.clear();
    auto infer = list_all("scenario=phase=infer,soc=Ascend910B1", &pages);
    CHECK(infer.size() == 3);
    for (const auto& entry : infer) {
      CHECK(entry["scenario"]["phase"] == "infer");
    }
    pages.clear();
    CHECK(list_all("scenario=soc%3DAscend310P3", &pages).empty());
  }
  {  // op_type filter, alone and with a scenario
    std::vector<std::size_t> pages;
    auto relu = list_all("op_type=relu", &pages);
    CHECK(relu.size() == 8);  // i % 3 == 1 for i < 25
    for (const auto& entry : relu) {
      CHECK(entry["op_type"] == "relu");
    }
    pages.clear();
    auto square_infer = list_all("op_type=square&scenario=phase%3Dinfer&limit=2", &pages);
    CHECK(pages == std::vector<std::size_t>{2, 1});
    CHECK(square_infer.size() == 3);
    pages.clear();
    auto square_all = list_all("op_type=square", &pages);
    CHECK(square_all.size() == 9 + 3);
  }
  {  // bad parameters are 400
    for (const std::string query : {"limit=0", "limit=1001", "limit=abc", "limit=", "limit=5x", "color=red",
                                    "scenario=phase", "scenario=colour%3Dred", "op_type=relu&bogus=1"}) {
      CAPTURE(query);
      check_error(client.request("GET", served.url("/v1/entries?" + query), {authorization_header(k_read_token)}), 400,
                  "bad_request");
    }
    auto wrong_method = client.request("DELETE", served.url("/v1/entries"), {authorization_header(k_admin_token)});
    check_error(wrong_method, 405, "method_not_allowed");
    CHECK(wrong_method.header("allow") == "GET, HEAD");
  }
}

// ===========================================================================
// Status, metrics, health, and requests that match no route

TEST_CASE("server::GET /v1/status and /metrics count requests, hits, misses and bytes, and /healthz needs no token") {
  Served served;
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "neg", 12);
  // One keep-alive connection: each request is logged and counted before the
  // server reads the next one, so the counts below are exact.
  HttpClient client;

  auto status_of = [&] {
    auto status = client.request("GET", served.url("/v1/status"), {authorization_header(k_read_token)});
    REQUIRE(status.status == 200);
    return checked_json(status, "status-response.schema.json");
  };
  json before = status_of();
  CHECK(before["api"] == "v1");
  CHECK(before["entries"] == 0);
  CHECK(before["bytes"] == 0);
  CHECK(before["hits"] == 0);
  CHECK(before["misses"] == 0);
  CHECK(before["storage"] == "local");  // never a path
  CHECK(before["uptime_seconds"].get<double>() >= 0.0);

  REQUIRE(client.request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)}, bundle.bytes).status ==
          201);
  const std::string etag = "\"" + bundle.digest + "\"";
  for (int i = 0; i < 2; ++i) {
    CHECK(client.request("GET", served.entry(bundle.key), {authorization_header(k_read_token)}).status == 200);
  }
  for (int i = 0; i < 3; ++i) {
    CHECK(client.request("GET", served.entry(k_absent_key), {authorization_header(k_read_token)}).status == 404);
  }
  CHECK(client.request("HEAD", served.entry(bundle.key), {authorization_header(k_read_token)}).status == 200);
  CHECK(client.request("GET", served.entry(bundle.key), {authorization_header(k_read_token), "If-None-Match: " + etag})
            .status == 304);

  // The server counts a request once it has answered it: poll until both kernels are counted.
  json after;
  opcache::test::wait_until(
      [&] {
        after = status_of();
        return after["hits"].get<int>() + after["misses"].get<int>() >= 2;
      },
      10s, "/v1/status to count the hit and the miss");
  CHECK(after["entries"] == 1);
  CHECK(after["bytes"] == bundle.bytes.size());
  CHECK(after["hits"] == 1);    // one client asked for one kernel: GET 200 twice, HEAD 200, GET 304
  CHECK(after["misses"] == 1);  // and for one it did not find: GET 404 three times
  CHECK(after["uptime_seconds"].get<double>() > before["uptime_seconds"].get<double>());
  CHECK("opcache/" + after["version"].get<std::string>() ==
        client.request("GET", served.url("/healthz")).header("server"));

  auto metrics = client.request("GET", served.url("/metrics"), {authorization_header(k_read_token)});
  REQUIRE(metrics.status == 200);
  CHECK(contains(metrics.header("content-type"), "text/plain"));
  CHECK(contains(metrics.header("content-type"), "version=0.0.4"));
  const std::string& text = metrics.body;
  INFO(text);
  CHECK(contains(text, "# TYPE opcache_http_requests_total counter"));
  CHECK(metric_value(text, R"(opcache_http_requests_total{route="entry",method="PUT",status="201"})") == 1);
  CHECK(metric_value(text, R"(opcache_http_requests_total{route="entry",method="GET",status="200"})") == 2);
  CHECK(metric_value(text, R"(opcache_http_requests_total{route="entry",method="GET",status="404"})") == 3);
  CHECK(metric_value(text, R"(opcache_http_requests_total{route="entry",method="GET",status="304"})") == 1);
  CHECK(metric_value(text, R"(opcache_http_requests_total{route="entry",method="HEAD",status="200"})") == 1);
  CHECK(metric_value(text, R"(opcache_http_requests_total{route="status",method="GET",status="200"})") == 2);
  CHECK(metric_value(text, R"(opcache_http_requests_total{route="healthz",method="GET",status="200"})") == 1);
  CHECK(contains(text, "# TYPE opcache_http_request_duration_seconds histogram"));
  CHECK(metric_value(text, R"(opcache_http_request_duration_seconds_bucket{route="entry",le="+Inf"})") == 8);
  CHECK(metric_value(text, R"(opcache_http_request_duration_seconds_count{route="entry"})") == 8);
  CHECK(metric_value(text, R"(opcache_http_request_duration_seconds_sum{route="entry"})") >= 0);
  // Every series names the replica, the host name and first port by default (metric_value reads past it).
  CHECK(std::regex_search(
      text, std::regex(R"(opcache_http_request_duration_seconds_bucket\{route="entry",le="0\.[0-9]+",replica="[^"/]+:[0-9]+"\} [0-9]+)")));
  CHECK(metric_value(text, "opcache_http_received_bytes_total") == static_cast<double>(bundle.bytes.size()));
  CHECK(metric_value(text, "opcache_http_sent_bytes_total") >= static_cast<double>(2 * bundle.bytes.size()));
  CHECK(metric_value(text, "opcache_cache_hits_total") == 4);    // each request
  CHECK(metric_value(text, "opcache_cache_misses_total") == 3);
  CHECK(metric_value(text, R"(opcache_kernel_lookups{result="hit"})") == 1);  // each kernel and client, as /v1/status
  CHECK(metric_value(text, R"(opcache_kernel_lookups{result="miss"})") == 1);
  CHECK(contains(text, "# TYPE opcache_store_entries gauge"));
  CHECK(metric_value(text, "opcache_store_entries") == 1);
  CHECK(metric_value(text, "opcache_store_bytes") == static_cast<double>(bundle.bytes.size()));
  CHECK(metric_value(text, "opcache_store_evictions_total") == 0);
  CHECK(metric_value(text, "opcache_uptime_seconds") > 0);

  // /healthz needs no token (this server has no --anonymous-read); the others do.
  auto health = opcache::test::http_request("GET", served.url("/healthz"));
  CHECK(health.status == 200);
  CHECK(json::parse(health.body) == json{{"status", "ok"}});
  CHECK(opcache::test::http_request("HEAD", served.url("/healthz")).status == 200);
  check_error(opcache::test::http_request("GET", served.url("/v1/status")), 401, "unauthorized");
  check_error(opcache::test::http_request("GET", served.url("/metrics")), 401, "unauthorized");
}

TEST_CASE("server::unknown paths are 404, wrong methods 405 with Allow, bodies on GET 400, bad keys 400") {
  Served served;
  for (const std::string path : {"/", "/v2/entries", "/v1/nothing", "/v1", "/healthz/extra"}) {
    CAPTURE(path);
    check_error(opcache::test::http_request("GET", served.url(path), {authorization_header(k_read_token)}), 404,
                "not_found");
  }
  struct Wrong {
    std::string method, path, allow;
  };
  const std::vector<Wrong> wrong = {
      {"POST", "/v1/entries/" + std::string(k_absent_key), "GET, HEAD, PUT, DELETE"},
      {"PATCH", "/v1/entries/" + std::string(k_absent_key), "GET, HEAD, PUT, DELETE"},
      {"PUT", "/v1/entries/query", "POST"},
      {"POST", "/v1/entries", "GET, HEAD"},
      {"POST", "/v1/status", "GET, HEAD"},
      {"DELETE", "/metrics", "GET, HEAD"},
      {"POST", "/healthz", "GET, HEAD"},
  };
  for (const auto& w : wrong) {
    CAPTURE(w.method);
    CAPTURE(w.path);
    auto response = opcache::test::http_request(w.method, served.url(w.path), {authorization_header(k_admin_token)},
                                                w.method == "POST" || w.method == "PUT" ? "{}" : "");
    check_error(response, 405, "method_not_allowed");
    CHECK(response.header("allow") == w.allow);
  }
  // A GET with a body.
  check_error(
      opcache::test::http_request("GET", served.entry(k_absent_key), {authorization_header(k_read_token)}, "hello"),
      400, "bad_request");
  check_error(
      opcache::test::http_request("GET", served.url("/v1/status"), {authorization_header(k_read_token)}, "hello"), 400,
      "bad_request");
  // Keys that are not 64 lowercase hex characters (docs/protocol.md: 400 invalid_key).
  for (const std::string& key : {std::string("abc"), std::string(64, 'A'), std::string(65, 'a'),
                                std::string(63, 'a') + "g"}) {
    CAPTURE(key);
    check_error(opcache::test::http_request("GET", served.entry(key), {authorization_header(k_read_token)}), 400,
                "invalid_key");
    check_error(
        opcache::test::http_request("PUT", served.entry(key), {authorization_header(k_write_token)}, "not read"), 400,
        "invalid_key");
    check_error(opcache::test::http_request("DELETE", served.entry(key), {authorization_header(k_admin_token)}), 400,
                "invalid_key");
    auto head = opcache::test::http_request("HEAD", served.entry(key), {authorization_header(k_read_token)});
    CHECK(head.status == 400);
    CHECK(head.body.empty());
  }
  CHECK(files_under(served.storage / "objects").empty());
  check_healthy(served);
}

// ===========================================================================
// Uploads that are refused leave nothing behind

TEST_CASE("server::PUT rejects a truncated upload and leaves nothing behind") {
  Served served;
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "square", 24);
  REQUIRE(bundle.bytes.size() > 200);
  {
    RawConnection connection(served.port());
    REQUIRE(connection.send(upload_head(bundle.key, bundle.bytes.size())));
    REQUIRE(connection.send(bundle.bytes.substr(0, bundle.bytes.size() - 100)));
    // The upload is streaming into a temp file of the storage.
    CHECK(eventually([&] { return !files_under(served.storage / "tmp").empty(); }));
    connection.close();
  }
  check_nothing_left(served, bundle.key);
  // Half-closing after a short body is the same: end of stream before Content-Length.
  {
    RawConnection connection(served.port());
    REQUIRE(connection.send(upload_head(bundle.key, bundle.bytes.size())));
    REQUIRE(connection.send(bundle.bytes.substr(0, bundle.bytes.size() / 2)));
    connection.shutdown_send();
    CHECK(connection.wait_closed(5s));
    CHECK(connection.received().empty());  // nothing to answer to a request that never arrived
  }
  check_rejected_upload(served, bundle.key, "incomplete", 2);
  check_healthy(served);
}

TEST_CASE("server::PUT rejects corrupt bundles with 400 corrupt_bundle and leaves nothing behind") {
  Served served;
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "relu", 30);
  const std::string members = member_bytes(bundle);
  // The rebuilt payload is faithful: untouched, it verifies.
  REQUIRE(verifies(with_payload(bundle, members)));

  std::string flipped_member = members;
  flipped_member[members.size() / 3] = static_cast<char>(flipped_member[members.size() / 3] ^ 0x10);
  auto put = opcache::test::http_request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)},
                                         with_payload(bundle, flipped_member));
  check_error(put, 400, "corrupt_bundle");
  CHECK(contains(put.body, "does not match its SHA-256"));

  std::string flipped_payload = bundle.bytes;
  const std::size_t payload_at = opcache::store::k_bundle_header_size + manifest_length(bundle.bytes);
  const std::size_t middle = payload_at + (bundle.bytes.size() - payload_at) / 2;
  flipped_payload[middle] = static_cast<char>(flipped_payload[middle] ^ 0x01);
  check_error(opcache::test::http_request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)},
                                          flipped_payload),
              400, "corrupt_bundle");

  // Complete as far as HTTP goes (Content-Length matches), but not a whole bundle.
  auto cut = opcache::test::http_request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)},
                                         bundle.bytes.substr(0, bundle.bytes.size() - 100));
  check_error(cut, 400, "corrupt_bundle");
  CHECK(contains(cut.body, "truncated"));
  check_error(opcache::test::http_request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)},
                                          "this is not a bundle at all"),
              400, "corrupt_bundle");
  check_error(opcache::test::http_request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)},
                                          bundle.bytes + "trailing"),
              400, "corrupt_bundle");

  check_rejected_upload(served, bundle.key, "corrupt", 5);
  // The intact bundle is still accepted afterwards.
  CHECK(
      opcache::test::http_request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)}, bundle.bytes)
          .status == 201);
}

TEST_CASE("server::PUT of a valid bundle under another key is 409 key_mismatch and stores nothing") {
  Served served;
  TempDir work;
  const TestBundle first = make_bundle(work.path(), "square", 31);
  const TestBundle second = make_bundle(work.path(), "square", 32);
  auto put =
      opcache::test::http_request("PUT", served.entry(second.key), {authorization_header(k_write_token)}, first.bytes);
  check_error(put, 409, "key_mismatch");
  CHECK(contains(put.body, first.key));
  CHECK(contains(put.body, second.key));
  check_nothing_left(served, second.key);
  check_rejected_upload(served, first.key, "key_mismatch", 1);
}

TEST_CASE("server::PUT rejects a bundle whose manifest key was edited to match the URL but not its descriptor") {
  Served served;
  TempDir work;
  const TestBundle real = make_bundle(work.path(), "neg", 33);
  const TestBundle other = make_bundle(work.path(), "neg", 34);
  // Re-encoding the unchanged manifest gives the same bytes, so only the key differs below.
  REQUIRE(with_manifest(real, real.manifest) == real.bytes);
  json edited = real.manifest;
  edited["key"] = other.key;
  const std::string forged = with_manifest(real, edited);
  auto put = opcache::test::http_request("PUT", served.entry(other.key), {authorization_header(k_write_token)}, forged);
  check_error(put, 400, "corrupt_bundle");
  CHECK(contains(put.body, "does not match its descriptor and scenario"));
  check_nothing_left(served, other.key);
}

TEST_CASE("server::PUT above --max-body is 413 whether the body is sent or only announced") {
  Served served({"--max-body", "4096"});
  TempDir work;
  const TestBundle big = make_bundle(work.path(), "square", 40, opcache::test::k_test_scenario, 16384);
  const TestBundle small = make_bundle(work.path(), "relu", 41);
  REQUIRE(big.bytes.size() > 4096);
  REQUIRE(small.bytes.size() <= 4096);

  SUBCASE("announced by Content-Length, body never sent") {
    RawConnection connection(served.port());
    REQUIRE(connection.send(upload_head(big.key, big.bytes.size())));
    const std::string response = connection.receive_response(5s);
    CHECK(opcache::test::raw_status(response) == 413);
    CHECK(raw_error_code(response) == "payload_too_large");
    CHECK(connection.wait_closed(5s));  // the server does not wait for a body it refused
  }
  SUBCASE("sent by a client that honours Expect: 100-continue") {
    auto put = opcache::test::http_request("PUT", served.entry(big.key),
                                           {authorization_header(k_write_token), "Expect: 100-continue"}, big.bytes);
    check_error(put, 413, "payload_too_large");
  }
  SUBCASE("sent at once by a client that reads the answer only after sending") {
    // The server answers from the header and then reads and discards the
    // body until the client is done. Closing with 16 MiB unread instead would
    // reset the connection: the client's send fails (and on a real network
    // the answer can be lost).
    RawConnection connection(served.port());
    const std::string huge = big.bytes + std::string(16u << 20, 'x');
    CHECK(connection.send(upload_head(big.key, huge.size()) + huge));
    const std::string response = connection.receive_response(5s);
    CHECK(opcache::test::raw_status(response) == 413);
    CHECK(raw_error_code(response) == "payload_too_large");
    CHECK(raw_has_header(response, "Connection: close"));
    CHECK(connection.wait_closed(5s));
  }
  check_rejected_upload(served, big.key, "too_large", 1);
  // A bundle under the limit is accepted.
  CHECK(opcache::test::http_request("PUT", served.entry(small.key), {authorization_header(k_write_token)}, small.bytes)
            .status == 201);
}

TEST_CASE("server::PUT without Content-Length is 411, chunked or not") {
  Served served;
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "square", 42);
  const std::string head = "PUT /v1/entries/" + bundle.key + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                           authorization_header(k_write_token) + "\r\n";
  {
    RawConnection connection(served.port());
    char size[32];
    std::snprintf(size, sizeof size, "%zx", bundle.bytes.size());
    REQUIRE(connection.send(head + "Transfer-Encoding: chunked\r\n\r\n"));
    connection.send(std::string(size) + "\r\n" + bundle.bytes + "\r\n0\r\n\r\n");
    const std::string response = connection.receive_response(5s);
    CHECK(opcache::test::raw_status(response) == 411);
    CHECK(raw_error_code(response) == "length_required");
    CHECK(connection.wait_closed(5s));
  }
  {
    RawConnection connection(served.port());
    REQUIRE(connection.send(head + "\r\n"));
    const std::string response = connection.receive_response(5s);
    CHECK(opcache::test::raw_status(response) == 411);
    CHECK(raw_error_code(response) == "length_required");
  }
  check_nothing_left(served, bundle.key);
}

// Timeouts are tested by what ends a connection, not by how fast: every other
// timeout is set far beyond the one under test, and a connection gets a
// minute (a bound that only catches a hang) to be closed by it. A lower bound
// on the time is safe when the clock starts before the server's does.

TEST_CASE("server::PUT abandoned mid-stream is dropped after --request-timeout and leaves nothing behind") {
  // Within a minute only the request timeout (2 s) can end the upload: the idle timeout is ten minutes.
  Served served({"--request-timeout", "2", "--idle-timeout", "600"});
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "relu", 43, opcache::test::k_test_scenario, 4096);
  const std::size_t half = bundle.bytes.size() / 2;
  const auto start = Clock::now();  // before the request's clock starts on the server
  RawConnection connection(served.port());
  REQUIRE(connection.send(upload_head(bundle.key, bundle.bytes.size())));
  REQUIRE(connection.send(bundle.bytes.substr(0, half)));
  SUBCASE("the client stops sending") {
    CHECK(connection.wait_closed(60s));
  }
  SUBCASE("the client trickles the rest, a few bytes at a time") {
    // Every piece arrives well within any timeout, but the request as a whole
    // does not: at 4 bytes every 250 ms the rest takes more than the minute.
    REQUIRE((bundle.bytes.size() - half) / 4 * 250ms > 60s);
    bool closed = false;
    for (std::size_t at = half; at < bundle.bytes.size() && seconds_since(start) < 60; at += 4) {
      if (!connection.send(bundle.bytes.substr(at, 4)) || connection.wait_closed(250ms)) {
        closed = true;
        break;
      }
    }
    CHECK(closed);
  }
  CHECK(seconds_since(start) >= 1.9);    // the request timeout, not sooner
  CHECK(connection.received().empty());  // nothing to answer to a request that never arrived
  // Counted as incomplete, which only an upload streaming into its temp file
  // is; check_nothing_left finds that file gone.
  check_rejected_upload(served, bundle.key, "incomplete", 1);
  check_healthy(served);
}

TEST_CASE("server::garbage instead of a request gets 400 or a closed connection, and the server keeps serving") {
  Served served;
  const std::vector<std::string> garbage = {
      std::string("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 11),  // a TLS ClientHello start
      "GARBAGE\r\n\r\n",
      "GET\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nNo colon here\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
      std::string(3000, '\0'),
  };
  for (const auto& bytes : garbage) {
    CAPTURE(bytes.substr(0, 20));
    RawConnection connection(served.port());
    connection.send(bytes);
    CHECK(connection.wait_closed(5s));
    const int status = opcache::test::raw_status(connection.received());
    CHECK((status == 0 || status == 400));
  }
  check_healthy(served);
}

// ===========================================================================
// Access control

TEST_CASE("server::bearer tokens: 401 without or with an unknown token, 403 below the scope, higher scopes include lower") {
  // Tokens-file lines from `opcache serve --hash-token`, and one written by hand.
  auto hashed_reader = opcache::test::run_cli(
      {"serve", "--hash-token", "--token-name", "reader", "--token-scopes", "read"},
      [] { auto o = hermetic(); o.stdin_data = std::string(k_read_token) + "\n"; return o; }());
  auto hashed_writer = opcache::test::run_cli(
      {"serve", "--hash-token", "--token-name", "writer", "--token-scopes", "read,write"},
      [] { auto o = hermetic(); o.stdin_data = std::string(k_write_token) + "\n"; return o; }());
  REQUIRE(hashed_reader.exit_code == 0);
  REQUIRE(hashed_writer.exit_code == 0);
  CHECK(hashed_reader.out == opcache::base::sha256_hex(k_read_token) + " reader read\n");
  CHECK(hashed_writer.out == opcache::base::sha256_hex(k_write_token) + " writer read,write\n");
  CHECK_FALSE(contains(hashed_reader.out + hashed_reader.err, k_read_token));
  Served served({}, hashed_reader.out + hashed_writer.out + token_line(k_admin_token, "boss", "admin"));
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "square", 50);
  const std::string url = served.entry(bundle.key);
  int requests = 0;
  auto request = [&](const std::string& method, const std::string& target, std::vector<std::string> headers,
                     const std::string& body = {}) {
    ++requests;
    return opcache::test::http_request(method, target, headers, body);
  };

  auto anonymous = request("GET", url, {});
  check_error(anonymous, 401, "unauthorized");
  CHECK(anonymous.header("www-authenticate") == "Bearer realm=\"opcache\"");
  auto unknown = request("GET", url, {authorization_header("not-a-known-token")});
  check_error(unknown, 401, "unauthorized");
  CHECK(unknown.header("www-authenticate") == "Bearer realm=\"opcache\"");
  check_error(request("GET", url, {"Authorization: Basic cmVhZGVyOnNlY3JldA=="}), 401, "unauthorized");
  check_error(request("GET", url, {"Authorization: Bearer"}), 401, "unauthorized");

  auto read_put = request("PUT", url, {authorization_header(k_read_token)}, bundle.bytes);
  check_error(read_put, 403, "forbidden");
  CHECK_FALSE(contains(read_put.body, k_read_token));
  check_error(request("GET", url, {authorization_header(k_read_token)}), 404, "not_found");

  auto write_put = request("PUT", url, {authorization_header(k_write_token)}, bundle.bytes);
  CHECK(write_put.status == 201);
  auto write_get = request("GET", url, {authorization_header(k_write_token)});  // write includes read
  CHECK(write_get.status == 200);
  CHECK(write_get.body == bundle.bytes);
  CHECK(request("POST", served.url("/v1/entries/query"), {authorization_header(k_write_token)},
                json{{"keys", {bundle.key}}}.dump())
            .status == 200);
  CHECK(request("GET", served.url("/v1/entries"), {authorization_header(k_read_token)}).status == 200);

  check_error(request("DELETE", url, {authorization_header(k_write_token)}), 403, "forbidden");
  check_error(request("DELETE", url, {authorization_header(k_read_token)}), 403, "forbidden");
  auto deleted = request("DELETE", url, {authorization_header(k_admin_token)});
  CHECK(deleted.status == 200);
  CHECK(json::parse(deleted.body, nullptr, false) == json{{"key", bundle.key}, {"deleted", true}});
  check_error(request("GET", url, {authorization_header(k_admin_token)}), 404, "not_found");
  check_error(request("DELETE", url, {authorization_header(k_admin_token)}), 404, "not_found");
  CHECK(request("PUT", url, {authorization_header(k_admin_token)}, bundle.bytes).status ==
        201);  // admin includes write

  CHECK(request("GET", served.url("/healthz"), {}).status == 200);
  check_error(request("GET", served.url("/v1/status"), {}), 401, "unauthorized");

  // One access-log line per request, with the token's name and never the token.
  REQUIRE_MESSAGE(eventually([&] { return static_cast<int>(access_lines(served.server->log_text()).size()) == requests; }),
                  served.server->log_text());
  const std::string log = served.server->log_text();
  for (const char* secret : {k_read_token, k_write_token, k_admin_token, "not-a-known-token"}) {
    CHECK_MESSAGE(!contains(log, secret), "the access log shows a token: " << secret);
  }
  const auto lines = access_lines(log);
  auto logged = [&](const std::string& method, const std::string& target, int status, const std::string& name) {
    return std::count_if(lines.begin(), lines.end(), [&](const std::string& line) {
      return contains(line, " " + method + " " + target + " " + std::to_string(status) + " ") &&
             contains(line, "token=" + name);
    });
  };
  const std::string path = "/v1/entries/" + bundle.key;
  CHECK(logged("GET", path, 401, "-") == 4);
  CHECK(logged("PUT", path, 403, "reader") == 1);
  CHECK(logged("PUT", path, 201, "writer") == 1);
  CHECK(logged("GET", path, 200, "writer") == 1);
  CHECK(logged("DELETE", path, 403, "writer") == 1);
  CHECK(logged("DELETE", path, 200, "boss") == 1);
  CHECK(logged("PUT", path, 201, "boss") == 1);
  CHECK(logged("GET", "/healthz", 200, "-") == 1);
  for (const auto& line : lines) {
    CAPTURE(line);
    CHECK(std::regex_search(line, std::regex(R"( (GET|PUT|DELETE|POST|HEAD) /\S* \d{3} in=\d+ out=\d+ \d+\.\d{3}ms token=\S+$)")));
  }
  // The upload's line counts the bundle's bytes in.
  CHECK(std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return contains(line, " PUT " + path + " 201 in=" + std::to_string(bundle.bytes.size()) + " ");
  }));

  // SIGHUP reloads the tokens file; a broken file keeps the tokens loaded before.
  opcache::test::write_text(served.tokens, opcache::test::read_text(served.tokens) +
                                               token_line("late-secret-0a1b2c", "late", "read"));
  served.server->signal(SIGHUP);
  REQUIRE(eventually([&] { return contains(served.server->log_text(), "reloaded 4 tokens"); }));
  CHECK(opcache::test::http_request("GET", served.url("/v1/status"), {authorization_header("late-secret-0a1b2c")})
            .status == 200);
  opcache::test::write_text(served.tokens, "this line is not a token\n");
  served.server->signal(SIGHUP);
  REQUIRE(eventually([&] { return contains(served.server->log_text(), "tokens not reloaded, keeping the old ones"); }));
  CHECK(opcache::test::http_request("GET", served.url("/v1/status"), {authorization_header("late-secret-0a1b2c")})
            .status == 200);
  CHECK(opcache::test::http_request("GET", served.url("/v1/status"), {authorization_header(k_read_token)}).status ==
        200);
}

TEST_CASE("server::--no-anonymous-read turns off anonymous_read = on of the [serve] file") {
  TempDir temp;
  const auto config = temp / "serve.conf";
  opcache::test::write_text(config, "[serve]\nanonymous_read = on\n");
  Served from_file({"--config", config.string()});
  CHECK(opcache::test::http_request("GET", from_file.url("/v1/status")).status == 200);
  Served overridden({"--config", config.string(), "--no-anonymous-read"});
  check_error(opcache::test::http_request("GET", overridden.url("/v1/status")), 401, "unauthorized");
}

TEST_CASE("server::--anonymous-read serves reads without a token but writes still need one") {
  Served served({"--anonymous-read"});
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "neg", 51);
  REQUIRE(
      opcache::test::http_request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)}, bundle.bytes)
          .status == 201);

  auto get = opcache::test::http_request("GET", served.entry(bundle.key));
  CHECK(get.status == 200);
  CHECK(get.body == bundle.bytes);
  CHECK(opcache::test::http_request("HEAD", served.entry(bundle.key)).status == 200);
  check_error(opcache::test::http_request("GET", served.entry(k_absent_key)), 404, "not_found");
  auto listed = opcache::test::http_request("GET", served.url("/v1/entries"));
  CHECK(listed.status == 200);
  CHECK(checked_json(listed, "list-response.schema.json")["entries"].size() == 1);
  auto query = opcache::test::http_request("POST", served.url("/v1/entries/query"), {},
                                           json{{"keys", {bundle.key}}}.dump());
  CHECK(query.status == 200);
  CHECK(checked_json(query, "query-response.schema.json")["present"] == json{bundle.key});
  CHECK(opcache::test::http_request("GET", served.url("/v1/status")).status == 200);
  CHECK(opcache::test::http_request("GET", served.url("/metrics")).status == 200);

  TempDir other;
  const TestBundle second = make_bundle(other.path(), "neg", 52);
  auto put = opcache::test::http_request("PUT", served.entry(second.key), {}, second.bytes);
  check_error(put, 401, "unauthorized");
  CHECK(put.header("www-authenticate") == "Bearer realm=\"opcache\"");
  check_error(opcache::test::http_request("DELETE", served.entry(bundle.key)), 401, "unauthorized");
  check_error(
      opcache::test::http_request("PUT", served.entry(second.key), {authorization_header(k_read_token)}, second.bytes),
      403, "forbidden");
  CHECK(opcache::test::http_request("GET", served.entry(second.key)).status == 404);
  REQUIRE(eventually([&] {
    const auto lines = access_lines(served.server->log_text());
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
      return contains(line, " GET /v1/entries/" + bundle.key + " 200 ") && contains(line, "token=-");
    });
  }));
}

TEST_CASE("server::--access-log off writes no request lines, and the events still to standard error") {
  TempDir dir;
  // "off" is no file name here: nothing named so appears in the server's
  // working directory (this process's).
  const fs::path stray = fs::current_path() / "off";
  const bool stray_before = fs::exists(stray);
  ServerProcess server(dir / "storage", {"--anonymous-read", "--access-log", "off", "--access-log-flush", "0"});
  const std::string absent = opcache::base::sha256_hex("absent");
  for (int i = 0; i < 3; ++i) {
    CHECK(opcache::test::http_request("GET", server.base_url() + "/v1/entries/" + absent).status == 404);
  }
  CHECK(opcache::test::http_request("GET", server.base_url() + "/healthz").status == 200);
  CHECK(server.stop() == 0);
  const std::string log = server.log_text();
  CHECK(contains(log, "listening on"));
  CHECK(contains(log, "stopped"));
  CHECK(access_lines(log).empty());
  CHECK(fs::exists(stray) == stray_before);
  // The same server with the log on standard error writes one line per request.
  ServerProcess logging(dir / "storage", {"--anonymous-read", "--access-log-flush", "0"});
  CHECK(opcache::test::http_request("GET", logging.base_url() + "/v1/entries/" + absent).status == 404);
  CHECK(logging.stop() == 0);
  CHECK(access_lines(logging.log_text()).size() == 1);
}

TEST_CASE("server::a malformed tokens file stops opcache serve with exit 2, naming the file and line") {
  TempDir dir;
  struct Case {
    std::string what, text, line, detail;
  };
  const std::string good = token_line(k_read_token, "reader", "read");
  const std::vector<Case> cases = {
      {"a line with two fields", "# tokens\n" + good + opcache::base::sha256_hex("x") + " lonely\n", ":3:",
       "expected"},
      {"the token itself instead of its hash", "\n" + std::string(k_write_token) + " writer write\n", ":2:",
       "not the token itself"},
      {"an unknown scope", opcache::base::sha256_hex("y") + " root superuser\n", ":1:", "unknown scope"},
      {"an extra field", good + opcache::base::sha256_hex("z") + " a read extra\n", ":2:", "expected"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    const fs::path tokens = dir / ("tokens-" + std::to_string(&c - cases.data()));
    opcache::test::write_text(tokens, c.text);
    // `timeout` guards against a server that starts anyway.
    auto run = opcache::test::run_process({"timeout", "20", opcache::test::cli_path(), "serve", "--listen",
                                           "127.0.0.1:0", "--storage", (dir / "storage").string(), "--tokens",
                                           tokens.string()},
                                          hermetic());
    INFO("stderr: " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(contains(run.err, tokens.string() + c.line));
    CHECK(contains(run.err, c.detail));
    CHECK_FALSE(contains(run.err, k_write_token));
  }
  auto empty = opcache::test::run_cli({"serve", "--hash-token"}, hermetic());
  CHECK(empty.exit_code == 2);
  auto bad_scope = opcache::test::run_cli({"serve", "--hash-token", "--token-scopes", "root"},
                                          [] { auto o = hermetic(); o.stdin_data = "t0ken\n"; return o; }());
  CHECK(bad_scope.exit_code == 2);
  CHECK(contains(bad_scope.err, "unknown scope"));
}

// ===========================================================================
// TLS

TEST_CASE("server::TLS serves HTTPS with a certificate made in the test and plain HTTP to the TLS port fails") {
  OPCACHE_SKIP_IF(!have_openssl(), "the openssl command is not installed");
  TempDir dir;
  make_certificate(dir / "cert.pem", dir / "key.pem", "opcache-test");
  Served served({"--tls-cert", (dir / "cert.pem").string(), "--tls-key", (dir / "key.pem").string()});
  REQUIRE(contains(served.server->base_url(), "https://"));
  HttpOptions trusted;
  trusted.ca_file = (dir / "cert.pem").string();

  auto health = opcache::test::http_request("GET", served.url("/healthz"), {}, {}, trusted);
  CHECK(health.status == 200);
  const TestBundle bundle = make_bundle(dir.path(), "square", 60);
  auto put = opcache::test::http_request("PUT", served.entry(bundle.key), {authorization_header(k_write_token)},
                                         bundle.bytes, trusted);
  CHECK(put.status == 201);
  auto get =
      opcache::test::http_request("GET", served.entry(bundle.key), {authorization_header(k_read_token)}, {}, trusted);
  CHECK(get.status == 200);
  CHECK(get.body == bundle.bytes);
  CHECK(get.header("etag") == "\"" + bundle.digest + "\"");

  // Without trusting the certificate, the client refuses the server.
  auto untrusted = opcache::test::http_request("GET", served.url("/healthz"));
  CHECK(untrusted.status == 0);
  CHECK_FALSE(untrusted.error.empty());
  // Plain HTTP to the TLS port gets no HTTP response.
  auto plain = opcache::test::http_request("GET", "http://127.0.0.1:" + std::to_string(served.port()) + "/healthz");
  CHECK(plain.status == 0);
  CHECK_FALSE(plain.error.empty());
  CHECK(opcache::test::http_request("GET", served.url("/healthz"), {}, {}, trusted).status == 200);
}

TEST_CASE("server::SIGHUP reloads the TLS certificate for new connections and a broken one keeps the old") {
  OPCACHE_SKIP_IF(!have_openssl(), "the openssl command is not installed");
  TempDir dir;
  const fs::path cert = dir / "cert.pem";
  const fs::path key = dir / "key.pem";
  make_certificate(dir / "old-cert.pem", dir / "old-key.pem", "opcache-old");
  make_certificate(dir / "new-cert.pem", dir / "new-key.pem", "opcache-new");
  fs::copy_file(dir / "old-cert.pem", cert);
  fs::copy_file(dir / "old-key.pem", key);
  Served served({"--tls-cert", cert.string(), "--tls-key", key.string()});
  HttpOptions old_ca;
  old_ca.ca_file = (dir / "old-cert.pem").string();
  HttpOptions new_ca;
  new_ca.ca_file = (dir / "new-cert.pem").string();
  new_ca.cert_info = true;

  HttpClient kept;  // a connection made before the reload
  auto first = kept.request("GET", served.url("/healthz"), {}, {}, old_ca);
  REQUIRE(first.status == 200);
  CHECK(first.new_connections == 1);

  // Replace both files (each atomically), then SIGHUP.
  fs::copy_file(dir / "new-key.pem", dir / "key.tmp");
  fs::rename(dir / "key.tmp", key);
  fs::copy_file(dir / "new-cert.pem", dir / "cert.tmp");
  fs::rename(dir / "cert.tmp", cert);
  served.server->signal(SIGHUP);
  REQUIRE_MESSAGE(eventually([&] { return contains(served.server->log_text(), "reloaded the TLS certificate"); }),
                  served.server->log_text());

  auto fresh = opcache::test::http_request("GET", served.url("/healthz"), {}, {}, new_ca);
  CHECK(fresh.status == 200);
  CHECK(without_whitespace(fresh.peer_certificate) == without_whitespace(opcache::test::read_text(dir / "new-cert.pem")));
  auto old_trust = opcache::test::http_request("GET", served.url("/healthz"), {}, {}, old_ca);
  CHECK(old_trust.status == 0);  // new connections no longer present the old certificate
  // The connection made before the reload keeps working.
  auto reused = kept.request("GET", served.url("/healthz"), {}, {}, old_ca);
  CHECK(reused.status == 200);
  CHECK(reused.new_connections == 0);

  // A broken certificate is not loaded; the server keeps the one it has.
  opcache::test::write_text(cert, "-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n");
  served.server->signal(SIGHUP);
  REQUIRE_MESSAGE(eventually([&] {
                    return contains(served.server->log_text(), "TLS certificate not reloaded, keeping the old one");
                  }),
                  served.server->log_text());
  auto after_broken = opcache::test::http_request("GET", served.url("/healthz"), {}, {}, new_ca);
  CHECK(after_broken.status == 200);
  CHECK(without_whitespace(after_broken.peer_certificate) ==
        without_whitespace(opcache::test::read_text(dir / "new-cert.pem")));
  CHECK_FALSE(served.server->exited());
}

// ===========================================================================
// Limits and timeouts

TEST_CASE("server::a connection that sends nothing is closed after --idle-timeout, and so is an idle keep-alive one") {
  // Within a minute only the idle timeout (1 s) can close these: a request may take ten.
  Served served({"--idle-timeout", "1", "--request-timeout", "600"});
  {
    const auto start = Clock::now();  // before the server's idle clock starts
    RawConnection silent(served.port());
    CHECK(silent.wait_closed(60s));
    CHECK(seconds_since(start) >= 0.9);  // the idle timeout, not sooner
    CHECK(silent.received().empty());
  }
  {
    const auto start = Clock::now();  // before the idle clock that follows the answers
    RawConnection kept(served.port());
    // Two pipelined requests in one write: both are answered, in order.
    REQUIRE(kept.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                      "GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const std::string responses = kept.receive(60s, "\"not_found\"");
    INFO("responses: " << responses);
    CHECK(opcache::test::raw_status(responses) == 200);
    const auto second = responses.find("HTTP/1.1 404 ");
    CHECK(second != std::string::npos);
    CHECK(responses.find("{\"status\":\"ok\"}") < second);
    CHECK_FALSE(contains(responses, "Connection: close"));  // kept alive: the idle timeout closes it
    CHECK(kept.wait_closed(60s));
    CHECK(seconds_since(start) >= 0.9);
  }
  check_healthy(served);
}

TEST_CASE("server::a slowloris header (one byte per second) is cut off by --request-timeout") {
  // A byte arrives every second and the idle timeout is ten minutes: within a
  // minute only the request timeout (2 s) can cut the header, which never ends.
  Served served({"--request-timeout", "2", "--idle-timeout", "600"});
  const auto start = Clock::now();  // before the request's clock starts on the server
  RawConnection slow(served.port());
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + std::string(64, 'a');
  bool closed = false;
  for (std::size_t i = 0; seconds_since(start) < 60; ++i) {
    // After the request line and the slow header's 64 bytes, more of it.
    if (!slow.send(i < request.size() ? request.substr(i, 1) : "a") || slow.wait_closed(1s)) {
      closed = true;
      break;
    }
  }
  const double elapsed = seconds_since(start);
  CHECK_MESSAGE(closed, "the slow header was not cut off within " << elapsed << " s (--request-timeout 2)");
  CHECK(elapsed >= 1.9);  // the request timeout, not sooner
  CHECK(slow.received().empty());
  check_healthy(served);
}

TEST_CASE("server::a request header above the limit gets 431 or a closed connection, and small bodies are bounded too") {
  Served served;
  {
    RawConnection big(served.port());
    big.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
    const std::string response = big.receive_response(5s);
    INFO("response: " << response);
    CHECK(opcache::test::raw_status(response) == 431);  // docs/protocol.md: 431 header_too_large
    CHECK(raw_error_code(response) == "header_too_large");
    CHECK(big.wait_closed(5s));
  }
  {
    // A large header under the limit (16 KiB by default) is fine.
    RawConnection fine(served.port());
    REQUIRE(fine.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(8000, 'a') + "\r\n\r\n"));
    CHECK(opcache::test::raw_status(fine.receive_response(5s)) == 200);
  }
  // In-memory bodies (queries) are bounded at 2 MiB: 1.5 MiB is fine, 3 MiB is not.
  auto padded_query = opcache::test::http_request(
      "POST", served.url("/v1/entries/query"), {authorization_header(k_read_token)},
      "{\"keys\": [" + std::string(3 << 19, ' ') + "\"" + std::string(k_absent_key) + "\"]}");
  CHECK(padded_query.status == 200);
  CHECK(checked_json(padded_query, "query-response.schema.json")["missing"] == json{k_absent_key});
  auto huge_query = opcache::test::http_request("POST", served.url("/v1/entries/query"),
                                                {authorization_header(k_read_token), "Expect: 100-continue"},
                                                "{\"keys\": [" + std::string(3 << 20, ' ') + "]}");
  check_error(huge_query, 413, "payload_too_large");
  auto huge_at_once = opcache::test::http_request("POST", served.url("/v1/entries/query"),
                                                  {authorization_header(k_read_token), "Expect:"},
                                                  "{\"keys\": [" + std::string(3 << 20, ' ') + "]}");
  check_error(huge_at_once, 413, "payload_too_large");
  check_healthy(served);
}

TEST_CASE("server::with --max-inflight 1, a request for the worker pool while an upload is in flight gets 429 with Retry-After, an entry read does not") {
  Served served({"--max-inflight", "1"});
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "relu", 70);
  RawConnection upload(served.port());
  REQUIRE(upload.send(upload_head(bundle.key, bundle.bytes.size())));
  REQUIRE(upload.send(bundle.bytes.substr(0, bundle.bytes.size() / 2)));
  // The temp file exists once the upload holds the only slot.
  REQUIRE(eventually([&] { return !files_under(served.storage / "tmp").empty(); }));

  auto busy = opcache::test::http_request("GET", served.url("/v1/status"), {authorization_header(k_read_token)});
  check_error(busy, 429, "too_many_requests");
  CHECK(busy.header("retry-after") == "1");
  // Reads of entries in a local store are answered on the I/O thread and
  // need no slot: a miss, since the upload is not stored yet.
  check_error(opcache::test::http_request("GET", served.entry(bundle.key), {authorization_header(k_read_token)}), 404,
              "not_found");
  CHECK(opcache::test::http_request("GET", served.url("/healthz")).status == 200);  // needs no slot

  REQUIRE(upload.send(bundle.bytes.substr(bundle.bytes.size() / 2)));
  const std::string response = upload.receive_response(5s);
  CHECK(opcache::test::raw_status(response) == 201);
  CHECK(opcache::test::http_request("GET", served.url("/v1/status"), {authorization_header(k_read_token)}).status ==
        200);
  auto get = opcache::test::http_request("GET", served.entry(bundle.key), {authorization_header(k_read_token)});
  CHECK(get.status == 200);
  CHECK(get.body == bundle.bytes);
}

// ===========================================================================
// Shutdown and concurrency

TEST_CASE("server::SIGTERM finishes an upload in flight, refuses new connections, closes idle ones and exits 0") {
  // Ten minutes of idle timeout: within the half minute given to the stop,
  // only the stop can close the idle connection.
  Served served({"--idle-timeout", "600"});
  TempDir work;
  const TestBundle bundle = make_bundle(work.path(), "square", 80);

  RawConnection idle(served.port());
  REQUIRE(idle.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  REQUIRE(opcache::test::raw_status(idle.receive_response(5s)) == 200);

  // A request whose header has begun is not idle: it is answered, with 503.
  RawConnection begun(served.port());
  REQUIRE(begun.send("GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n"));

  RawConnection upload(served.port());
  REQUIRE(upload.send(upload_head(bundle.key, bundle.bytes.size())));
  REQUIRE(upload.send(bundle.bytes.substr(0, bundle.bytes.size() / 2)));
  REQUIRE(eventually([&] { return !files_under(served.storage / "tmp").empty(); }));

  served.server->signal(SIGTERM);
  CHECK(eventually([&] { return !RawConnection::can_connect(served.port()); }, 30s));
  CHECK(idle.wait_closed(30s));
  CHECK_FALSE(served.server->exited());

  REQUIRE(begun.send(authorization_header(k_read_token) + "\r\n\r\n"));
  const std::string refused = begun.receive_response(5s);
  INFO("refused: " << refused);
  CHECK(opcache::test::raw_status(refused) == 503);
  CHECK(raw_error_code(refused) == "unavailable");
  CHECK(raw_has_header(refused, "Connection: close"));
  CHECK(begun.wait_closed(30s));

  REQUIRE(upload.send(bundle.bytes.substr(bundle.bytes.size() / 2)));
  const std::string response = upload.receive_response(5s);
  INFO(response);
  CHECK(opcache::test::raw_status(response) == 201);
  CHECK(raw_has_header(response, "Connection: close"));
  json body = json::parse(raw_body(response), nullptr, false);
  CHECK(body.value("stored", false) == true);

  const auto exit_code = served.server->wait_exit(10s);
  REQUIRE_MESSAGE(exit_code.has_value(), served.server->log_text());
  CHECK(*exit_code == 0);
  const std::string log = served.server->log_text();
  CHECK(contains(log, "stopping: finishing requests in flight"));
  CHECK(contains(log, "stopped"));

  // The upload is stored for good.
  const fs::path out = work / "out";
  auto cli = opcache::test::run_cli({"get", "--cache-dir", served.storage.string(), bundle.key, "--out", out.string()},
                                    hermetic());
  CHECK(cli.exit_code == 0);
  CHECK(opcache::test::read_text(out / bundle.kernel.object.filename()) ==
        opcache::test::read_text(bundle.kernel.object));
}

TEST_CASE("server::SIGTERM with two I/O threads answers an upload in flight on each of them") {
  // Connections are handed to the I/O threads in turn, so two consecutive
  // ones land on different threads; the answer of each comes back from the
  // worker pool to a thread that must still be running.
  Served served({"--threads", "2"});
  TempDir work;
  std::vector<TestBundle> bundles = {make_bundle(work.path(), "abs", 90), make_bundle(work.path(), "neg", 91)};
  std::vector<std::unique_ptr<RawConnection>> uploads;
  for (const auto& bundle : bundles) {
    uploads.push_back(std::make_unique<RawConnection>(served.port()));
    REQUIRE(uploads.back()->send(upload_head(bundle.key, bundle.bytes.size())));
    REQUIRE(uploads.back()->send(bundle.bytes.substr(0, bundle.bytes.size() / 2)));
  }
  REQUIRE(eventually([&] { return files_under(served.storage / "tmp").size() >= 2; }));
  served.server->signal(SIGTERM);
  CHECK(eventually([&] { return !RawConnection::can_connect(served.port()); }, 30s));
  for (std::size_t i = 0; i < bundles.size(); ++i) {
    REQUIRE(uploads[i]->send(bundles[i].bytes.substr(bundles[i].bytes.size() / 2)));
    const std::string response = uploads[i]->receive_response(5s);
    INFO("upload " << i << ": " << response);
    CHECK(opcache::test::raw_status(response) == 201);
  }
  const auto exit_code = served.server->wait_exit(10s);
  REQUIRE_MESSAGE(exit_code.has_value(), served.server->log_text());
  CHECK(*exit_code == 0);
}

TEST_CASE("server::200 concurrent keep-alive connections get byte-exact bundles with a bounded thread count") {
  constexpr int k_connections = 200;
  constexpr int k_io_threads = 2;
  constexpr int k_workers = 4;
  Served served({"--threads", std::to_string(k_io_threads), "--workers", std::to_string(k_workers)});
  TempDir work;
  std::vector<TestBundle> bundles;
  for (int i = 0; i < 5; ++i) {
    bundles.push_back(make_bundle(work.path(), i % 2 ? "relu" : "square", 90 + i));
    REQUIRE(opcache::test::http_request("PUT", served.entry(bundles.back().key), {authorization_header(k_write_token)},
                                        bundles.back().bytes)
                .status == 201);
  }

  std::atomic<int> ok{0};
  std::atomic<int> wrong{0};
  std::atomic<int> reconnects{0};
  std::latch connected(k_connections + 1);
  std::latch measured(1);
  std::vector<std::thread> clients;
  for (int i = 0; i < k_connections; ++i) {
    clients.emplace_back([&, i] {
      HttpClient client;
      for (int round = 0; round < 3; ++round) {
        const TestBundle& bundle = bundles[static_cast<std::size_t>(i + round) % bundles.size()];
        auto get = client.request("GET", served.entry(bundle.key), {authorization_header(k_read_token)});
        (get.status == 200 && get.body == bundle.bytes ? ok : wrong)++;
        if (round > 0 && get.new_connections != 0) {
          ++reconnects;
        }
        if (round == 0) {
          connected.count_down();
          measured.wait();  // every connection stays open while the server is looked at
        }
      }
    });
  }
  connected.arrive_and_wait();
  const int sockets = socket_count(served.server->pid());
  const int threads = thread_count(served.server->pid());
  measured.count_down();
  for (auto& thread : clients) {
    thread.join();
  }
  CHECK(ok == 3 * k_connections);
  CHECK(wrong == 0);
  CHECK(reconnects == 0);  // keep-alive: one connection per client
  CHECK(sockets >= k_connections);
  INFO("threads: " << threads);
  CHECK(threads > 0);
  CHECK(threads <= k_io_threads + k_workers + 3);
  check_healthy(served);
}
