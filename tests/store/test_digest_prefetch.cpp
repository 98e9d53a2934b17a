// store/digest_prefetch: files digested while the traced command runs, into
// the DigestCache that observe_build asks afterwards.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "store/digest_prefetch.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using opcache::test::TempDir;
using opcache::test::write_text;
using opcache::trace::Access;
using opcache::trace::PathEvent;

namespace digest_prefetch_test {

std::size_t entries_in(const fs::path& directory) {
  if (!fs::exists(directory)) {
    return 0;
  }
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(directory), fs::directory_iterator()));
}

PathEvent event_of(const fs::path& path, Access access) {
  return {path.string(), access, opcache::trace::file_identity(path.string())};
}

TEST_CASE("store::DigestPrefetch digests the files read and run, not those the tree wrote first") {
  TempDir temp;
  const fs::path digests = temp.path() / "digests";
  const std::string large(opcache::base::DigestCache::kRememberedFrom, 'x');
  for (const char* name : {"cc1", "libc.so", "own.s", "tool"}) {
    write_text(temp.path() / name, large + name);
  }
  opcache::test::age_past_digest_too_new();
  const opcache::base::DigestCache cache(digests);
  {
    opcache::store::DigestPrefetch prefetch(cache, true);
    prefetch.offer(event_of(temp.path() / "cc1", Access::executed));
    prefetch.offer(event_of(temp.path() / "libc.so", Access::read));
    prefetch.offer({(temp.path() / "own.s").string(), Access::written, std::nullopt});
    prefetch.offer(event_of(temp.path() / "own.s", Access::read));  // the tree's own temporary
    prefetch.offer({(temp.path() / "gone.h").string(), Access::absent, std::nullopt});
    prefetch.finish();
    prefetch.offer(event_of(temp.path() / "tool", Access::read));  // after finish: ignored
  }
  CHECK(entries_in(digests) == 2);

  TempDir other;
  const opcache::base::DigestCache programs_not_digested(other.path() / "digests");
  opcache::store::DigestPrefetch prefetch(programs_not_digested, false);
  prefetch.offer(event_of(temp.path() / "cc1", Access::executed));
  prefetch.offer(event_of(temp.path() / "tool", Access::read));
  prefetch.finish();
  CHECK(entries_in(other.path() / "digests") == 1);
}

TEST_CASE("store::DigestPrefetch with nothing offered starts no thread and finishes at once, twice") {
  opcache::store::DigestPrefetch prefetch(opcache::base::DigestCache(), true);
  prefetch.finish();
  prefetch.finish();
}

}  // namespace digest_prefetch_test
