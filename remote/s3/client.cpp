// The S3 client: object requests (HEAD, GET, PUT, DELETE, list, create
// bucket) with name and metadata checks and S3-aware error messages, sent
// through the request engine (remote/request_engine.hpp) and signed per
// remote/s3/sigv4.hpp.
#include "remote/s3/client.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "opcache/version.hpp"
#include "remote/request_engine.hpp"
#include "remote/s3/body.hpp"
#include "remote/s3/sigv4.hpp"
#include "remote/s3/text.hpp"
#include "remote/s3/url.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"
#include "base/utf8.hpp"
#include "base/value_parse.hpp"

namespace opcache::remote {

namespace {

namespace fs = std::filesystem;

constexpr const char* k_what = "S3";
constexpr std::string_view k_metadata_header_prefix = "x-amz-meta-";
constexpr std::size_t k_max_metadata_bytes = 2048;
constexpr std::int64_t k_max_single_put_bytes = std::int64_t{5} << 30;
constexpr std::size_t k_max_error_body_bytes = 64 * 1024;
constexpr std::size_t k_max_list_body_bytes = 32 * 1024 * 1024;
constexpr int k_max_list_keys = 1000;
constexpr std::size_t k_max_text_bytes = std::size_t{64} << 20;

// One request and its response, possibly attempted several times: the
// Transfer the request engine runs. Callbacks get it as typed state.
struct Exchange final : Transfer {
  const char* method = "GET";
  std::string url;
  std::vector<std::string> headers;  // besides the ones every request gets
  std::string_view payload_hash = k_empty_payload_sha256;
  BodySource* body = nullptr;
  DownloadSink* sink = nullptr;  // receives a 2xx body; other bodies go to `response_body`
  std::size_t memory_limit = k_max_error_body_bytes;
  const S3Location* location = nullptr;        // set by the client
  const S3Credentials* credentials = nullptr;  // set by the client

  CURL* handle = nullptr;  // during an attempt
  HeaderList request_headers;
  long status = 0;
  int attempts = 0;
  ResponseHeaders response_headers;
  std::string response_body;
  std::optional<Error> failure;  // set by a callback: not retried

  std::string describe() const { return std::string(k_what) + " " + method + " " + redact_url(url); }

  Status configure(CURL* curl) override {
    handle = curl;
    OPCACHE_TRY_ASSIGN(request_headers, sigv4_headers(payload_hash, *credentials, headers));
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    OPCACHE_TRY(apply_sigv4(curl, *credentials, location->region));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, request_headers.get());
    response_headers.install(curl);
    set_write_callback<&Exchange::on_body>(curl, *this);
    if (std::string_view(method) == "HEAD") {
      curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (std::string_view(method) == "DELETE") {
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    if (body != nullptr) {
      curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body->size()));
      set_read_callbacks<&Exchange::on_read, &Exchange::on_seek>(curl, *this);
    }
    return {};
  }

  // Resets the response and rewinds the body and sink for a new attempt.
  Status rewind() override {
    status = 0;
    response_headers.clear();
    response_body.clear();
    if (body != nullptr) {
      body->seek(0);
    }
    if (auto restarted = sink != nullptr ? sink->restart() : Status(); !restarted) {
      return restarted.error().with_context(describe());
    }
    return {};
  }

  std::optional<Error> local_error() const override {
    return failure ? std::optional<Error>(failure->with_context(describe())) : std::nullopt;
  }

  std::size_t on_body(char* data, std::size_t bytes) {
    long code = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &code);
    if (sink != nullptr && code >= 200 && code <= 299) {
      if (auto written = sink->write(handle, data, bytes); !written) {
        failure = written.error();
        return 0;
      }
      return bytes;
    }
    if (response_body.size() + bytes > memory_limit) {
      failure = Error::remote("the response body (HTTP " + std::to_string(code) + ") is larger than " +
                              std::to_string(memory_limit) + " bytes");
      return 0;
    }
    response_body.append(data, bytes);
    return bytes;
  }

  std::size_t on_read(char* buffer, std::size_t capacity) {
    auto got = body->read(buffer, capacity);
    if (!got) {
      failure = got.error();
      return CURL_READFUNC_ABORT;
    }
    return *got;
  }

  bool on_seek(curl_off_t offset) {
    if (offset < 0 || offset > body->size()) {
      return false;
    }
    body->seek(offset);
    return true;
  }
};

