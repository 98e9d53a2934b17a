// The server's S3 storage: bundles and listing markers in any S3-compatible
// bucket (layout: remote/s3/layout.hpp). The server keeps no state of its own,
// so several replicas can serve one bucket. Aging is left to bucket lifecycle
// rules (docs/operations.md).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "remote/s3/client.hpp"
#include "server/storage.hpp"

namespace opcache::server {

/// Opens S3 storage for `url` (s3://bucket/prefix?endpoint=…&region=…),
/// credentials from the environment or the shared credentials file. Checks
/// the bucket (creating it if missing) so bad settings fail at start-up.
/// Uploads are spooled to `temp_dir` (empty: the system temp directory).
Result<std::unique_ptr<Storage>> make_s3_storage(const std::string& url, const base::EnvLookup& env,
                                                 const std::filesystem::path& temp_dir, std::int64_t max_bundle_bytes);

}  // namespace opcache::server
