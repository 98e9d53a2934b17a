// Build leases in the bucket every replica over one s3:// storage shares
// (docs/protocol.md "Build leases", docs/operations.md "Replicas"): a lease
// is a small JSON object created with a conditional write (If-None-Match:
// *), renewed, released and taken over after expiry with If-Match on its
// ETag, so two replicas never hand out two live leases on one key. A bucket
// that does not honour conditional writes is found out at start, and the
// server keeps its leases in memory (one replica) and says so.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "server/lease_book.hpp"
#include "server/storage.hpp"

namespace opcache::remote {
class S3Client;
}

namespace opcache::server {

/// The lease book kept in `client`'s location, one object per key
/// (`v1/leases/<key>.json`, docs/formats.md "Lease objects"), judging
/// expiry by `now` (a wall clock: every replica reads the same times). The
/// caller checked that the store honours conditional writes; `client` must
/// outlive the book. Thread-safe.
std::unique_ptr<LeaseBook> make_bucket_lease_book(remote::S3Client& client,
                                                  std::function<std::chrono::system_clock::time_point()> now);

/// The lease book of a server over `storage`: the bucket's when the storage
/// has a shared bucket that honours conditional writes, else one in memory.
/// `*note` receives the line the start-up log should say about the choice
/// ("" when there is nothing to say: local storage).
std::unique_ptr<LeaseBook> open_lease_book(Storage& storage, std::string* note);

}  // namespace opcache::server
