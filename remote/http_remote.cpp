// The http(s):// remote: an opcache server's API v1 (docs/protocol.md).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cctype>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "remote/backoff.hpp"
#include "remote/curl_handle.hpp"
#include "remote/remote_store.hpp"
#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::remote {

namespace {

using json = nlohmann::json;

constexpr const char* k_what = "opcache server";
constexpr std::size_t k_query_batch = 10000;  // the server's per-query limit
constexpr curl_off_t k_max_bundle_bytes = 2ll << 30;
constexpr std::size_t k_max_error_body = 64 * 1024;  // of an error response kept for its message

// Where a response body goes: a file descriptor (bundles) or memory (JSON).
// Only a 200 body goes to the file: an error body (a 401's explanation, a
// 500 page) is kept in memory for the message and never mixed with a bundle.
struct BodySink {
  int fd = -1;
  CURL* handle = nullptr;
  std::string text;
  curl_off_t written = 0;
  bool write_failed = false;

  static std::size_t on_data(char* data, std::size_t size, std::size_t count, void* user) {
    auto* sink = static_cast<BodySink*>(user);
    const std::size_t bytes = size * count;
    long status = 0;
    if (sink->fd >= 0 && sink->handle != nullptr) {
      curl_easy_getinfo(sink->handle, CURLINFO_RESPONSE_CODE, &status);
    }
    if (sink->fd >= 0 && status == 200) {
      if (!base::write_all(sink->fd, data, bytes, "download")) {
        sink->write_failed = true;
        return 0;
      }
    } else if (sink->fd < 0 || sink->text.size() < k_max_error_body) {
      sink->text.append(data, bytes);
    }
    sink->written += static_cast<curl_off_t>(bytes);
    return sink->written > k_max_bundle_bytes ? 0 : bytes;
  }
};

// One request's description.
struct Request {
  std::string method;
  std::string url;
  std::string body;                      // POST
  const std::filesystem::path* upload = nullptr;  // PUT from a file
  int download_fd = -1;                  // GET into a file
};

struct Response {
  long status = 0;
  std::string text;
};

class HttpRemote final : public RemoteStore {
 public:
  explicit HttpRemote(RemoteOptions options) : m_options(std::move(options)) {
    m_base = m_options.url;
    while (!m_base.empty() && m_base.back() == '/') {
      m_base.pop_back();
    }
  }

  std::string name() const override { return display_url(m_options.url); }

  Result<bool> fetch(const std::string& key, int fd) override {
    Request request{"GET", m_base + "/v1/entries/" + key, "", nullptr, fd};
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status == 404) {
      return false;
    }
    if (response.status != 200) {
      return status_error("GET", request.url, response);
    }
    return true;
  }

  Status upload(const std::string& key, const std::filesystem::path& bundle) override {
    if (m_options.read_only) {
      return Error::usage("remote " + name() + " is read-only");
    }
    Request request{"PUT", m_base + "/v1/entries/" + key, "", &bundle, -1};
    OPCACHE_TRY_ASSIGN(auto response, perform(request));
    if (response.status != 200 && response.status != 201) {
      return status_error("PUT", request.url, response);
    }
    return {};
  }