// S3 error codes that mean "these credentials were not accepted", whatever
// the status (InvalidToken and ExpiredToken come with 400).
bool is_credential_error(std::string_view code) {
  static constexpr std::array<std::string_view, 7> k_codes = {
      "AccessDenied",          "InvalidAccessKeyId", "SignatureDoesNotMatch",       "InvalidToken",
      "ExpiredToken",          "TokenRefreshRequired", "AuthorizationHeaderMalformed"};
  return std::find(k_codes.begin(), k_codes.end(), code) != k_codes.end();
}

Error with_suffix(const Error& error, const std::string& suffix) { return {error.code(), error.message() + suffix}; }

// Empty when `name` can name an object, else why not.
std::string name_problem(std::string_view name) {
  if (name.empty()) {
    return "is empty";
  }
  if (name.size() > k_max_s3_key_bytes) {
    return "is longer than " + std::to_string(k_max_s3_key_bytes) + " bytes";
  }
  if (!base::is_valid_utf8(name)) {
    return "is not valid UTF-8";
  }
  if (has_control_character(name)) {
    return "contains a control character";
  }
  return {};
}

Status check_name(std::string_view name, const char* role = "object name") {
  if (auto problem = name_problem(name); !problem.empty()) {
    return Error::usage(std::string("S3 ") + role + " " + single_quoted(name) + " " + problem);
  }
  return {};
}

Status check_metadata(const std::map<std::string, std::string>& metadata) {
  std::size_t total = 0;
  for (const auto& [name, value] : metadata) {
    const bool good_name = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
             c == '-' || c == '_';
    });
    if (!good_name) {
      return Error::usage("S3 metadata name " + single_quoted(name) + " must be lowercase letters, digits, '-' or '_'");
    }
    const bool good_value = std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c <= 0x7E; }) &&
                            (value.empty() || (value.front() != ' ' && value.back() != ' '));
    if (!good_value) {
      return Error::usage("S3 metadata value of " + single_quoted(name) +
                          " must be printable ASCII without leading or trailing blanks");
    }
    total += name.size() + value.size();
  }
  if (total > k_max_metadata_bytes) {
    return Error::usage("S3 metadata is " + std::to_string(total) + " bytes; the limit is " +
                        std::to_string(k_max_metadata_bytes));
  }
  return {};
}

}  // namespace

class S3Client::Impl {
 public:
  Impl(S3Location location, S3Credentials credentials, S3Options options, RetryTiming timing)
      : m_location(std::move(location)),
        m_credentials(std::move(credentials)),
        m_engine(engine_options(options), std::move(timing)) {
    while (!m_location.endpoint.empty() && m_location.endpoint.back() == '/') {
      m_location.endpoint.pop_back();
    }
    m_key_prefix = m_location.prefix.empty() ? std::string() : m_location.prefix + "/";
    if (m_location.path_style) {
      m_bucket_url = m_location.endpoint + "/" + m_location.bucket;
    } else {
      const std::size_t authority = m_location.endpoint.find("://") + 3;
      m_bucket_url = m_location.endpoint.substr(0, authority) + m_location.bucket + "." +
                     m_location.endpoint.substr(authority);
    }
  }

  const S3Location& location() const { return m_location; }
  void cancel() noexcept { m_engine.cancel(); }

  Result<std::optional<S3Object>> head(const std::string& name) {
    OPCACHE_TRY(check_name(name));
    Exchange exchange;
    prepare(exchange, "HEAD", object_url(name));
    OPCACHE_TRY(execute(exchange));
    if (exchange.status == 404) {
      return std::optional<S3Object>();
    }
    if (exchange.status != 200) {
      return status_error(exchange);
    }
    OPCACHE_TRY_ASSIGN(S3Object object, object_from_headers(name, exchange));
    return std::optional<S3Object>(std::move(object));
  }

  Result<bool> get_to_fd(const std::string& name, int fd, std::int64_t max_bytes) {
    OPCACHE_TRY(check_name(name));
    if (max_bytes < 0) {
      return Error::usage("S3 GET: max_bytes must not be negative");
    }
    OPCACHE_TRY_ASSIGN(DownloadSink sink, DownloadSink::open(fd, max_bytes));
    Exchange exchange;
    prepare(exchange, "GET", object_url(name));
    exchange.sink = &sink;
    OPCACHE_TRY(execute(exchange));
    if (exchange.status == 404 && error_code_of(exchange) != "NoSuchBucket") {
      return false;
    }
    if (exchange.status != 200) {
      return status_error(exchange);
    }
    return true;
  }

