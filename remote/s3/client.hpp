// A client for S3-compatible object stores (AWS S3, MinIO, Ceph RGW) over
// libcurl, signed with libcurl's built-in SigV4 (CURLOPT_AWS_SIGV4); no AWS SDK.
// Used by the team server's S3 storage backend and by the `s3://` remote.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/result.hpp"
#include "remote/backoff.hpp"
#include "remote/s3/credentials.hpp"
#include "remote/s3/listing.hpp"
#include "remote/s3/url.hpp"

namespace opcache::remote {

/// When a write may happen (S3 conditional writes: `If-None-Match: *` and
/// `If-Match`, which AWS S3, MinIO and Ceph RGW honour).
struct S3WriteCondition {
  enum class Kind { always, absent, etag };
  Kind kind = Kind::always;
  std::string etag;  ///< for Kind::etag: the object's current ETag, without quotes

  /// Writes whatever is there.
  static S3WriteCondition always() { return {}; }
  /// Writes only when no object has the name (If-None-Match: *).
  static S3WriteCondition if_absent() { return {Kind::absent, {}}; }
  /// Writes only when the object's ETag is still `etag` (If-Match).
  static S3WriteCondition if_etag(std::string etag) { return {Kind::etag, std::move(etag)}; }
};

/// A small object read whole, with the ETag a conditional write names.
struct S3Text {
  std::string body;
  std::string etag;  ///< without quotes
};

/// Limits for every request of one client.
struct S3Options {
  long connect_timeout_ms = 3000;  ///< per attempt, to establish the connection
  long timeout_ms = 30000;         ///< per attempt, for the whole request including the body
  int retries = 2;                 ///< extra attempts after a transient failure
  /// Whether a request that ran out of time is retried like other transient
  /// failures. The s3:// remote says no: a lookup must cost one timeout.
  bool retry_timeouts = true;
};

/// An S3 client bound to one location and one set of credentials.
///
/// Thread-safe: calls may run concurrently from many threads. Connections are
/// reused through a pool of libcurl easy handles.
///
/// Requests are signed with SigV4 by libcurl. Idempotent requests (all of
/// them: GET, HEAD, whole-object PUT, DELETE, list) go through the request
/// engine and its one retry policy (remote/backoff.hpp, docs/remotes.md):
/// connection failures, timeouts (unless S3Options says not), 5xx and 429
/// are retried; other 4xx never. A 403, or an S3 error code about credentials
/// (InvalidToken, ExpiredToken, AuthorizationHeaderMalformed, ...), is a
/// `remote` error saying the credentials (named by their source) were refused. Network failures are `remote` errors (`timeout`
/// when a limit ran out) whose message names the method and URL, never the
/// credentials.
///
/// All `name`s are relative to the location's prefix ("a/b" is the key
/// "<prefix>/a/b"), must be non-empty valid UTF-8 without control characters,
/// and are sent URL-encoded per SigV4 (only A-Z a-z 0-9 - _ . ~ / verbatim).
class S3Client {
 public:
  /// A client for `location` signing with `credentials`. Performs no I/O.
  /// Retries wait through `timing` (tests inject theirs).
  S3Client(S3Location location, S3Credentials credentials, S3Options options = {},
           RetryTiming timing = RetryTiming::system());
  ~S3Client();
  /// Moves the client; the moved-from object may only be destroyed or assigned to.
  S3Client(S3Client&&) noexcept;
  S3Client& operator=(S3Client&&) noexcept;
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  /// The location this client reads and writes.
  const S3Location& location() const;

  /// The object's size, ETag and user metadata (x-amz-meta-*); nullopt on 404
  /// (a missing bucket also reads as absent: HEAD responses carry no body).
  Result<std::optional<S3Object>> head(const std::string& name);

  /// Streams the object's body to `fd` (written at its current position, no
  /// whole-object buffering). False on 404 NoSuchKey; a missing bucket is an
  /// error. An object larger than `max_bytes` is a `remote` error (detected from
  /// Content-Length before any byte is written, else while streaming). After an
  /// error `fd` may hold a partial body; the caller discards it. A transfer that
  /// fails midway is retried only when `fd` is a regular file (it is truncated
  /// back to where it started); write failures on `fd` are `io` errors.
  Result<bool> get_to_fd(const std::string& name, int fd, std::int64_t max_bytes);

  /// Uploads `file` as the whole object (a single PUT with Content-Length,
  /// streamed from the file), replacing any previous version, with user
  /// `metadata` (names: lowercase a-z 0-9 - _; values: printable ASCII without
  /// leading or trailing blanks; 2 KiB in total) and `content_type`. Invalid
  /// metadata is a `usage` error; an unreadable file is `not_found`/`io`; a file
  /// that changes size during the upload is an `io` error. Single PUT: at most
  /// 5 GiB (larger is a `usage` error).
  Status put_from_file(const std::string& name, const std::filesystem::path& file,
                       const std::map<std::string, std::string>& metadata,
                       const std::string& content_type = "application/octet-stream");

  /// Uploads `body` (at most 64 MiB, sent from memory) as the whole object when `condition`
  /// holds. Returns the new object's ETag, or std::nullopt when the store
  /// refused the condition (412 Precondition Failed, or 409 from a
  /// conditional write racing another). A store that does not implement
  /// conditional writes answers 501: a `remote` error saying so. A retried
  /// attempt may meet its own earlier write (412 for Kind::absent): callers
  /// read the object back to tell (the lease book does).
  Result<std::optional<std::string>> put_text(const std::string& name, const std::string& body,
                                              const S3WriteCondition& condition,
                                              const std::string& content_type = "application/json");

  /// The whole object (at most `max_bytes`, else a `remote` error) with its
  /// ETag; std::nullopt on 404 NoSuchKey.
  Result<std::optional<S3Text>> get_text(const std::string& name, std::size_t max_bytes);

  /// Deletes the object without looking first (DELETE answers 204 whether
  /// or not it existed); for objects whose absence is as good as their
  /// deletion (a lease whose entry was stored).
  Status remove_blindly(const std::string& name);

  /// The object's URL, unsigned ("<endpoint>/<bucket>/<prefix>/<name>" or
  /// virtual-hosted), as requests to it use; for presigned URLs.
  std::string object_url(const std::string& name) const;

  /// The credentials requests are signed with.
  const S3Credentials& credentials() const;

  /// Deletes the object. S3 answers DELETE with 204 whether or not the key
  /// existed, so this sends HEAD first: false (and no DELETE) when the object
  /// is absent, else DELETE and true. A concurrent writer may recreate the key
  /// at any time; the result reflects the HEAD.
  Result<bool> remove(const std::string& name);

  /// One page (at most `max_keys`, 1..1000) of ListObjectsV2 over the keys
  /// "<prefix>/<name_prefix>…", in key order, names relative to the prefix.
  /// `start_after` (a name) and `continuation_token` (from the previous page)
  /// may be empty. A response that is not a well-formed ListBucketResult, or a
  /// key outside the prefix, is a `remote` error.
  Result<S3ListPage> list(const std::string& name_prefix, const std::string& start_after,
                          const std::string& continuation_token, int max_keys);

  /// Aborts the requests in progress and refuses later ones
  /// (RequestEngine::cancel). Thread-safe.
  void cancel() noexcept;

  /// Creates the bucket unless it exists and is ours (HEAD bucket, then PUT
  /// with a LocationConstraint outside us-east-1). For tests and first-time
  /// setup; a bucket owned by someone else is a `remote` error.
  Status create_bucket_if_missing();

 private:
  class Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace opcache::remote
