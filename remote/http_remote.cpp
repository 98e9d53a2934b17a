// The http(s):// remote: an opcache server's API v1 (docs/protocol.md).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include <nlohmann/json.hpp>

#include "remote/request_engine.hpp"
#include "remote/remote_store.hpp"
#include "base/file_io.hpp"
#include "base/percent_coding.hpp"
#include "base/try.hpp"

namespace opcache::remote {

namespace {

using json = nlohmann::json;

constexpr const char* k_what = "opcache server";
constexpr std::size_t k_query_batch = 10000;  // the server's per-query limit
constexpr curl_off_t k_max_bundle_bytes = 2ll << 30;
constexpr std::size_t k_max_error_body = 64 * 1024;  // of an error response kept for its message

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

  /// Sends `body` as JSON (POST).
  void set_json_body(std::string body) { m_body = std::move(body); }
  /// Uploads the file (PUT); it must outlive the transfer.
  void set_upload(const std::filesystem::path& file) { m_upload = &file; }
  /// Writes a 200 body to `fd`.
  void set_download(int fd) noexcept { m_download_fd = fd; }

  /// The response body kept in memory (JSON, or an error's explanation).
  std::string& text() noexcept { return m_text; }

  Status configure(CURL* handle) override {
    m_handle = handle;
    m_headers.reset();
    if (!m_token.empty()) {
      OPCACHE_TRY(append_header(m_headers, "Authorization: Bearer " + m_token));
    }
    curl_easy_setopt(handle, CURLOPT_URL, m_url.c_str());
    set_write_callback<&HttpTransfer::on_data>(handle, *this);
    if (m_upload != nullptr) {
      OPCACHE_TRY(configure_upload(handle));
    } else if (m_method == "POST") {
      curl_easy_setopt(handle, CURLOPT_POSTFIELDS, m_body.c_str());
      curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(m_body.size()));
      OPCACHE_TRY(append_header(m_headers, "Content-Type: application/json"));
    }
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, m_headers.get());
    return {};
  }

  Status rewind() override {
    m_text.clear();
    m_written = 0;
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
    if (m_download_fd >= 0 && status == 200) {
      if (!base::write_all(m_download_fd, data, bytes, "download")) {
        m_local_error = Error::io("cannot write the download from " + display_url(m_url));
        return 0;
      }
    } else if (m_download_fd < 0 || m_text.size() < k_max_error_body) {
      m_text.append(data, bytes);
    }
    m_written += static_cast<curl_off_t>(bytes);
    if (m_written > k_max_bundle_bytes) {
      m_local_error = Error::remote(display_url(m_url) + ": response larger than " +
                                    std::to_string(k_max_bundle_bytes) + " bytes");
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
  CURL* m_handle = nullptr;
  HeaderList m_headers;
  std::string m_text;
  curl_off_t m_written = 0;
  std::optional<Error> m_local_error;
};

struct Response {
  long status = 0;
  std::string text;
};

class HttpRemote final : public RemoteStore {
 public:
  explicit HttpRemote(RemoteOptions options, RetryTiming timing)
      : m_options(std::move(options)), m_engine(engine_options(m_options), std::move(timing)) {
    m_base = m_options.url;
    while (!m_base.empty() && m_base.back() == '/') {
      m_base.pop_back();
    }
  }

  std::string name() const override { return display_url(m_options.url); }

  Result<bool> fetch(const std::string& key, int fd, store::Signatures* signatures) override {
    if (signatures != nullptr) {
      signatures->clear();  // signature transport: next commit
    }
    HttpTransfer request("GET", m_base + "/v1/entries/" + key, m_options.token);
    request.set_download(fd);
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404) {
      return false;
    }
    if (response.status != 200) {
      return status_error("GET", request.url(), response);
    }
    return true;
  }

  Status add_signatures(const std::string& key, const store::Signatures& signatures) override {
    (void)signatures;
    return Error::not_found("signatures are not stored yet: " + key);
  }

  Status upload(const std::string& key, const std::filesystem::path& bundle,
                const store::Signatures& signatures) override {
    (void)signatures;
    if (m_options.read_only) {
      return Error::usage("remote " + name() + " is read-only");
    }
    HttpTransfer request("PUT", m_base + "/v1/entries/" + key, m_options.token);
    request.set_upload(bundle);
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status != 200 && response.status != 201) {
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

 private:
  static std::string escape(const std::string& text) { return base::percent_encode(text); }

  // The error for an unexpected status, with the server's explanation and,
  // for 401 and 403, what to do about the token.
  Error status_error(const char* method, const std::string& url, const Response& response) const {
    std::string detail = error_detail(response.text);
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

  static EngineOptions engine_options(const RemoteOptions& options) {
    EngineOptions engine;
    engine.connect_timeout_ms = options.connect_timeout_ms;
    engine.timeout_ms = options.timeout_ms;
    // A timeout is not retried: the layered lookup must cost one timeout.
    engine.retry = RetryPolicy{options.retries, false};
    engine.ca_file = options.ca_file;
    return engine;
  }

  // Runs a request through the engine (all our requests are idempotent).
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
};

}  // namespace

Result<std::unique_ptr<RemoteStore>> make_http_remote(const RemoteOptions& options) {
  // libcurl is loaded by the first request (make_easy_handle), not here: a
  // process whose lookups all hit locally never needs it.
  return std::unique_ptr<RemoteStore>(new HttpRemote(options, RetryTiming::system()));
}

}  // namespace opcache::remote
