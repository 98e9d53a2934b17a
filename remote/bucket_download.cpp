#include "remote/bucket_download.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "base/file_io.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"
#include "remote/curl_handle.hpp"
#include "remote/request_engine.hpp"

namespace opcache::remote {

namespace {

constexpr const char* k_bucket_what = "bucket";
constexpr std::size_t k_max_bucket_error_body = 4096;  // of an S3 error document, for the message

// One GET of a presigned URL: only the request libcurl makes of the URL (no
// header of ours), a 200 body hashed as it is written to the descriptor.
class BucketGet final : public Transfer {
 public:
  BucketGet(std::string url, int fd, std::int64_t max_bytes)
      : m_url(std::move(url)), m_fd(fd), m_max_bytes(max_bytes) {}

  Status configure(CURL* handle) override {
    m_handle = handle;
    curl_easy_setopt(handle, CURLOPT_URL, m_url.c_str());
    set_write_callback<&BucketGet::on_data>(handle, *this);
    return {};
  }

  Status rewind() override {
    m_hash = base::Sha256();
    m_written = 0;
    m_error_body.clear();
    if (::ftruncate(m_fd, 0) != 0 || ::lseek(m_fd, 0, SEEK_SET) != 0) {
      return base::errno_error("cannot restart the download into", "fd " + std::to_string(m_fd), errno);
    }
    return {};
  }

  std::optional<Error> local_error() const override { return m_local_error; }

  const std::string& url() const noexcept { return m_url; }
  const std::string& error_body() const noexcept { return m_error_body; }
  std::string digest() { return m_hash.finish_hex(); }

 private:
  std::size_t on_data(char* data, std::size_t bytes) {
    long status = 0;
    curl_easy_getinfo(m_handle, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
      m_error_body.append(
          data, std::min(bytes, k_max_bucket_error_body - std::min(k_max_bucket_error_body, m_error_body.size())));
      return bytes;
    }
    m_written += static_cast<std::int64_t>(bytes);
    if (m_written > m_max_bytes) {
      m_local_error = Error::remote("the bundle at " + redact_url(m_url) + " is larger than " +
                                    std::to_string(m_max_bytes) + " bytes");
      return 0;
    }
    if (!base::write_all(m_fd, data, bytes, "download")) {
      m_local_error = Error::io("cannot write the download from " + redact_url(m_url));
      return 0;
    }
    m_hash.update(data, bytes);
    return bytes;
  }

  std::string m_url;
  int m_fd;
  std::int64_t m_max_bytes;
  CURL* m_handle = nullptr;
  base::Sha256 m_hash;
  std::int64_t m_written = 0;
  std::string m_error_body;
  std::optional<Error> m_local_error;
};

// Runs `download` and checks what came: a 200 whose bytes have `digest`.
Status check_download(RequestEngine& engine, BucketGet& download, const std::string& digest) {
  OPCACHE_TRY_ASSIGN(TransferOutcome outcome, engine.perform(download));
  if (outcome.code != CURLE_OK) {
    return transfer_error(k_bucket_what, "GET", download.url(), outcome.code, outcome.error_text);
  }
  if (outcome.status != 200) {
    return http_status_error(k_bucket_what, "GET", download.url(), outcome.status,
                             download.error_body().substr(0, 200));
  }
  if (const std::string received = download.digest(); received != digest) {
    return Error::corrupt("GET " + redact_url(download.url()) + " gave a bundle of SHA-256 " + received + ", not the " +
                          digest + " the server announced");
  }
  return {};
}

}  // namespace

EngineOptions bucket_engine_options(EngineOptions server) {
  server.retry = RetryPolicy{0, false};
  return server;
}

std::string etag_digest(std::string_view etag) {
  if (etag.size() != 66 || etag.front() != '"' || etag.back() != '"') {
    return {};
  }
  const std::string_view digest = etag.substr(1, 64);
  return base::is_sha256_hex(digest) ? std::string(digest) : std::string();
}

Status follow_bucket_redirect(RequestEngine& engine, const ResponseHeaders& redirect, int fd, std::int64_t max_bytes) {
  const auto location = redirect.get("location");
  const std::string digest = etag_digest(redirect.get("etag").value_or(""));
  if (!location || location->empty() || digest.empty()) {
    return Error::remote("the server answered 307 without a Location and the ETag of the bundle");
  }
  BucketGet download(*location, fd, max_bytes);
  Status downloaded = check_download(engine, download, digest);
  if (!downloaded && downloaded.error().code() != ErrorCode::io) {
    OPCACHE_TRY(download.rewind());  // empty again, for the server's own GET
  }
  return downloaded;
}

}  // namespace opcache::remote
