// base/file_digest: digests of files and trees, remembered by file identity.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "base/file_digest.hpp"
#include "base/sha256.hpp"
#include "tests/support/files.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using opcache::base::DigestCache;
using opcache::test::TempDir;
using opcache::test::write_text;

TEST_CASE("base::file_sha256 digests the contents, and a missing file is not_found") {
  TempDir temp;
  write_text(temp.path() / "k.c", "int f(int x) { return x * 3 + 1; }\n");
  auto digest = opcache::base::file_sha256(temp.path() / "k.c");
  REQUIRE(digest.ok());
  CHECK(*digest == opcache::base::sha256_hex("int f(int x) { return x * 3 + 1; }\n"));
  auto missing = opcache::base::file_sha256(temp.path() / "absent.c");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == opcache::ErrorCode::not_found);
}

TEST_CASE("base::DigestCache computes once per file identity and again when the file changes") {
  TempDir temp;
  const fs::path file = temp.path() / "cc";
  write_text(file, "compiler v1");
  opcache::test::age_past_digest_too_new();
  DigestCache cache(temp.path() / "digests");
  int computed = 0;
  auto compute = [&](const fs::path& path) -> opcache::Result<std::string> {
    ++computed;
    return opcache::base::file_sha256(path);
  };
  auto first = cache.digest(file, "sha256", compute);
  auto second = cache.digest(file, "sha256", compute);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(*first == *second);
  CHECK(computed == 1);
  CHECK(std::distance(fs::directory_iterator(temp.path() / "digests"), fs::directory_iterator()) == 1);

  // Another method is another entry; a changed file is recomputed.
  CHECK(cache.digest(file, "other", [](const fs::path&) -> opcache::Result<std::string> { return std::string("x"); })
            .value() == "x");
  write_text(file, "compiler v2, longer");
  opcache::test::age_past_digest_too_new();
  auto third = cache.digest(file, "sha256", compute);
  REQUIRE(third.ok());
  CHECK(computed == 2);
  CHECK(*third == opcache::base::sha256_hex("compiler v2, longer"));

  // A corrupt entry is recomputed, not trusted, by a cache that does not
  // remember the digest in memory (another process).
  for (const auto& entry : fs::directory_iterator(temp.path() / "digests")) {
    write_text(entry.path(), "garbage");
  }
  CHECK(cache.digest(file, "sha256", compute).value() == *third);  // this one remembers it
  CHECK(computed == 2);
  DigestCache another_process(temp.path() / "digests");
  CHECK(another_process.digest(file, "sha256", compute).value() == *third);
  CHECK(computed == 3);
}

TEST_CASE("base::DigestCache remembers small files in memory, shared by its copies, and forgets a changed file") {
  TempDir temp;
  const fs::path digests = temp.path() / "digests";
  const fs::path file = temp.path() / "k.h";
  write_text(file, "#define N 4\n");
  opcache::test::age_past_digest_too_new();
  DigestCache cache(digests);
  const DigestCache copy = cache;
  int computed = 0;
  auto compute = [&](const fs::path& path) -> opcache::Result<std::string> {
    ++computed;
    return opcache::base::file_sha256(path);
  };
  CHECK(cache.file_sha256(file).value() == opcache::base::sha256_hex("#define N 4\n"));
  CHECK_FALSE(fs::exists(digests));  // small: in memory only
  // The memory answers the copy; the digest() of another method computes once.
  CHECK(copy.file_sha256(file).value() == opcache::base::sha256_hex("#define N 4\n"));
  CHECK(copy.digest(file, "m", compute).ok());
  CHECK(cache.digest(file, "m", compute).ok());
  CHECK(computed == 1);

  write_text(file, "#define N 8\n");
  CHECK(copy.file_sha256(file).value() == opcache::base::sha256_hex("#define N 8\n"));
  CHECK(cache.file_sha256(file).value() == opcache::base::sha256_hex("#define N 8\n"));
}