  Result<std::vector<bool>> query(const std::vector<std::string>& keys) override {
    std::vector<bool> present;
    present.reserve(keys.size());
    for (std::size_t start = 0; start < keys.size(); start += k_query_batch) {
      std::vector<std::string> batch(keys.begin() + static_cast<std::ptrdiff_t>(start),
                                     keys.begin() + static_cast<std::ptrdiff_t>(std::min(keys.size(), start + k_query_batch)));
      Request request{"POST", m_base + "/v1/entries/query", json{{"keys", batch}}.dump(), nullptr, -1};
      OPCACHE_TRY_ASSIGN(auto response, perform(request));
      if (response.status != 200) {
        return status_error("POST", request.url, response);
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
      Request request{"GET", url, "", nullptr, -1};
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
  static std::string escape(const std::string& text) {
    static constexpr char k_hex[] = "0123456789ABCDEF";
    std::string out;
    for (char c : text) {
      auto byte = static_cast<unsigned char>(c);
      if (std::isalnum(byte) || c == '-' || c == '_' || c == '.' || c == '~') {
        out.push_back(c);
      } else {
        out += {'%', k_hex[byte >> 4], k_hex[byte & 15]};
      }
    }
    return out;
  }

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

  // Runs a request, retrying transient failures (all our requests are idempotent).
  Result<Response> perform(const Request& request) {
    for (int attempt = 0;; ++attempt) {
      std::optional<long> retry_after;
      CURLcode code = CURLE_OK;
      auto response = perform_once(request, retry_after, code);
      // A timeout is not retried: the layered lookup must cost one timeout.
      const bool transient = response ? is_transient_status(response->status)
                                      : code != CURLE_OPERATION_TIMEDOUT && is_transient(code);
      if (!transient || attempt >= m_options.retries) {
        return response;
      }
      if (request.download_fd >= 0) {
        // Start the body again from the beginning.
        if (::ftruncate(request.download_fd, 0) != 0 || ::lseek(request.download_fd, 0, SEEK_SET) != 0) {
          return response;
        }
      }
      backoff_sleep(attempt + 1, retry_after);
    }
  }

  Result<Response> perform_once(const Request& request, std::optional<long>& retry_after, CURLcode& code_out) {
    OPCACHE_TRY_ASSIGN(EasyHandlePool::Lease lease, m_pool.acquire());
    CURL* handle = lease.get();
    HeaderList headers;
    if (!m_options.token.empty()) {
      OPCACHE_TRY(append_header(headers, "Authorization: Bearer " + m_options.token));
    }
    BodySink sink;
    sink.fd = request.download_fd;
    sink.handle = handle;
    ResponseHeaders response_headers;
    response_headers.install(handle);
    char error_buffer[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(handle, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect must never carry the token elsewhere
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, m_options.connect_timeout_ms);
    curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, m_options.timeout_ms);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &BodySink::on_data);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(handle, CURLOPT_USERAGENT, "opcache");
    if (!m_options.ca_file.empty()) {
      curl_easy_setopt(handle, CURLOPT_CAINFO, m_options.ca_file.c_str());
    }
    std::FILE* upload = nullptr;
    if (request.method == "PUT") {
      upload = std::fopen(request.upload->c_str(), "rb");
      if (upload == nullptr) {
        return base::errno_error("cannot open", *request.upload, errno);
      }
      struct stat info {};
      ::fstat(::fileno(upload), &info);
      curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(handle, CURLOPT_READDATA, upload);
      curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(info.st_size));
      OPCACHE_TRY(append_header(headers, "Content-Type: application/vnd.opcache.bundle"));
    } else if (request.method == "POST") {
      curl_easy_setopt(handle, CURLOPT_POSTFIELDS, request.body.c_str());
      curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
      OPCACHE_TRY(append_header(headers, "Content-Type: application/json"));
    }
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers.get());
    CURLcode code = curl_easy_perform(handle);
    code_out = code;
    if (upload != nullptr) {
      std::fclose(upload);
    }
    if (sink.write_failed) {
      return Error::io("cannot write the download from " + name());
    }
    if (code != CURLE_OK) {
      if (sink.written > k_max_bundle_bytes) {
        return Error::remote(name() + ": response larger than " + std::to_string(k_max_bundle_bytes) + " bytes");
      }
      return transfer_error(k_what, request.method, request.url, code, error_buffer);
    }
    Response response;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response.status);
    response.text = std::move(sink.text);
    if (auto value = response_headers.get("retry-after")) {
      retry_after = parse_retry_after(*value);
    }
    return response;
  }

  RemoteOptions m_options;
  std::string m_base;
  EasyHandlePool m_pool;
};

}  // namespace

Result<std::unique_ptr<RemoteStore>> make_http_remote(const RemoteOptions& options) {
  OPCACHE_TRY(ensure_curl_initialized());
  return std::unique_ptr<RemoteStore>(new HttpRemote(options));
}

}  // namespace opcache::remote