  Status put_from_file(const std::string& name, const fs::path& file,
                       const std::map<std::string, std::string>& metadata, const std::string& content_type) {
    OPCACHE_TRY(check_name(name));
    OPCACHE_TRY(check_metadata(metadata));
    OPCACHE_TRY_ASSIGN(BodySource body, BodySource::from_file(file));
    if (body.size() > k_max_single_put_bytes) {
      return Error::usage("cannot upload " + file.string() + ": larger than the 5 GiB limit of a single S3 PUT");
    }
    Exchange exchange;
    prepare(exchange, "PUT", object_url(name));
    exchange.body = &body;
    exchange.payload_hash = k_unsigned_payload;
    exchange.headers.push_back("Content-Type: " + content_type);
    for (const auto& [key, value] : metadata) {
      exchange.headers.push_back(std::string(k_metadata_header_prefix) + key + ": " + value);
    }
    OPCACHE_TRY(execute(exchange));
    if (exchange.status != 200) {
      return status_error(exchange);
    }
    return body.check_unchanged();
  }

  Result<std::optional<std::string>> put_text(const std::string& name, const std::string& text,
                                              const S3WriteCondition& condition, const std::string& content_type) {
    OPCACHE_TRY(check_name(name));
    if (text.size() > k_max_text_bytes) {
      return Error::usage("S3 PUT of " + name + ": a text object is at most 64 MiB");
    }
    const std::string payload_hash = base::sha256_hex(text);
    BodySource body = BodySource::from_memory(text);
    Exchange exchange;
    prepare(exchange, "PUT", object_url(name));
    exchange.body = &body;
    exchange.payload_hash = payload_hash;
    exchange.headers.push_back("Content-Type: " + content_type);
    if (condition.kind == S3WriteCondition::Kind::absent) {
      exchange.headers.emplace_back("If-None-Match: *");
    } else if (condition.kind == S3WriteCondition::Kind::etag) {
      exchange.headers.push_back("If-Match: \"" + condition.etag + "\"");
    }
    OPCACHE_TRY(execute(exchange));
    if (exchange.status == 412 || (exchange.status == 409 && condition.kind != S3WriteCondition::Kind::always)) {
      return std::optional<std::string>();
    }
    if (exchange.status == 501 && condition.kind != S3WriteCondition::Kind::always) {
      return with_suffix(status_error(exchange), "; this store does not implement conditional writes");
    }
    if (exchange.status != 200) {
      return status_error(exchange);
    }
    return std::optional<std::string>(strip_quotes(exchange.response_headers.get("etag").value_or("")));
  }

  Result<std::optional<S3Text>> get_text(const std::string& name, std::size_t max_bytes) {
    OPCACHE_TRY(check_name(name));
    Exchange exchange;
    prepare(exchange, "GET", object_url(name));
    exchange.memory_limit = std::max(max_bytes, k_max_error_body_bytes);
    OPCACHE_TRY(execute(exchange));
    if (exchange.status == 404 && error_code_of(exchange) != "NoSuchBucket") {
      return std::optional<S3Text>();
    }
    if (exchange.status != 200) {
      return status_error(exchange);
    }
    if (exchange.response_body.size() > max_bytes) {
      return Error::remote(exchange.describe() + ": the object is larger than " + std::to_string(max_bytes) +
                           " bytes");
    }
    return std::optional<S3Text>(S3Text{std::move(exchange.response_body),
                                        strip_quotes(exchange.response_headers.get("etag").value_or(""))});
  }

  Status remove_blindly(const std::string& name) {
    OPCACHE_TRY(check_name(name));
    Exchange exchange;
    prepare(exchange, "DELETE", object_url(name));
    OPCACHE_TRY(execute(exchange));
    if (exchange.status != 204 && exchange.status != 200 && exchange.status != 404) {
      return status_error(exchange);
    }
    return {};
  }

  const S3Credentials& credentials() const { return m_credentials; }

  std::string object_url(const std::string& name) const {
    return m_bucket_url + "/" + s3_uri_encode(m_key_prefix + name, true);
  }

