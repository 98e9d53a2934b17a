// Chooses the server's storage backend from its --storage value:
// "s3://bucket/prefix?..." is S3, anything else a local directory.
#pragma once

#include <memory>
#include <string>

#include "opcache/result.hpp"
#include "server/server_config.hpp"
#include "server/storage.hpp"
#include "store/scenario.hpp"

namespace opcache::server {

/// Opens the storage named by `config.storage`. A local store ages by the
/// same rules as a client's (op_cache.ini in it, ASCEND_* variables).
/// `warn` receives setting warnings.
Result<std::unique_ptr<Storage>> open_storage(const ServerConfig& config, const base::EnvLookup& env,
                                              const std::function<void(const std::string&)>& warn);

}  // namespace opcache::server
