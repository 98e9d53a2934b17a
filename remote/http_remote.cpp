// The http(s):// remote: an opcache server's API v1 (docs/protocol.md).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <functional>
#include <chrono>
#include <set>

#include <nlohmann/json.hpp>

#include "remote/batch_stream_sink.hpp"
#include "remote/bucket_download.hpp"
#include "remote/bundle_stream.hpp"
#include "remote/request_engine.hpp"
#include "remote/remote_store.hpp"
#include "remote/signature_header.hpp"
#include "base/base64.hpp"
#include "base/file_io.hpp"
#include "base/percent_coding.hpp"
#include "base/random_token.hpp"
#include "base/try.hpp"
#include "store/key.hpp"

namespace opcache::remote {

namespace {

using json = nlohmann::json;

constexpr const char* k_what = "opcache server";
constexpr std::size_t k_query_batch = 10000;  // the server's per-query limit
constexpr curl_off_t k_max_bundle_bytes = 2ll << 30;
constexpr std::size_t k_max_error_body = 64 * 1024;  // of an error response kept for its message
constexpr long k_batch_timeout_factor = 10;  // a batch request's timeout, in the remote's timeouts
constexpr std::size_t k_manifest_batch = 1000;  // the server's per-request limit of POST /v1/manifests/fetch
// An answer of POST /v1/manifests/fetch: the server stops adding manifests
// at 16 MiB, and one manifest is at most store::k_max_manifest_bytes.
constexpr curl_off_t k_max_manifest_batch_bytes = 32 * 1024 * 1024;

// One request and its response body, attempted as often as the retry policy
// says. Only a 200 body goes to the download descriptor: an error body (a
// 401's explanation, a 500 page) is kept in memory for the message and never
// mixed with a bundle.
class HttpTransfer final : public Transfer {
 public:
  HttpTransfer(std::string method, std::string url, const std::string& token)
      : m_method(std::move(method)), m_url(std::move(url)), m_token(token) {}

  const std::string& method() const noexcept { return m_method; }
  const std::string& url() const noexcept { return m_url; }

  /// Adds a request header line ("Name: value").
  void add_header(std::string line) { m_extra_headers.push_back(std::move(line)); }
  /// Adds the lookup hint headers of `hint` (those within the protocol's limits).
  void add_lookup_hint(const LookupHint& hint) {
    for (auto& line : lookup_header_lines(hint)) {
      add_header(std::move(line));
    }
  }
  /// Sends `body` as JSON (POST, or PUT of a document).
  void set_json_body(std::string body) { m_body = std::move(body); }
  /// Fails the transfer (a `remote` error) when a response body grows past
  /// `bytes` (default: the largest bundle).
  void set_max_response_bytes(curl_off_t bytes) noexcept { m_max_response_bytes = bytes; }
  /// Uploads the file (PUT); it must outlive the transfer.
  void set_upload(const std::filesystem::path& file) { m_upload = &file; }
  /// Writes a 200 body to `fd`.
  void set_download(int fd) noexcept { m_download_fd = fd; }
  /// Hands a 200 body to `consumer` piece by piece as it arrives (a bundle
  /// stream, whose frames carry their own limits); its error aborts the
  /// transfer. `restart` is called before another attempt.
  void set_stream(std::function<Status(const char*, std::size_t)> consumer, std::function<void()> restart) {
    m_stream = std::move(consumer);
    m_restart_stream = std::move(restart);
  }
  /// Allows this request `timeout_ms` instead of the remote's timeout (a
  /// request the server holds open on purpose).
  void set_timeout_ms(long timeout_ms) noexcept { m_timeout_ms = timeout_ms; }
  /// Sends no body and expects none (HEAD).
  void set_no_body() noexcept { m_no_body = true; }

  /// The response body kept in memory (JSON, or an error's explanation).
  std::string& text() noexcept { return m_text; }
  /// The headers of the last response.
  const ResponseHeaders& response_headers() const noexcept { return m_response_headers; }

