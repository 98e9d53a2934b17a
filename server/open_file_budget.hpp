// How many files the server keeps open beside the bundles it holds in
// memory (server/local_storage): a large bundle's file stays open so its
// GETs go out by sendfile(2) without an open(2) and close(2) each, but never
// so many that connections run out of descriptors.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "base/file_io.hpp"

namespace opcache::server {

/// A count of kept-open files with a ceiling. Thread-safe. A kept file may
/// outlive the budget that counted it (it holds the count).
class OpenFileBudget {
 public:
  /// Allows at most `limit` files kept at once (0: none).
  explicit OpenFileBudget(std::size_t limit);

  /// `file`, shared, counted against the budget until the last holder lets it
  /// go (then it closes); null, and `file` closed, when the budget is spent.
  std::shared_ptr<const base::FileDescriptor> keep(base::FileDescriptor file);

  /// Files kept now.
  std::size_t kept() const noexcept;

 private:
  struct Count {
    std::atomic<std::size_t> kept{0};
    std::size_t limit = 0;
  };
  std::shared_ptr<Count> m_count;
};

/// The default budget of a server: a quarter of the soft RLIMIT_NOFILE, so
/// connections, uploads and the store keep the rest.
std::size_t default_open_file_budget();

}  // namespace opcache::server
