// The server's embedded storage: a local store (same layout, index, aging
// and crash safety as the client's).
#pragma once

#include <filesystem>
#include <memory>

#include "server/storage.hpp"
#include "store/local_store.hpp"

namespace opcache::server {

/// Opens (creating) a local store at `root` for serving. Aging follows
/// `options.aging` exactly as on a client.
Result<std::unique_ptr<Storage>> make_local_storage(store::StoreOptions options);

}  // namespace opcache::server