  Status configure(CURL* handle) override {
    m_handle = handle;
    m_headers.reset();
    if (!m_token.empty()) {
      OPCACHE_TRY(append_header(m_headers, "Authorization: Bearer " + m_token));
    }
    for (const auto& line : m_extra_headers) {
      OPCACHE_TRY(append_header(m_headers, line));
    }
    m_response_headers.install(handle);
    curl_easy_setopt(handle, CURLOPT_URL, m_url.c_str());
    set_write_callback<&HttpTransfer::on_data>(handle, *this);
    if (m_timeout_ms > 0) {
      curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, m_timeout_ms);
    }
    if (m_no_body) {
      curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
    } else if (m_method != "GET" && m_method != "POST" && m_upload == nullptr) {
      curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, m_method.c_str());
    }
    if (m_upload != nullptr) {
      OPCACHE_TRY(configure_upload(handle));
    } else if (m_method == "POST" || !m_body.empty()) {
      curl_easy_setopt(handle, CURLOPT_POSTFIELDS, m_body.c_str());
      curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(m_body.size()));
      OPCACHE_TRY(append_header(m_headers, "Content-Type: application/json"));
    }
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, m_headers.get());
    return {};
  }

  Status rewind() override {
    m_text.clear();
    m_response_headers.clear();
    m_written = 0;
    if (m_restart_stream) {
      m_restart_stream();
    }
    // Start the body again from the beginning.
    if (m_download_fd >= 0 && (::ftruncate(m_download_fd, 0) != 0 || ::lseek(m_download_fd, 0, SEEK_SET) != 0)) {
      return base::errno_error("cannot restart the download into", "fd " + std::to_string(m_download_fd), errno);
    }
    return {};
  }

  std::optional<Error> local_error() const override { return m_local_error; }

 private:
  Status configure_upload(CURL* handle) {
    OPCACHE_TRY_ASSIGN(m_upload_fd, base::open_for_reading(*m_upload));
    struct stat info {};
    if (::fstat(m_upload_fd.get(), &info) != 0) {
      return base::errno_error("cannot stat", *m_upload, errno);
    }
    m_upload_size = info.st_size;
    curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(info.st_size));
    set_read_callbacks<&HttpTransfer::on_read, &HttpTransfer::on_seek>(handle, *this);
    return append_header(m_headers, "Content-Type: application/vnd.opcache.bundle");
  }

  std::size_t on_data(char* data, std::size_t bytes) {
    long status = 0;
    curl_easy_getinfo(m_handle, CURLINFO_RESPONSE_CODE, &status);
    if (m_stream && status == 200) {
      if (auto consumed = m_stream(data, bytes); !consumed) {
        m_local_error = consumed.error();
        return 0;
      }
      return bytes;
    }
    if (m_download_fd >= 0 && status == 200) {
      if (!base::write_all(m_download_fd, data, bytes, "download")) {
        m_local_error = Error::io("cannot write the download from " + display_url(m_url));
        return 0;
      }
    } else if (m_download_fd < 0 || m_text.size() < k_max_error_body) {
      m_text.append(data, bytes);
    }
    m_written += static_cast<curl_off_t>(bytes);
    if (m_written > m_max_response_bytes) {
      m_local_error = Error::remote(display_url(m_url) + ": response larger than " +
                                    std::to_string(m_max_response_bytes) + " bytes");
      return 0;
    }
    return bytes;
  }

  std::size_t on_read(char* buffer, std::size_t capacity) {
    auto got = base::read_some(m_upload_fd.get(), buffer, capacity, *m_upload);
    if (!got) {
      m_local_error = got.error();
      return CURL_READFUNC_ABORT;
    }
    return *got;
  }

  bool on_seek(curl_off_t offset) {
    if (offset < 0 || offset > m_upload_size || ::lseek(m_upload_fd.get(), offset, SEEK_SET) != offset) {
      return false;
    }
    return true;
  }

  std::string m_method;
  std::string m_url;
  const std::string& m_token;
  std::string m_body;
  const std::filesystem::path* m_upload = nullptr;
  base::FileDescriptor m_upload_fd;
  curl_off_t m_upload_size = 0;
  int m_download_fd = -1;
  std::function<Status(const char*, std::size_t)> m_stream;
  std::function<void()> m_restart_stream;
  CURL* m_handle = nullptr;
  HeaderList m_headers;
  std::vector<std::string> m_extra_headers;
  ResponseHeaders m_response_headers;
  std::string m_text;
  curl_off_t m_written = 0;
  curl_off_t m_max_response_bytes = k_max_bundle_bytes;
  std::optional<Error> m_local_error;
  long m_timeout_ms = 0;
  bool m_no_body = false;
};