  Result<bool> remove(const std::string& name) {
    OPCACHE_TRY_ASSIGN(auto existing, head(name));
    if (!existing) {
      return false;
    }
    Exchange exchange;
    prepare(exchange, "DELETE", object_url(name));
    OPCACHE_TRY(execute(exchange));
    if (exchange.status == 404 && error_code_of(exchange) != "NoSuchBucket") {
      return false;
    }
    if (exchange.status != 204 && exchange.status != 200) {
      return status_error(exchange);
    }
    return true;
  }

  Result<S3ListPage> list(const std::string& name_prefix, const std::string& start_after,
                          const std::string& continuation_token, int max_keys) {
    if (max_keys < 1 || max_keys > k_max_list_keys) {
      return Error::usage("S3 list: max_keys must be 1 to 1000, not " + std::to_string(max_keys));
    }
    if (!name_prefix.empty()) {
      OPCACHE_TRY(check_name(name_prefix, "name prefix"));
    }
    if (!start_after.empty()) {
      OPCACHE_TRY(check_name(start_after, "start-after name"));
    }
    std::vector<std::pair<std::string, std::string>> query = {{"list-type", "2"},
                                                              {"max-keys", std::to_string(max_keys)}};
    if (!continuation_token.empty()) {
      query.emplace_back("continuation-token", continuation_token);
    }
    if (!m_key_prefix.empty() || !name_prefix.empty()) {
      query.emplace_back("prefix", m_key_prefix + name_prefix);
    }
    if (!start_after.empty()) {
      query.emplace_back("start-after", m_key_prefix + start_after);
    }
    Exchange exchange;
    prepare(exchange, "GET", bucket_url() + "?" + sigv4_canonical_query(std::move(query)));
    exchange.memory_limit = k_max_list_body_bytes;
    OPCACHE_TRY(execute(exchange));
    if (exchange.status != 200) {
      return status_error(exchange);
    }
    auto page = parse_list_objects_v2(exchange.response_body, m_key_prefix);
    if (!page) {
      return page.error().with_context(exchange.describe());
    }
    return page;
  }

  Status create_bucket_if_missing() {
    Exchange probe;
    prepare(probe, "HEAD", bucket_url());
    OPCACHE_TRY(execute(probe));
    if (probe.status == 200) {
      return {};
    }
    if (probe.status != 404) {
      return status_error(probe);
    }
    const std::string configuration =
        m_location.region == k_s3_default_region
            ? std::string()
            : "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LocationConstraint>" +
                  m_location.region + "</LocationConstraint></CreateBucketConfiguration>";
    const std::string configuration_hash = base::sha256_hex(configuration);
    BodySource body = BodySource::from_memory(configuration);
    Exchange create;
    prepare(create, "PUT", bucket_url());
    create.body = &body;
    create.payload_hash = configuration_hash;
    OPCACHE_TRY(execute(create));
    if (create.status == 200 || (create.status == 409 && error_code_of(create) == "BucketAlreadyOwnedByYou")) {
      return {};
    }
    return status_error(create);
  }

 private:
  std::string bucket_url() const { return m_location.path_style ? m_bucket_url : m_bucket_url + "/"; }

  // An exchange does not move (callbacks point into it during a transfer):
  // callers declare it and fill it in place.
  void prepare(Exchange& exchange, const char* method, std::string url) const {
    exchange.method = method;
    exchange.url = std::move(url);
    exchange.location = &m_location;
    exchange.credentials = &m_credentials;
  }

  static std::string error_code_of(const Exchange& exchange) {
    auto document = parse_s3_error(exchange.response_body);
    return document ? document->code : std::string();
  }

  Result<S3Object> object_from_headers(const std::string& name, const Exchange& exchange) const {
    const auto length = exchange.response_headers.get("content-length");
    const auto size = base::parse_integer(length.value_or(""), 0);
    if (!size) {
      return Error::remote(exchange.describe() + ": the response has no valid Content-Length");
    }
    S3Object object{name, *size, strip_quotes(exchange.response_headers.get("etag").value_or("")), {}};
    for (const auto& [header, value] : exchange.response_headers.all()) {
      if (header.size() > k_metadata_header_prefix.size() && header.starts_with(k_metadata_header_prefix)) {
        object.metadata[header.substr(k_metadata_header_prefix.size())] = value;
      }
    }
    return object;
  }