TEST_CASE("base::DigestCache::file_sha256 remembers large files only: a small one is read each time") {
  TempDir temp;
  const fs::path digests = temp.path() / "digests";
  DigestCache cache(digests);
  const std::string small(DigestCache::kRememberedFrom - 1, 's');
  write_text(temp.path() / "k.c", small);
  CHECK(cache.file_sha256(temp.path() / "k.c").value() == opcache::base::sha256_hex(small));
  CHECK_FALSE(fs::exists(digests));

  const std::string large(DigestCache::kRememberedFrom, 'l');
  write_text(temp.path() / "cc", large);
  opcache::test::age_past_digest_too_new();
  CHECK(cache.file_sha256(temp.path() / "cc").value() == opcache::base::sha256_hex(large));
  REQUIRE(fs::is_directory(digests));
  CHECK(std::distance(fs::directory_iterator(digests), fs::directory_iterator()) == 1);
  // The remembered entry answers while the file's identity holds.
  CHECK(cache.file_sha256(temp.path() / "cc").value() == opcache::base::sha256_hex(large));

  auto missing = cache.file_sha256(temp.path() / "absent.c");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == opcache::ErrorCode::not_found);
}

TEST_CASE("base::DigestCache does not remember a file changed just now (too new: it may change again unseen)") {
  TempDir temp;
  const fs::path file = temp.path() / "cc";
  write_text(file, "compiler v1");
  DigestCache cache(temp.path() / "digests");
  int computed = 0;
  auto compute = [&](const fs::path& path) -> opcache::Result<std::string> {
    ++computed;
    return opcache::base::file_sha256(path);
  };
  CHECK(cache.digest(file, "sha256", compute).ok());
  CHECK(cache.digest(file, "sha256", compute).ok());
  CHECK(computed == 2);
  CHECK_FALSE(fs::exists(temp.path() / "digests"));
}

TEST_CASE("base::DigestCache without a directory always computes") {
  TempDir temp;
  write_text(temp.path() / "f", "x");
  DigestCache cache;
  int computed = 0;
  auto compute = [&](const fs::path&) -> opcache::Result<std::string> { return std::to_string(++computed); };
  CHECK(cache.digest(temp.path() / "f", "m", compute).value() == "1");
  CHECK(cache.digest(temp.path() / "f", "m", compute).value() == "2");
}

TEST_CASE("base::tree_sha256 depends on relative names and contents, not on where the tree is") {
  TempDir temp;
  for (const char* root : {"a", "b"}) {
    fs::create_directories(temp.path() / root / "sub");
    write_text(temp.path() / root / "x.json", "{\"k\":1}");
    write_text(temp.path() / root / "sub" / "y.json", "{}");
  }
  DigestCache cache(temp.path() / "digests");
  auto a = opcache::base::tree_sha256(temp.path() / "a", cache);
  auto b = opcache::base::tree_sha256(temp.path() / "b", cache);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);

  write_text(temp.path() / "b" / "sub" / "y.json", "{ }");
  CHECK(opcache::base::tree_sha256(temp.path() / "b", cache).value() != *a);
  write_text(temp.path() / "b" / "sub" / "y.json", "{}");
  CHECK(opcache::base::tree_sha256(temp.path() / "b", cache).value() == *a);
  fs::rename(temp.path() / "b" / "sub" / "y.json", temp.path() / "b" / "sub" / "z.json");
  CHECK(opcache::base::tree_sha256(temp.path() / "b", cache).value() != *a);

  auto skipped = opcache::base::tree_sha256(temp.path() / "a", cache,
                                            [](const fs::path& path) { return path.filename() == "y.json"; });
  REQUIRE(skipped.ok());
  CHECK(*skipped == opcache::base::sha256_hex("x.json\t" + opcache::base::sha256_hex("{\"k\":1}") + "\n"));
  CHECK_FALSE(opcache::base::tree_sha256(temp.path() / "missing", cache).ok());
}