struct Response {
  long status = 0;
  std::string text;
};

// The signatures of a response's X-Opcache-Signature headers (one per
// signature, or comma-joined by a proxy).
Result<store::Signatures> signatures_of(const ResponseHeaders& headers) {
  store::Signatures signatures;
  for (const auto& [name, value] : headers.all()) {
    if (name == "x-opcache-signature") {
      OPCACHE_TRY(add_signature_header(value, signatures));
    }
  }
  return signatures;
}

// The body of POST /v1/entries/{key}/signatures (schemas/api/signatures-request.schema.json).
std::string signatures_body(const store::Signatures& signatures) {
  json list = json::array();
  for (const auto& signature : signatures) {
    list.push_back({{"public_key", base::base64_encode(signature.public_key)},
                    {"signature", base::base64_encode(signature.signature)}});
  }
  return json{{"signatures", list}}.dump();
}

// The server's JSON error code ("" when the body is not a JSON error).
std::string error_code_of(const std::string& body) {
  auto parsed = json::parse(body, nullptr, false);
  return parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()
             ? parsed["error"].get<std::string>()
             : std::string();
}

bool is_signature_refusal(const std::string& code) {
  return code == "signature_required" || code == "untrusted_signature" || code == "bad_signature";
}

// Milliseconds of a JSON number of seconds ("ttl_seconds": 60), 0 when absent.
std::chrono::milliseconds seconds_field(const json& body, const char* name) {
  auto it = body.find(name);
  return it != body.end() && it->is_number() && it->get<double>() >= 0
             ? std::chrono::milliseconds(static_cast<std::int64_t>(it->get<double>() * 1000))
             : std::chrono::milliseconds(0);
}

std::string string_field(const json& body, const char* name) {
  auto it = body.find(name);
  return it != body.end() && it->is_string() ? it->get<std::string>() : std::string();
}

class HttpRemote final : public RemoteStore, public BuildLeases, public ServerStatistics, public EntryExplainer {
 public:
  explicit HttpRemote(RemoteOptions options, RetryTiming timing)
      : RemoteStore(options.read_only),
        m_options(std::move(options)),
        m_engine(engine_options(m_options), timing),
        m_bucket_engine(bucket_engine_options(engine_options(m_options)), std::move(timing)) {
    m_base = m_options.url;
    while (!m_base.empty() && m_base.back() == '/') {
      m_base.pop_back();
    }
  }

  std::string name() const override { return display_url(m_options.url); }

  Result<Fetched> fetch(const std::string& key, int fd, store::Signatures* signatures,
                        const LookupHint& hint) override {
    return fetch_entry(key, fd, signatures, hint, true);
  }

