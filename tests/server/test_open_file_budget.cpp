// The server's budget of kept-open files (server/open_file_budget.hpp): at
// most its limit at once, each share given back when the last holder of a
// file lets it go, even after the budget itself is gone.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "server/open_file_budget.hpp"

namespace {

using opcache::base::FileDescriptor;
using opcache::server::OpenFileBudget;

FileDescriptor open_null() {
  FileDescriptor file(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  REQUIRE(file.valid());
  return file;
}

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

}  // namespace

TEST_CASE("server::an open-file budget keeps at most its limit, and takes a file again once one is let go") {
  OpenFileBudget budget(2);
  auto first = budget.keep(open_null());
  auto second = budget.keep(open_null());
  REQUIRE(first != nullptr);
  REQUIRE(second != nullptr);
  CHECK(budget.kept() == 2);

  auto refused_file = open_null();
  const int refused_fd = refused_file.get();
  CHECK(budget.keep(std::move(refused_file)) == nullptr);
  CHECK_FALSE(is_open(refused_fd));  // a file the budget refuses is closed, not leaked
  CHECK(budget.kept() == 2);

  const int first_fd = first->get();
  auto also_holding = first;  // a response still sending it
  first.reset();
  CHECK(is_open(first_fd));
  CHECK(budget.kept() == 2);
  also_holding.reset();
  CHECK_FALSE(is_open(first_fd));
  CHECK(budget.kept() == 1);
  CHECK(budget.keep(open_null()) != nullptr);
}

TEST_CASE("server::an open-file budget of zero keeps nothing, and a kept file may outlive its budget") {
  CHECK(OpenFileBudget(0).keep(open_null()) == nullptr);
  std::shared_ptr<const FileDescriptor> outliving;
  {
    OpenFileBudget budget(1);
    outliving = budget.keep(open_null());
    REQUIRE(outliving != nullptr);
  }
  const int fd = outliving->get();
  CHECK(is_open(fd));
  outliving.reset();  // gives its share back to a count the budget no longer holds
  CHECK_FALSE(is_open(fd));
}

TEST_CASE("server::the default open-file budget is a quarter of the soft limit on descriptors") {
  struct rlimit limit {};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  if (limit.rlim_cur != RLIM_INFINITY) {
    CHECK(opcache::server::default_open_file_budget() == limit.rlim_cur / 4);
  }
}