  Error status_error(const Exchange& exchange) const {
    std::string detail;
    std::string code;
    if (auto document = parse_s3_error(exchange.response_body)) {
      code = document->code;
      detail = document->code + (document->message.empty() ? "" : ": " + document->message);
    }
    if (exchange.status == 403 || is_credential_error(code)) {
      detail = "the credentials from " + m_credentials.source + " were refused" +
               (detail.empty() ? std::string() : " (" + detail + ")") +
               "; check the access key, secret key, session token, region and bucket permissions";
    } else if (exchange.status == 400 && detail.empty() && std::string_view(exchange.method) == "HEAD") {
      detail = "a HEAD response carries no error document; a wrong region or an invalid session token are "
               "common causes";
    } else if (auto region = exchange.response_headers.get("x-amz-bucket-region");
               region && *region != m_location.region) {
      detail += (detail.empty() ? "" : "; ") + std::string("the bucket is in region ") + *region +
                " (the URL says " + m_location.region + ")";
    }
    return with_suffix(http_status_error(k_what, exchange.method, exchange.url, exchange.status, detail),
                       attempts_suffix(exchange.attempts));
  }

  static EngineOptions engine_options(const S3Options& options) {
    EngineOptions engine;
    engine.connect_timeout_ms = options.connect_timeout_ms;
    engine.timeout_ms = options.timeout_ms;
    engine.retry = RetryPolicy{options.retries, options.retry_timeouts};
    engine.user_agent = std::string("opcache/") + k_version_string;
    return engine;
  }

  // Performs the exchange with retries. Success means an HTTP response arrived
  // (any status: callers interpret it); errors are transport or local failures.
  Status execute(Exchange& exchange) const {
    OPCACHE_TRY_ASSIGN(TransferOutcome outcome, m_engine.perform(exchange));
    exchange.attempts = outcome.attempts;
    exchange.status = outcome.status;
    if (outcome.code != CURLE_OK) {
      return with_suffix(transfer_error(k_what, exchange.method, exchange.url, outcome.code, outcome.error_text),
                         attempts_suffix(outcome.attempts));
    }
    return {};
  }

  S3Location m_location;
  S3Credentials m_credentials;
  std::string m_key_prefix;
  std::string m_bucket_url;
  mutable RequestEngine m_engine;
};

S3Client::S3Client(S3Location location, S3Credentials credentials, S3Options options, RetryTiming timing)
    : m_impl(std::make_unique<Impl>(std::move(location), std::move(credentials), options, std::move(timing))) {}

S3Client::~S3Client() = default;
S3Client::S3Client(S3Client&&) noexcept = default;
S3Client& S3Client::operator=(S3Client&&) noexcept = default;

const S3Location& S3Client::location() const { return m_impl->location(); }

void S3Client::cancel() noexcept { m_impl->cancel(); }

Result<std::optional<S3Object>> S3Client::head(const std::string& name) { return m_impl->head(name); }

Result<bool> S3Client::get_to_fd(const std::string& name, int fd, std::int64_t max_bytes) {
  return m_impl->get_to_fd(name, fd, max_bytes);
}

Status S3Client::put_from_file(const std::string& name, const std::filesystem::path& file,
                               const std::map<std::string, std::string>& metadata, const std::string& content_type) {
  return m_impl->put_from_file(name, file, metadata, content_type);
}

Result<bool> S3Client::remove(const std::string& name) { return m_impl->remove(name); }

Result<std::optional<std::string>> S3Client::put_text(const std::string& name, const std::string& body,
                                                      const S3WriteCondition& condition,
                                                      const std::string& content_type) {
  return m_impl->put_text(name, body, condition, content_type);
}

Result<std::optional<S3Text>> S3Client::get_text(const std::string& name, std::size_t max_bytes) {
  return m_impl->get_text(name, max_bytes);
}

Status S3Client::remove_blindly(const std::string& name) { return m_impl->remove_blindly(name); }

std::string S3Client::object_url(const std::string& name) const { return m_impl->object_url(name); }

const S3Credentials& S3Client::credentials() const { return m_impl->credentials(); }

Result<S3ListPage> S3Client::list(const std::string& name_prefix, const std::string& start_after,
                                  const std::string& continuation_token, int max_keys) {
  return m_impl->list(name_prefix, start_after, continuation_token, max_keys);
}

Status S3Client::create_bucket_if_missing() { return m_impl->create_bucket_if_missing(); }

}  // namespace opcache::remote