  // GET /v1/entries/{key}; with `redirect`, asks to be sent to the bucket
  // (API v1 revision 9) and, when the bucket fails, asks the server again
  // without it, silently: the bucket is the server's business.
  Result<Fetched> fetch_entry(const std::string& key, int fd, store::Signatures* signatures, const LookupHint& hint,
                              bool redirect) {
    HttpTransfer request("GET", m_base + "/v1/entries/" + key, m_options.token);
    request.add_lookup_hint(hint);
    if (redirect) {
      request.add_header(std::string(k_redirect_header) + ": 1");
    }
    request.set_download(fd);
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 307 && redirect) {
      auto followed = follow_bucket_redirect(m_bucket_engine, request.response_headers(), fd, k_max_bundle_bytes);
      if (!followed && followed.error().code() == ErrorCode::io) {
        return followed.error();  // our own disk: the server would not do better
      }
      if (!followed) {
        return fetch_entry(key, fd, signatures, hint, false);
      }
      response.status = 200;  // the 307 carries the headers of a 200
    }
    if (response.status == 404) {
      return Fetched::miss;
    }
    if (response.status == 410) {
      return Fetched::revoked;  // a miss the caller purges; never the server's failure
    }
    if (response.status != 200) {
      return status_error("GET", request.url(), response);
    }
    if (signatures != nullptr) {
      auto received = signatures_of(request.response_headers());
      if (!received) {
        return Error::remote(name() + ": GET " + request.url() + ": " + received.error().message());
      }
      *signatures = std::move(*received);
    }
    return Fetched::hit;
  }

  std::vector<std::string> fetch_batch(const std::vector<std::string>& keys, BatchReceiver& receiver) override {
    if (m_no_batches.load() || keys.empty()) {
      return keys;
    }
    BatchStreamSink sink(keys, receiver);
    for (auto pending = keys; !pending.empty(); pending = sink.pending()) {
      if (pending.size() > k_query_batch) {
        pending.resize(k_query_batch);
      }
      const std::size_t answered_before = sink.answered();
      if (!fetch_stream(pending, sink) || sink.answered() == answered_before) {
        break;  // failed, or no progress: what is left is fetched one at a time
      }
    }
    auto unanswered = sink.pending();
    unanswered.insert(unanswered.end(), sink.too_large().begin(), sink.too_large().end());
    return unanswered;
  }

  Status do_add_signatures(const std::string& key, const store::Signatures& signatures) override {
    HttpTransfer request("POST", m_base + "/v1/entries/" + key + "/signatures", m_options.token);
    request.set_json_body(signatures_body(signatures));
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404) {
      return Error::not_found("remote " + name() + " has no entry " + key);
    }
    if (response.status != 200) {
      return status_error("POST", request.url(), response);
    }
    return {};
  }

  Status do_upload(const std::string& key, const std::filesystem::path& bundle,
                const store::Signatures& signatures) override {
    HttpTransfer request("PUT", m_base + "/v1/entries/" + key, m_options.token);
    request.set_upload(bundle);
    for (const auto& signature : signatures) {
      request.add_header(std::string(k_signature_header) + ": " + store::format_signature(signature));
    }
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 410) {
      // The server works; it refuses this key until it is unrevoked.
      return Error::usage(name() + " refuses " + key + ": " + error_detail(response.text));
    }
    if (response.status != 200 && response.status != 201) {
      return status_error("PUT", request.url(), response);
    }
    return {};
  }

  Result<std::optional<RevocationPage>> revocations(std::int64_t since_s) override {
    HttpTransfer request("GET", m_base + "/v1/revocations?since=" + std::to_string(since_s), m_options.token);
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404) {
      return std::optional<RevocationPage>();  // a server older than API v1 revision 5
    }
    if (response.status != 200) {
      return status_error("GET", request.url(), response);
    }
    auto body = json::parse(response.text, nullptr, false);
    if (!body.is_object() || !body.contains("revocations") || !body["revocations"].is_array() ||
        !body.contains("now") || !body["now"].is_number_integer()) {
      return Error::remote(name() + ": GET " + display_url(request.url()) + ": malformed revocation list");
    }
    RevocationPage page;
    page.now_s = body["now"].get<std::int64_t>();
    page.truncated = body.contains("truncated") && body["truncated"].is_boolean() && body["truncated"].get<bool>();
    for (const auto& item : body["revocations"]) {
      auto tombstone = store::parse_tombstone(item.dump(), string_field(item, "key"), "revocation list item");
      if (!tombstone || !store::check_key(tombstone->key)) {
        return Error::remote(name() + ": GET " + display_url(request.url()) + ": malformed revocation list item");
      }
      page.tombstones.push_back(std::move(*tombstone));
    }
    return std::optional<RevocationPage>(std::move(page));
  }

  Result<std::vector<bool>> do_revoke(const std::vector<std::string>& keys, const std::string& reason,
                                   const base::Ed25519PrivateKey* signer) override {
    json body{{"keys", keys}, {"reason", reason}};
    if (signer != nullptr) {
      const std::int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch()).count();
      OPCACHE_TRY_ASSIGN(auto signature, store::sign_revocation(*signer, keys, reason, now_s));
      body["time"] = now_s;
      body["signatures"] = json::array({{{"public_key", base::base64_encode(signature.public_key)},
                                         {"signature", base::base64_encode(signature.signature)}}});
    }
    HttpTransfer request("POST", m_base + "/v1/revocations", m_options.token);
    request.set_json_body(body.dump());
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404 && error_code_of(response.text) == "not_found") {
      return Error::usage(name() + " cannot revoke keys (an opcache serve older than API v1 revision 5)");
    }
    if (response.status != 200) {
      return status_error("POST", request.url(), response);
    }
    auto parsed = json::parse(response.text, nullptr, false);
    if (!parsed.is_object() || !parsed.contains("revoked") || !parsed["revoked"].is_array()) {
      return Error::remote(name() + ": POST " + display_url(request.url()) + ": malformed revocation response");
    }
    std::vector<bool> deleted;
    for (const auto& item : parsed["revoked"]) {
      deleted.push_back(item.is_object() && item.contains("deleted") && item["deleted"].is_boolean() &&
                        item["deleted"].get<bool>());
    }
    deleted.resize(keys.size(), false);
    return deleted;
  }

  Result<bool> do_unrevoke(const std::string& key) override {
    HttpTransfer request("DELETE", m_base + "/v1/revocations/" + key, m_options.token);
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404 && error_code_of(response.text) == "not_found" &&
        error_detail(response.text).find("not revoked") != std::string::npos) {
      return false;
    }
    if (response.status != 200) {
      return status_error("DELETE", request.url(), response);
    }
    return true;
  }

  // GET /v1/manifests/{key} (API v1 revision 7); a 404 is "none", from a
  // server without the manifest or without the route (an older server).
  Result<std::optional<std::string>> fetch_exec_manifest(const std::string& command_key) override {
    OPCACHE_TRY(store::check_key(command_key));
    HttpTransfer request("GET", m_base + "/v1/manifests/" + command_key, m_options.token);
    request.set_max_response_bytes(static_cast<curl_off_t>(store::k_max_manifest_bytes));
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404) {
      return std::optional<std::string>();
    }
    if (response.status != 200) {
      return status_error("GET", request.url(), response);
    }
    return std::optional<std::string>(std::move(response.text));
  }

  std::vector<std::string> fetch_exec_manifest_batch(const std::vector<std::string>& command_keys,
                                                     const ManifestReceiver& receive) override {
    std::vector<std::string> pending = command_keys;
    while (!pending.empty() && !m_no_manifest_batches.load()) {
      const std::size_t size = std::min(pending.size(), k_manifest_batch);
      const std::vector<std::string> chunk(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(size));
      const auto again = fetch_manifest_chunk(chunk, receive);
      if (!again || again->size() == chunk.size()) {
        break;  // failed, or no progress: what is left is fetched one at a time
      }
      pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(size));
      pending.insert(pending.begin(), again->begin(), again->end());
    }
    return pending;
  }

  // PUT /v1/manifests/{key}: the server merges it into its own under its lock.
  Status do_store_exec_manifest(const store::ExecManifest& manifest) override {
    OPCACHE_TRY(store::check_key(manifest.command_key));
    HttpTransfer request("PUT", m_base + "/v1/manifests/" + manifest.command_key, m_options.token);
    request.set_json_body(store::exec_manifest_to_json(manifest));
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404 && error_code_of(response.text) == "not_found") {
      return {};  // a server older than API v1 revision 7 keeps no manifests
    }
    if (response.status == 413) {
      return Error::usage(name() + " refuses the exec manifest of " + manifest.command_key +
                          " as too large: " + error_detail(response.text));
    }
    if (response.status == 400 || response.status == 409) {
      return Error::corrupt(name() + " refuses the exec manifest of " + manifest.command_key + ": " +
                            error_detail(response.text));
    }
    if (response.status != 200) {
      return status_error("PUT", request.url(), response);
    }
    return {};
  }

  Result<std::vector<bool>> query(const std::vector<std::string>& keys) override {
    std::vector<bool> present;
    present.reserve(keys.size());
    for (std::size_t start = 0; start < keys.size(); start += k_query_batch) {
      std::vector<std::string> batch(keys.begin() + static_cast<std::ptrdiff_t>(start),
                                     keys.begin() + static_cast<std::ptrdiff_t>(std::min(keys.size(), start + k_query_batch)));
      HttpTransfer request("POST", m_base + "/v1/entries/query", m_options.token);
      request.set_json_body(json{{"keys", batch}}.dump());
      OPCACHE_TRY_ASSIGN(auto response, perform(request));
      if (response.status != 200) {
        return status_error("POST", request.url(), response);
      }
      auto parsed = json::parse(response.text, nullptr, false);
      if (!parsed.is_object() || !parsed.contains("present") || !parsed["present"].is_array()) {
        return Error::remote(name() + ": malformed query response");
      }
      std::set<std::string> found;
      for (const auto& key : parsed["present"]) {
        if (key.is_string()) {
          found.insert(key.get<std::string>());
        }
      }
      for (const auto& key : batch) {
        present.push_back(found.count(key) != 0);
      }
    }
    return present;
  }

  Result<std::vector<std::string>> list_keys(const ListFilter& filter) override {
    std::string scenario;
    auto add = [&scenario](const char* field, const std::string& value) {
      if (!value.empty()) {
        scenario += (scenario.empty() ? "" : ",") + std::string(field) + "=" + value;
      }
    };
    add("device", filter.device_mode);
    add("phase", filter.phase);
    add("toolchain", filter.toolchain);
    add("soc", filter.soc);
    std::vector<std::string> keys;
    std::string after;
    for (;;) {
      std::string url = m_base + "/v1/entries?limit=1000";
      if (!scenario.empty()) {
        url += "&scenario=" + escape(scenario);
      }
      if (!filter.op_type.empty()) {
        url += "&op_type=" + escape(filter.op_type);
      }
      if (!after.empty()) {
        url += "&after=" + escape(after);
      }
      HttpTransfer request("GET", url, m_options.token);
      OPCACHE_TRY_ASSIGN(auto response, perform(request));
      if (response.status != 200) {
        return status_error("GET", url, response);
      }
      auto parsed = json::parse(response.text, nullptr, false);
      if (!parsed.is_object() || !parsed.contains("entries") || !parsed["entries"].is_array()) {
        return Error::remote(name() + ": malformed listing response");
      }
      for (const auto& entry : parsed["entries"]) {
        if (entry.is_object() && entry.contains("key") && entry["key"].is_string()) {
          keys.push_back(entry["key"].get<std::string>());
        }
      }
      if (!parsed.contains("next") || !parsed["next"].is_string()) {
        return keys;
      }
      after = parsed["next"].get<std::string>();
    }
  }

  BuildLeases* do_leases() override { return this; }

  void cancel_transfers() noexcept override {
    m_engine.cancel();
    m_bucket_engine.cancel();
  }

  ServerStatistics* statistics() override { return this; }
  EntryExplainer* explainer() override { return this; }

  Result<std::string> explain(const std::string& body) override {
    HttpTransfer request("POST", m_base + "/v1/explain", m_options.token);
    request.set_json_body(body);
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404 || response.status == 405) {
      return Error::remote(name() + " has no /v1/explain (an opcache serve older than " +
                           std::string(k_first_explain_revision) + ")");
    }
    if (response.status != 200) {
      return status_error("POST", request.url(), response);
    }
    if (!json::parse(response.text, nullptr, false).is_object()) {
      return Error::remote(name() + ": POST " + display_url(request.url()) + ": the answer is not a JSON object");
    }
    return std::move(response.text);
  }

  Result<std::string> stats_summary(const std::string& window) override {
    return stats_document("/v1/stats/summary?window=" + escape(window));
  }

  Result<std::string> stats_misses(int limit) override {
    return stats_document("/v1/stats/misses?limit=" + std::to_string(limit));
  }

  Result<LeaseGrant> acquire_lease(const std::string& key, const std::string& holder, const LookupHint& hint) override {
    HttpTransfer request("POST", m_base + "/v1/leases/" + key, m_options.token);
    request.add_lookup_hint(hint);
    // A random id per acquisition, the same in the engine's retries of it:
    // when a 201 is lost (a reset, a proxy's 502), the retry gets the same
    // lease back instead of a 409 naming this client (protocol revision 6).
    request.set_json_body(json{{"holder", holder}, {"request", base::random_hex(16)}}.dump());
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404 && error_code_of(response.text) != "lease_not_found") {
      // A server older than API v1 revision 3 has no such endpoint.
      return Error::not_found(name() + " does not hand out build leases (a server older than API v1 revision 3)");
    }
    auto body = json::parse(response.text, nullptr, false);
    if (!body.is_object() || (response.status != 200 && response.status != 201 && response.status != 409)) {
      return status_error("POST", request.url(), response);
    }
    LeaseGrant grant;
    grant.holder = string_field(body, "holder");
    if (response.status == 200) {
      grant.kind = LeaseGrant::Kind::present;
    } else if (response.status == 201) {
      grant.kind = LeaseGrant::Kind::granted;
      grant.id = string_field(body, "lease");
      grant.ttl = seconds_field(body, "ttl_seconds");
      if (grant.id.empty() || grant.ttl.count() <= 0) {
        return Error::remote(name() + ": POST " + request.url() + ": malformed lease response");
      }
    } else {
      grant.kind = LeaseGrant::Kind::held;
      grant.expires_in = seconds_field(body, "expires_in_seconds");
    }
    return grant;
  }

  Result<bool> renew_lease(const std::string& key, const std::string& id) override {
    HttpTransfer request("PUT", m_base + "/v1/leases/" + key + "/" + id, m_options.token);
    return found(request);
  }

  Status release_lease(const std::string& key, const std::string& id) override {
    HttpTransfer request("DELETE", m_base + "/v1/leases/" + key + "/" + id, m_options.token);
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status != 200 && response.status != 404) {
      return status_error("DELETE", request.url(), response);
    }
    return {};
  }

  Result<bool> wait_for_entry(const std::string& key, std::chrono::seconds wait, const LookupHint& hint) override {
    HttpTransfer request("HEAD", m_base + "/v1/entries/" + key + "?wait=" + std::to_string(wait.count()),
                         m_options.token);
    request.add_lookup_hint(hint);
    request.set_no_body();
    request.set_timeout_ms(static_cast<long>(wait.count()) * 1000 + m_options.timeout_ms);
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 410) {
      // Revoked: nobody will upload it, so there is nothing to wait for; not
      // the server's failure either (a `not_found`, not a `remote` error).
      return Error::not_found(name() + " revoked " + key + ": build it here");
    }
    if (response.status == 404) {
      return false;
    }
    if (response.status != 200) {
      return status_error("HEAD", request.url(), response);
    }
    return true;
  }

 private:
  static std::string escape(const std::string& text) { return base::percent_encode(text); }

  // GET of a /v1/stats document: its JSON object, as sent.
  Result<std::string> stats_document(const std::string& path) {
    HttpTransfer request("GET", m_base + path, m_options.token);
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404) {
      return Error::remote(name() + " has no /v1/stats (an opcache serve older than " + k_first_stats_revision +
                           "): upgrade the server to see its statistics");
    }
    if (response.status != 200) {
      return status_error("GET", request.url(), response);
    }
    if (!json::parse(response.text, nullptr, false).is_object()) {
      return Error::remote(name() + ": GET " + display_url(request.url()) + ": the answer is not a JSON object");
    }
    return std::move(response.text);
  }

  // Performs a request answered 200 (true) or 404 (false); anything else is an error.
  Result<bool> found(HttpTransfer& request) {
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404) {
      return false;
    }
    if (response.status != 200) {
      return status_error(request.method().c_str(), request.url(), response);
    }
    return true;
  }

  // The error for an unexpected status, with the server's explanation and,
  // for 401 and 403, what to do about the token. A 403 refusing the
  // signatures is `untrusted`, with the server's code and message.
  Error status_error(const char* method, const std::string& url, const Response& response) const {
    std::string detail = error_detail(response.text);
    if (response.status == 403) {
      if (const auto code = error_code_of(response.text); is_signature_refusal(code)) {
        return Error::untrusted(name() + ": " + method + " " + display_url(url) + " refused (" + code + "): " + detail);
      }
    }
    std::string hint;
    if (response.status == 401) {
      hint = m_options.token.empty() ? "no token was sent: give one with --token-file FILE or OPCACHE_TOKEN"
                                     : "the server did not accept the token from --token-file / OPCACHE_TOKEN";
    } else if (response.status == 403) {
      hint = "the token's scope does not allow this request";
    }
    if (!hint.empty()) {
      detail += detail.empty() ? hint : " (" + hint + ")";
    }
    return http_status_error(k_what, method, url, response.status, detail);
  }

  static std::string error_detail(const std::string& body) {
    auto parsed = json::parse(body, nullptr, false);
    if (parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()) {
      return parsed["message"].get<std::string>();
    }
    return body.substr(0, 200);
  }

  // One POST /v1/entries/fetch for `keys`, its stream fed to `sink`; false
  // when the response failed or was cut short (the frames read before stay
  // received). A server without the route is remembered, and not asked again.
  bool fetch_stream(const std::vector<std::string>& keys, BatchStreamSink& sink) {
    HttpTransfer request("POST", m_base + "/v1/entries/fetch", m_options.token);
    request.set_json_body(json{{"keys", keys}}.dump());
    BundleStreamReader reader(sink);
    request.set_stream([&](const char* data, std::size_t size) { return reader.feed(data, size); },
                       [&] {
                         reader.reset();
                         sink.abandon_bundle();
                       });
    // A stream of many bundles may take longer than one entry's request.
    request.set_timeout_ms(m_options.timeout_ms * k_batch_timeout_factor);
    auto response = perform(request);
    sink.abandon_bundle();
    if (!response) {
      return false;
    }
    if (response->status == 400 || response->status == 404 || response->status == 405) {
      m_no_batches = true;  // older than API v1 revision 6: /v1/entries/fetch reads as an entry's path
      return false;
    }
    return response->status == 200 && reader.complete();
  }

  // One POST /v1/manifests/fetch (API v1 revision 10): hands each manifest
  // of `chunk` the server sent to `receive`; the keys it asks to be asked
  // again, or std::nullopt when the request failed or the answer is not one
  // (an older server's 400, 404 or 405 also turns batches off).
  std::optional<std::vector<std::string>> fetch_manifest_chunk(const std::vector<std::string>& chunk,
                                                               const ManifestReceiver& receive) {
    HttpTransfer request("POST", m_base + "/v1/manifests/fetch", m_options.token);
    request.set_json_body(json{{"keys", chunk}}.dump());
    request.set_max_response_bytes(k_max_manifest_batch_bytes);
    request.set_timeout_ms(m_options.timeout_ms * k_batch_timeout_factor);
    auto response = perform(request);
    if (!response) {
      return std::nullopt;
    }
    if (response->status == 400 || response->status == 404 || response->status == 405) {
      m_no_manifest_batches = true;  // older than API v1 revision 10
      return std::nullopt;
    }
    auto body = json::parse(response->text, nullptr, false);
    if (response->status != 200 || !body.is_object() || !body.contains("manifests") || !body["manifests"].is_object() ||
        !body.contains("again") || !body["again"].is_array()) {
      return std::nullopt;
    }
    const std::set<std::string> asked(chunk.begin(), chunk.end());
    for (auto& [command_key, manifest] : body["manifests"].items()) {
      if (asked.contains(command_key)) {
        receive(command_key, manifest.dump());
      }
    }
    std::vector<std::string> again;
    for (const auto& command_key : body["again"]) {
      if (command_key.is_string() && asked.contains(command_key.get<std::string>())) {
        again.push_back(command_key.get<std::string>());
      }
    }
    return again;
  }

  static EngineOptions engine_options(const RemoteOptions& options) {
    EngineOptions engine;
    engine.connect_timeout_ms = options.connect_timeout_ms;
    engine.timeout_ms = options.timeout_ms;
    // A timeout is not retried: the layered lookup must cost one timeout.
    engine.retry = RetryPolicy{options.retries, false};
    engine.ca_file = options.ca_file;
    return engine;
  }

  // Runs a request through the engine, which retries it on a reset or a 5xx.
  // Every request is safe to repeat: reads; PUT of an entry (an existing one
  // is kept); PUT of an exec manifest (merging the same builds twice keeps
  // them once); POST of a query or of signatures (a signer already there
  // counts once); lease POST (its request id: a retry gets the same lease);
  // lease DELETE (a 404 after a lost 200 counts as released).
  Result<Response> perform(HttpTransfer& request) {
    OPCACHE_TRY_ASSIGN(TransferOutcome outcome, m_engine.perform(request));
    if (outcome.code != CURLE_OK) {
      return transfer_error(k_what, request.method(), request.url(), outcome.code, outcome.error_text);
    }
    return Response{outcome.status, std::move(request.text())};
  }

  RemoteOptions m_options;
  std::string m_base;
  RequestEngine m_engine;
  RequestEngine m_bucket_engine;  // downloads from the bucket (bucket_engine_options)
  std::atomic<bool> m_no_batches{false};  // the server has no POST /v1/entries/fetch
  std::atomic<bool> m_no_manifest_batches{false};  // the server has no POST /v1/manifests/fetch
};

}  // namespace

Result<std::unique_ptr<RemoteStore>> make_http_remote(const RemoteOptions& options) {
  // libcurl is loaded by the first request (make_easy_handle), not here: a
  // process whose lookups all hit locally never needs it.
  return std::unique_ptr<RemoteStore>(new HttpRemote(options, RetryTiming::system()));
}

}  // namespace opcache::remote
