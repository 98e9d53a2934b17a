// Revocation on a remote without a server (file://, s3://), where the client
// itself keeps the tombstones (docs/remotes.md "Revocation"): the one way the
// backends list them, and write one and delete the entry per key. Each
// backend supplies only its storage operations.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "opcache/result.hpp"
#include "remote/remote_store.hpp"
#include "store/revocation.hpp"

namespace opcache::remote {

/// Most tombstones one revocations() page holds.
inline constexpr std::size_t k_client_revocation_page = 10000;

/// Lists the tombstones of `since_ms` or later, at most `limit`, oldest
/// first; sets `*truncated` when more matched.
using TombstoneLister =
    std::function<Result<std::vector<store::Tombstone>>(std::int64_t since_ms, std::size_t limit, bool* truncated)>;

/// A page of the tombstones revoked at Unix second `since_s` or later, with
/// `now_s` taken before `list` runs (so that the next page, from `now_s`,
/// misses nothing written meanwhile).
Result<std::optional<RevocationPage>> list_revocations(std::int64_t since_s, const TombstoneLister& list);

/// For each of `keys`, in order: writes its tombstone (`reason`, now) with
/// `write_tombstone`, then deletes its entry with `remove_entry`, which says
/// whether there was one. The first failure stops it.
Result<std::vector<bool>> revoke_each(const std::vector<std::string>& keys, const std::string& reason,
                                      const std::function<Status(const store::Tombstone&)>& write_tombstone,
                                      const std::function<Result<bool>(const std::string&)>& remove_entry);

}  // namespace opcache::remote
