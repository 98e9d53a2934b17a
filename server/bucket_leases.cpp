#include "server/bucket_leases.hpp"

#include "server/lease_table.hpp"

namespace opcache::server {

std::unique_ptr<LeaseBook> open_lease_book(Storage& storage, std::string* note) {
  note->clear();
  if (storage.shared_bucket() != nullptr) {
    *note = "build leases: in this replica's memory";
  }
  return std::make_unique<MemoryLeaseBook>();
}

}  // namespace opcache::server
