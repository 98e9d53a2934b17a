// base/file_io: reading a file descriptor to the end of a buffer.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "base/file_io.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::test::TempDir;

TEST_CASE("base::read_up_to fills the buffer, or stops at end of file and says how much it read") {
  TempDir temp;
  const auto path = temp / "data";
  const std::string contents(100000, 'x');
  opcache::test::write_text(path, contents);

  auto fd = opcache::base::open_for_reading(path);
  REQUIRE(fd.ok());
  std::string head(40000, '\0');
  auto got = opcache::base::read_up_to(fd->get(), head.data(), head.size(), path);
  REQUIRE(got.ok());
  CHECK(*got == head.size());
  CHECK(head == contents.substr(0, 40000));

  std::string rest(100000, '\0');  // more room than the file has left
  got = opcache::base::read_up_to(fd->get(), rest.data(), rest.size(), path);
  REQUIRE(got.ok());
  CHECK(*got == 60000);
  CHECK(rest.substr(0, 60000) == contents.substr(40000));

  got = opcache::base::read_up_to(-1, rest.data(), rest.size(), path);
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().message().find("data") != std::string::npos);
}

TEST_CASE("base::read_file reads every byte of empty, small and large files, and of files whose size stat does not tell") {
  TempDir temp;
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{314}, std::size_t{65536}, std::size_t{300001}}) {
    std::string contents(size, '\0');
    for (std::size_t i = 0; i < size; ++i) {
      contents[i] = static_cast<char>((i * 131 + 7) % 256);  // NULs and high bytes too
    }
    const auto path = temp / ("file-" + std::to_string(size));
    opcache::test::write_text(path, contents);
    auto read = opcache::base::read_file(path);
    REQUIRE(read.ok());
    CHECK(*read == contents);
  }
  // /proc files say size 0 and hold more than one read's worth of room.
  auto maps = opcache::base::read_file("/proc/self/maps");
  REQUIRE(maps.ok());
  CHECK(maps->size() > 4096);
  CHECK(maps->back() == '\n');
  CHECK_FALSE(opcache::base::read_file(temp / "absent").ok());
}

// --- AtomicFile in a hostile directory ---

namespace {

unsigned file_mode(const std::filesystem::path& path) {
  struct stat info {};
  REQUIRE(::lstat(path.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

}  // namespace

TEST_CASE("base::AtomicFile replaces a symlink planted at its target and leaves the symlink's target untouched") {
  TempDir temp;
  const auto victim = temp / "victim";
  opcache::test::write_text(victim, "precious");
  std::filesystem::create_directories(temp / "dir");
  std::filesystem::create_symlink(victim, temp / "dir" / "state");
  REQUIRE(opcache::base::write_file_atomic(temp / "dir" / "state", "new").ok());
  CHECK(opcache::test::read_text(victim) == "precious");
  CHECK_FALSE(std::filesystem::is_symlink(temp / "dir" / "state"));
  CHECK(opcache::test::read_text(temp / "dir" / "state") == "new");
}

TEST_CASE("base::AtomicFile commits into the directory it was created in even if that path is swapped for a "
          "symlink meanwhile") {
  TempDir temp;
  const auto outside = temp / "outside";
  std::filesystem::create_directories(outside);
  std::filesystem::create_directories(temp / "tmp");
  auto file = opcache::base::AtomicFile::create(temp / "tmp");
  REQUIRE(file.ok());
  REQUIRE(file->write("abc", 3).ok());
  std::filesystem::rename(temp / "tmp", temp / "tmp-moved");
  std::filesystem::create_directory_symlink(outside, temp / "tmp");
  auto linked = file->link_if_absent(temp / "tmp-moved" / "final");
  REQUIRE(linked.ok());
  CHECK(*linked);
  CHECK(opcache::test::read_text(temp / "tmp-moved" / "final") == "abc");
  CHECK(std::filesystem::is_empty(outside));
  { auto discard = std::move(*file); }
  // The temp file was removed from the directory it lives in, not through the symlink.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(temp / "tmp-moved")) {
    ++files;
  }
  CHECK(files == 1);
}

TEST_CASE("base::AtomicFile is group-writable in a group-shared (setgid, g+w) directory only") {
  TempDir temp;
  ::mode_t old = ::umask(022);
  std::filesystem::create_directories(temp / "shared");
  std::filesystem::create_directories(temp / "private");
  REQUIRE(::chmod((temp / "shared").c_str(), 02775) == 0);
  REQUIRE(opcache::base::write_file_atomic(temp / "shared" / "f", "x").ok());
  REQUIRE(opcache::base::write_file_atomic(temp / "private" / "f", "x").ok());
  ::umask(old);
  CHECK(file_mode(temp / "shared" / "f") == 0664);
  CHECK(file_mode(temp / "private" / "f") == 0644);
}

TEST_CASE("base::read_small_file refuses a symlink, a FIFO and a file above its limit") {
  TempDir temp;
  opcache::test::write_text(temp / "state", "{\"open_until_ms\":1}");
  auto text = opcache::base::read_small_file(temp / "state");
  REQUIRE(text.ok());
  CHECK(*text == "{\"open_until_ms\":1}");
  std::filesystem::create_symlink("/dev/zero", temp / "link");
  CHECK_FALSE(opcache::base::read_small_file(temp / "link").ok());
  REQUIRE(::mkfifo((temp / "fifo").c_str(), 0600) == 0);
  CHECK_FALSE(opcache::base::read_small_file(temp / "fifo").ok());
  CHECK(opcache::base::read_small_file(temp / "state", 4).error().code() == opcache::ErrorCode::corrupt);
  CHECK(opcache::base::read_small_file(temp / "missing").error().code() == opcache::ErrorCode::not_found);
}
