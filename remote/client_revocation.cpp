#include "remote/client_revocation.hpp"

#include <chrono>

#include "base/try.hpp"

namespace opcache::remote {

Result<std::optional<RevocationPage>> list_revocations(std::int64_t since_s, const TombstoneLister& list) {
  RevocationPage page;
  page.now_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  OPCACHE_TRY_ASSIGN(page.tombstones, list(since_s * 1000, k_client_revocation_page, &page.truncated));
  return std::optional<RevocationPage>(std::move(page));
}

Result<std::vector<bool>> revoke_each(const std::vector<std::string>& keys, const std::string& reason,
                                      const std::function<Status(const store::Tombstone&)>& write_tombstone,
                                      const std::function<Result<bool>(const std::string&)>& remove_entry) {
  const std::int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::vector<bool> deleted;
  for (const auto& key : keys) {
    OPCACHE_TRY(write_tombstone(store::Tombstone{key, reason, now_ms}));
    OPCACHE_TRY_ASSIGN(bool had, remove_entry(key));
    deleted.push_back(had);
  }
  return deleted;
}

}  // namespace opcache::remote
