// Tracing what a command's process tree does to the file system
// (trace/process_tracer.hpp): real compilers, shells and interpreters under
// the tracer, and what it reports of them.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/file_io.hpp"
#include "base/program_search.hpp"
#include "tests/support/children.hpp"
#include "tests/support/process.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "trace/exec_image.hpp"
#include "trace/interrupted_call.hpp"
#include "trace/notify_listener.hpp"
#include "trace/process_tracer.hpp"
#include "trace/tracee_memory.hpp"
#include "trace/tracee_paths.hpp"

using opcache::trace::Access;
using opcache::trace::TraceOutcome;

namespace fs = std::filesystem;

namespace {

/// A fresh directory, by its canonical path: the tracer reports a relative
/// path against the working directory the kernel resolved.
struct TraceTestDir {
  opcache::test::TempDir temp;
  fs::path path = fs::canonical(temp.path());

  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::optional<std::string> trace_test_program(const std::string& name) {
  const auto found = opcache::base::find_program(name, "/usr/bin:/bin", opcache::base::EmptyPathEntry::skipped);
  return found ? std::optional<std::string>(found->string()) : std::nullopt;
}

/// Runs `argv` traced; REQUIREs that it ran.
TraceOutcome run_traced_ok(const std::vector<std::string>& argv, int stdin_fd = -1) {
  opcache::trace::TraceRequest request;
  request.argv = argv;
  request.stdin_fd = stdin_fd;
  auto outcome = opcache::trace::run_traced(request);
  REQUIRE_MESSAGE(outcome.ok(), (outcome.ok() ? "" : outcome.error().message()));
  return std::move(*outcome);
}

/// The index of the first (path, access) event, or -1.
long trace_event_index(const TraceOutcome& outcome, const std::string& path, Access access) {
  const auto found = std::find_if(outcome.events.begin(), outcome.events.end(),
                                  [&](const auto& event) { return event.path == path && event.access == access; });
  return found == outcome.events.end() ? -1 : static_cast<long>(found - outcome.events.begin());
}

bool has_trace_event(const TraceOutcome& outcome, const std::string& path, Access access) {
  return trace_event_index(outcome, path, access) >= 0;
}

/// The first event whose file name is `name`, of `access`.
const opcache::trace::PathEvent* trace_event_named(const TraceOutcome& outcome, const std::string& name,
                                                   Access access) {
  for (const auto& event : outcome.events) {
    if (event.access == access && fs::path(event.path).filename() == name) {
      return &event;
    }
  }
  return nullptr;
}

opcache::trace::FileIdentity trace_test_identity(const std::string& path) {
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  return {static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino),
          static_cast<std::int64_t>(info.st_size),
          static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec,
          static_cast<std::int64_t>(info.st_ctim.tv_sec) * 1'000'000'000 + info.st_ctim.tv_nsec};
}

/// CHECKs that `path` was read (or executed), with its identity as it is now.
void check_read_with_identity(const TraceOutcome& outcome, const std::string& path, Access access = Access::read) {
  const auto index = trace_event_index(outcome, path, access);
  CHECK_MESSAGE(index >= 0, path << " was not read");
  if (index >= 0) {
    const auto& identity = outcome.events[static_cast<std::size_t>(index)].identity;
    REQUIRE_MESSAGE(identity.has_value(), path << " was read without an identity");
    CHECK(*identity == trace_test_identity(path));
  }
}

/// CHECKs the promises every outcome keeps: no pseudo-file path, no pair twice.
void check_trace_invariants(const TraceOutcome& outcome) {
  std::vector<std::pair<std::string, Access>> seen;
  for (const auto& event : outcome.events) {
    CHECK_MESSAGE(event.path.front() == '/', event.path);
    for (const char* pseudo : {"/proc/", "/sys/", "/dev/"}) {
      CHECK_MESSAGE(event.path.rfind(pseudo, 0) != 0, event.path);
    }
    CHECK_MESSAGE(std::find(seen.begin(), seen.end(), std::pair(event.path, event.access)) == seen.end(), event.path);
    seen.emplace_back(event.path, event.access);
  }
}

}  // namespace

/// Skips the test case where this machine cannot trace (a container's seccomp profile...).
#define TRACE_TEST_REQUIRE_TRACING()                                 \
  OPCACHE_SKIP_IF(opcache::trace::tracing_unavailable().has_value(), \
                  "cannot trace commands here: " + *opcache::trace::tracing_unavailable())

TEST_CASE("trace::run_traced sees gcc read its source and headers, miss a header, write and remove files") {
  TRACE_TEST_REQUIRE_TRACING();
  OPCACHE_SKIP_IF(!trace_test_program("gcc"), "gcc is not installed");
  TraceTestDir dir;
  opcache::test::write_text(dir / "k.c", "#include \"k.h\"\nint k(void) { return K; }\n");
  opcache::test::write_text(dir / "inc2/k.h", "#define K 7\n");
  fs::create_directories(dir / "inc1");
  fs::create_directories(dir / "out");

  const auto outcome =
      run_traced_ok({"sh", "-c", "cd '" + dir.path.string() + "' && gcc -c k.c -Iinc1 -Iinc2 -o out/k.o"});

  CHECK(outcome.status == 0);
  CHECK_FALSE(outcome.blind.has_value());
  check_trace_invariants(outcome);
  check_read_with_identity(outcome, dir / "k.c");
  check_read_with_identity(outcome, dir / "inc2/k.h");
  CHECK(has_trace_event(outcome, dir / "inc1/k.h", Access::absent));
  CHECK_FALSE(has_trace_event(outcome, dir / "inc1/k.h", Access::read));
  CHECK(has_trace_event(outcome, dir / "out/k.o", Access::written));
  CHECK(fs::exists(dir / "out/k.o"));
  // The assembler's input: written by cc1, then removed by the driver.
  const auto assembly = std::find_if(outcome.events.begin(), outcome.events.end(), [](const auto& event) {
    const auto name = fs::path(event.path).filename().string();
    return event.access == Access::written && name.rfind("cc", 0) == 0 && fs::path(name).extension() == ".s";
  });
  REQUIRE(assembly != outcome.events.end());
  CHECK(trace_event_index(outcome, assembly->path, Access::removed) > assembly - outcome.events.begin());
  CHECK_FALSE(fs::exists(assembly->path));
  // The compiler proper and the assembler, which the driver runs.
  CHECK(trace_event_named(outcome, "cc1", Access::executed) != nullptr);
  CHECK(trace_event_named(outcome, "as", Access::executed) != nullptr);
}

TEST_CASE("trace::run_traced hands each event to on_event as it is recorded, the same events it returns") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  opcache::test::write_text(dir / "in.txt", "input\n");
  std::vector<opcache::trace::PathEvent> seen;
  opcache::trace::TraceRequest request;
  request.argv = {"sh", "-c", "cat '" + (dir / "in.txt") + "' > '" + (dir / "out.txt") + "'"};
  request.on_event = [&seen](const opcache::trace::PathEvent& event) { seen.push_back(event); };
  auto outcome = opcache::trace::run_traced(request);
  REQUIRE(outcome.ok());
  REQUIRE(seen.size() == outcome->events.size());
  for (std::size_t i = 0; i < seen.size(); ++i) {
    CHECK(seen[i].path == outcome->events[i].path);
    CHECK(seen[i].access == outcome->events[i].access);
    CHECK(seen[i].identity == outcome->events[i].identity);
  }
  CHECK(has_trace_event(*outcome, dir / "in.txt", Access::read));
}

TEST_CASE("trace::run_traced sees a statically linked program (busybox) read and write") {
  TRACE_TEST_REQUIRE_TRACING();
  OPCACHE_SKIP_IF(!fs::exists("/bin/busybox"), "/bin/busybox is not installed (Debian's busybox-static)");
  TraceTestDir dir;
  opcache::test::write_text(dir / "a.txt", "alpha\n");
  opcache::test::write_text(dir / "a2.txt", "alpha\n");
  opcache::test::write_text(dir / "b.txt", "beta\n");

  const auto direct = run_traced_ok({"/bin/busybox", "cmp", dir / "a.txt", dir / "a2.txt"});
  CHECK(direct.status == 0);
  CHECK_FALSE(direct.blind.has_value());
  check_trace_invariants(direct);
  CHECK(has_trace_event(direct, "/bin/busybox", Access::executed));
  check_read_with_identity(direct, dir / "a.txt");
  check_read_with_identity(direct, dir / "a2.txt");

  const auto shell = run_traced_ok({"/bin/busybox", "sh", "-c", "cd '" + dir.path.string() + "' && cat b.txt > c.txt"});
  CHECK(shell.status == 0);
  CHECK_FALSE(shell.blind.has_value());
  check_trace_invariants(shell);
  check_read_with_identity(shell, dir / "b.txt");
  CHECK(has_trace_event(shell, dir / "c.txt", Access::written));
  CHECK(opcache::test::read_text(dir / "c.txt") == "beta\n");
}

TEST_CASE("trace::run_traced sees python list its script's directory and read the module it imports") {
  TRACE_TEST_REQUIRE_TRACING();
  const auto python = trace_test_program("python3");
  OPCACHE_SKIP_IF(!python, "python3 is not installed in /usr/bin or /bin");
  TraceTestDir dir;
  opcache::test::write_text(dir / "app/main.py", "import helper\nassert helper.VALUE == 42\n");
  opcache::test::write_text(dir / "app/helper.py", "VALUE = 42\n");

  const auto outcome = run_traced_ok({*python, dir / "app/main.py"});

  CHECK(outcome.status == 0);
  CHECK_FALSE(outcome.blind.has_value());
  check_trace_invariants(outcome);
  check_read_with_identity(outcome, dir / "app/main.py");
  check_read_with_identity(outcome, dir / "app/helper.py");
  CHECK(has_trace_event(outcome, dir / "app", Access::listed));
  CHECK_FALSE(has_trace_event(outcome, dir / "app", Access::read));
}

TEST_CASE(
    "trace::run_traced returns the command's exit status, 128 + a killing signal, and refuses a missing program") {
  TRACE_TEST_REQUIRE_TRACING();
  CHECK(run_traced_ok({"sh", "-c", "exit 7"}).status == 7);
  CHECK(run_traced_ok({"sh", "-c", "kill -TERM $$"}).status == 128 + 15);

  opcache::trace::TraceRequest missing;
  missing.argv = {"opcache-no-such-program-xyz"};
  const auto not_found = opcache::trace::run_traced(missing);
  REQUIRE_FALSE(not_found.ok());
  CHECK(not_found.error().code() == opcache::ErrorCode::usage);
  CHECK(not_found.error().message().find("opcache-no-such-program-xyz") != std::string::npos);

  TraceTestDir dir;
  opcache::test::write_executable(dir / "garbage", std::string("\x01\x02\x03 not a program\n"));
  opcache::trace::TraceRequest unrunnable;
  unrunnable.argv = {dir / "garbage"};
  const auto refused = opcache::trace::run_traced(unrunnable);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == opcache::ErrorCode::usage);
  CHECK(refused.error().message().find("Exec format error") != std::string::npos);

  opcache::trace::TraceRequest closed_input;
  closed_input.argv = {"true"};
  closed_input.stdin_fd = 987;  // not open
  CHECK(opcache::trace::run_traced(closed_input).error().code() == opcache::ErrorCode::usage);

  opcache::trace::TraceRequest empty;
  CHECK(opcache::trace::run_traced(empty).error().code() == opcache::ErrorCode::usage);
}

TEST_CASE("trace::run_traced reads a script's interpreter, and an interpreter script's own, which the kernel loads") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  opcache::test::write_executable(dir / "inner", "#!/bin/sh\nexit 0\n");
  opcache::test::write_executable(dir / "outer", "#!" + (dir / "inner") + " -x\n");

  const auto script = run_traced_ok({dir / "inner"});
  CHECK(script.status == 0);
  check_trace_invariants(script);
  check_read_with_identity(script, dir / "inner", Access::executed);
  check_read_with_identity(script, "/bin/sh", Access::executed);

  const auto nested = run_traced_ok({dir / "outer"});
  CHECK(nested.status == 0);
  check_read_with_identity(nested, dir / "outer", Access::executed);
  check_read_with_identity(nested, dir / "inner", Access::executed);
  check_read_with_identity(nested, "/bin/sh", Access::executed);
  // The dynamic loader of the shell, which the kernel maps too.
  const auto loader = opcache::trace::program_interpreter("/bin/sh");
  if (loader) {
    check_read_with_identity(nested, *loader, Access::executed);
  }
}

TEST_CASE("trace::program_interpreter names a script's interpreter and an ELF program's loader, none for static") {
  TraceTestDir dir;
  opcache::test::write_executable(dir / "script", "#!  /usr/bin/env python3 -u\nprint(1)\n");
  CHECK(opcache::trace::program_interpreter(dir / "script") == "/usr/bin/env");
  opcache::test::write_text(dir / "text", "plain text\n");
  CHECK_FALSE(opcache::trace::program_interpreter(dir / "text").has_value());
  CHECK_FALSE(opcache::trace::program_interpreter(dir / "missing").has_value());
  const auto loader = opcache::trace::program_interpreter("/bin/sh");
  REQUIRE(loader.has_value());
  CHECK(fs::exists(*loader));
  if (fs::exists("/bin/busybox")) {
    CHECK_FALSE(opcache::trace::program_interpreter("/bin/busybox").has_value());
  }
}

TEST_CASE("trace::run_traced gives the command the standard input it is asked to") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  const std::string input = "first line\nsecond line\n";
  opcache::test::write_text(dir / "in.txt", input);
  auto in = opcache::base::open_for_reading(dir / "in.txt");
  REQUIRE(in.ok());

  const auto outcome = run_traced_ok({"sh", "-c", "cat > '" + (dir / "out.txt") + "'"}, in->get());

  CHECK(outcome.status == 0);
  CHECK(opcache::test::read_text(dir / "out.txt") == input);
  CHECK(has_trace_event(outcome, dir / "out.txt", Access::written));
  CHECK_FALSE(has_trace_event(outcome, dir / "in.txt", Access::read));  // opened by this process, not the tree
}

TEST_CASE("trace::run_traced classifies directories made, files renamed and removed, misses and read-write opens") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  opcache::test::write_text(dir / "rw.txt", "old\n");
  opcache::test::write_text(dir / "existing/keep", "");

  const auto outcome =
      run_traced_ok({"sh", "-c",
                     "cd '" + dir.path.string() +
                         "' && mkdir sub existing 2>/dev/null; echo x > sub/f && mv sub/f g && rm g && "
                         "echo y 1<>rw.txt && ls sub >/dev/null && test ! -e missing"});

  CHECK(outcome.status == 0);
  check_trace_invariants(outcome);
  CHECK(has_trace_event(outcome, dir / "sub", Access::written));
  CHECK_FALSE(has_trace_event(outcome, dir / "existing", Access::written));  // mkdir of an existing one fails
  CHECK(has_trace_event(outcome, dir / "sub/f", Access::written));
  CHECK(trace_event_index(outcome, dir / "sub/f", Access::removed) >
        trace_event_index(outcome, dir / "sub/f", Access::written));
  CHECK(has_trace_event(outcome, dir / "g", Access::written));
  CHECK(trace_event_index(outcome, dir / "g", Access::removed) >
        trace_event_index(outcome, dir / "g", Access::written));
  // Opened read-write without truncation: read (as it was) and written.
  CHECK(has_trace_event(outcome, dir / "rw.txt", Access::written));
  const auto rw_read = trace_event_index(outcome, dir / "rw.txt", Access::read);
  REQUIRE(rw_read >= 0);
  CHECK(outcome.events[static_cast<std::size_t>(rw_read)].identity.has_value());
  CHECK(has_trace_event(outcome, dir / "sub", Access::listed));
  CHECK(has_trace_event(outcome, dir / "missing", Access::absent));
}

namespace {

/// Builds `dir`/i386, which calls getpid then exit(0) with the i386
/// convention (int $0x80), and `dir`/x32, which calls getpid as an x32 call
/// then exits natively. The reason to skip when they cannot be built or run.
std::optional<std::string> build_foreign_convention_programs(const TraceTestDir& dir) {
  if (!trace_test_program("as") || !trace_test_program("ld")) {
    return "binutils (as, ld) are not installed";
  }
#if !defined(__x86_64__)
  return "32-bit and x32 programs are built for x86_64 only";
#endif
  opcache::test::write_text(dir / "i386.s",
                            ".globl _start\n_start:\n movl $20, %eax\n int $0x80\n"
                            " movl $1, %eax\n xorl %ebx, %ebx\n int $0x80\n");
  // __X32_SYSCALL_BIT | getpid, then a native exit(0).
  opcache::test::write_text(dir / "x32.s",
                            ".globl _start\n_start:\n movl $0x40000027, %eax\n syscall\n"
                            " movl $60, %eax\n xorl %edi, %edi\n syscall\n");
  const auto built_i386 = opcache::test::run_process(
      {"sh", "-c", "cd '" + dir.path.string() + "' && as --32 -o i386.o i386.s && ld -m elf_i386 -o i386 i386.o"});
  const auto built_x32 = opcache::test::run_process(
      {"sh", "-c", "cd '" + dir.path.string() + "' && as -o x32.o x32.s && ld -o x32 x32.o"});
  if (built_i386.exit_code != 0 || built_x32.exit_code != 0) {
    return "cannot build the test programs: " + built_i386.err + built_x32.err;
  }
  if (opcache::test::run_process({dir / "i386"}).exit_code != 0) {
    return "this kernel does not run 32-bit programs (IA32 emulation)";
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("trace::run_traced goes blind on a 32-bit and on an x32 system call") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  const auto skip = build_foreign_convention_programs(dir);
  OPCACHE_SKIP_IF(skip.has_value(), *skip);

  const auto i386 = run_traced_ok({dir / "i386"});
  CHECK(i386.status == 0);
  REQUIRE(i386.blind.has_value());
  CHECK(i386.blind->find("32-bit program") != std::string::npos);

  const auto x32 = run_traced_ok({dir / "x32"});
  CHECK(x32.status == 0);
  REQUIRE(x32.blind.has_value());
  CHECK(x32.blind->find("x32 program") != std::string::npos);
}

TEST_CASE("trace::run_traced goes blind when a process outlives the command, and still waits for it") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  const auto outcome = run_traced_ok({"sh", "-c", "(sleep 0.3; echo late > '" + (dir / "late.txt") + "') &"});
  CHECK(outcome.status == 0);
  REQUIRE(outcome.blind.has_value());
  CHECK(outcome.blind->find("outlived the command") != std::string::npos);
  CHECK(opcache::test::read_text(dir / "late.txt") == "late\n");
  CHECK(has_trace_event(outcome, dir / "late.txt", Access::written));
}

TEST_CASE("trace::run_traced traces commands of several threads at once and leaves the caller's children alone") {
  TRACE_TEST_REQUIRE_TRACING();
  opcache::test::ChildGuard guard;
  const pid_t bystander = opcache::test::spawn_background(guard, {"sleep", "30"});
  TraceTestDir dir;
  std::vector<std::string> files;
  std::vector<std::optional<TraceOutcome>> outcomes(3);
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    files.push_back(dir / ("f" + std::to_string(i)));
    opcache::test::write_text(files.back(), "content\n");
  }
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    threads.emplace_back([&, i] {
      opcache::trace::TraceRequest request;
      request.argv = {"sh", "-c", "cat '" + files[i] + "' >/dev/null"};
      auto outcome = opcache::trace::run_traced(request);
      if (outcome.ok()) {
        outcomes[i] = std::move(*outcome);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    REQUIRE(outcomes[i].has_value());
    CHECK(outcomes[i]->status == 0);
    CHECK_FALSE(outcomes[i]->blind.has_value());
    for (std::size_t j = 0; j < files.size(); ++j) {
      CHECK(has_trace_event(*outcomes[i], files[j], Access::read) == (i == j));
    }
  }
  CHECK(opcache::test::still_running(bystander));
}

TEST_CASE("trace::normal_path removes '.', '..' and repeated or trailing '/' without following links") {
  using opcache::trace::normal_path;
  CHECK(normal_path("/usr/include/stdio.h") == "/usr/include/stdio.h");
  CHECK(normal_path("/a//b/./c/") == "/a/b/c");
  CHECK(normal_path("/a/b/../../../c/..") == "/");
  CHECK(normal_path("/a/b/..") == "/a");
  CHECK(normal_path("/") == "/");
  CHECK(normal_path("//") == "/");
  CHECK(normal_path("/a/..b/.c") == "/a/..b/.c");
  CHECK(opcache::trace::is_pseudo_file_path("/proc"));
  CHECK(opcache::trace::is_pseudo_file_path("/dev/null"));
  CHECK(opcache::trace::is_pseudo_file_path("/sys/kernel"));
  CHECK_FALSE(opcache::trace::is_pseudo_file_path("/devices/x"));
  CHECK_FALSE(opcache::trace::is_pseudo_file_path("/dev/shm"));
  CHECK_FALSE(opcache::trace::is_pseudo_file_path("/dev/shm/inc/k.h"));
  CHECK(opcache::trace::is_pseudo_file_path("/dev/shmem"));
  CHECK_FALSE(opcache::trace::is_pseudo_file_path("/usr/proc"));
}

TEST_CASE("trace::read_tracee_string reads across pages and stops at an unmapped one") {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* mapped = ::mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mapped != MAP_FAILED);
  auto* bytes = static_cast<char*>(mapped);
  REQUIRE(::mprotect(bytes + 2 * page, page, PROT_NONE) == 0);
  const auto address = [&](std::size_t offset) { return reinterpret_cast<std::uintptr_t>(bytes + offset); };
  const pid_t self = ::getpid();

  // "/across/pages" straddles the first two pages.
  const std::string across = "/across/pages";
  std::memcpy(bytes + page - 5, across.c_str(), across.size() + 1);
  const auto read_across = opcache::trace::read_tracee_string(self, address(page - 5));
  REQUIRE(read_across.ok());
  CHECK(read_across->value_or("?") == across);

  std::uint64_t word = 0;
  const auto bytes_read = opcache::trace::read_tracee_bytes(self, address(page - 5), &word, sizeof word);
  REQUIRE(bytes_read.ok());
  CHECK(*bytes_read);
  CHECK(std::memcmp(&word, across.c_str(), sizeof word) == 0);

  // Paths longer than the first read (256 bytes), within one page and
  // running on into the next: read to their NUL, not cut at a read's end.
  const std::string long_path = "/" + std::string(700, 'd') + "/k.h";
  std::memcpy(bytes + 100, long_path.c_str(), long_path.size() + 1);
  const auto read_long = opcache::trace::read_tracee_string(self, address(100));
  REQUIRE(read_long.ok());
  CHECK(read_long->value_or("?") == long_path);
  std::memcpy(bytes + page - 300, long_path.c_str(), long_path.size() + 1);
  const auto read_long_across = opcache::trace::read_tracee_string(self, address(page - 300));
  REQUIRE(read_long_across.ok());
  CHECK(read_long_across->value_or("?") == long_path);

  // A string whose NUL is the last byte before the unmapped page...
  std::memset(bytes + page, 'x', page - 1);
  bytes[2 * page - 1] = '\0';
  const auto read_last = opcache::trace::read_tracee_string(self, address(2 * page - 10));
  REQUIRE(read_last.ok());
  CHECK(read_last->value_or("?") == std::string(9, 'x'));
  // ...and one that runs into it: the kernel would refuse it (EFAULT).
  bytes[2 * page - 1] = 'x';
  const auto read_faulting = opcache::trace::read_tracee_string(self, address(2 * page - 10));
  REQUIRE(read_faulting.ok());
  CHECK_FALSE(read_faulting->has_value());
  const auto read_null = opcache::trace::read_tracee_string(self, 0);
  REQUIRE(read_null.ok());
  CHECK_FALSE(read_null->has_value());

  const auto bytes_faulting = opcache::trace::read_tracee_bytes(self, address(2 * page - 4), &word, sizeof word);
  REQUIRE(bytes_faulting.ok());
  CHECK_FALSE(*bytes_faulting);
  ::munmap(mapped, 3 * page);
}

namespace {

using opcache::trace::TraceMechanism;

const char* mechanism_name(TraceMechanism mechanism) {
  return mechanism == TraceMechanism::user_notification ? "user_notification" : "ptrace_stop";
}

/// Why user notifications cannot be compared with ptrace stops here, if they cannot.
std::optional<std::string> notification_unavailable() {
  if (opcache::trace::notification_support() == opcache::trace::NotificationSupport::none) {
    return "this kernel has no seccomp listener for the tracer (before Linux 5.6, or refused)";
  }
  return std::nullopt;
}

/// Runs `argv` traced under `mechanism`; REQUIREs that it ran, under that one.
TraceOutcome run_traced_under(TraceMechanism mechanism, const std::vector<std::string>& argv) {
  opcache::trace::TraceRequest request;
  request.argv = argv;
  request.mechanism = mechanism;
  auto outcome = opcache::trace::run_traced(request);
  REQUIRE_MESSAGE(outcome.ok(), (outcome.ok() ? "" : outcome.error().message()));
  REQUIRE(outcome->mechanism == mechanism);
  return std::move(*outcome);
}

/// `text` with each "process <digits>" as "process N": a tracee's id differs from run to run.
std::string without_process_ids(std::string text) {
  const std::string marker = "process ";
  for (auto at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
    const auto digits = at + marker.size();
    auto end = digits;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])) != 0) {
      ++end;
    }
    text.replace(digits, end - digits, "N");
  }
  return text;
}

/// The events of a run in `dir`, comparable with another run's in another
/// directory: `dir` written "<dir>", the files the run made in <dir>/tmp
/// (gcc's temporary files, named at random) numbered by first appearance,
/// and the identity of a file in `dir` reduced to its presence (another
/// copy, another inode).
std::vector<std::string> comparable_events(const TraceOutcome& outcome, const TraceTestDir& dir) {
  const std::string root = dir.path.string();
  const std::string temporary = dir / "tmp/";
  std::vector<std::string> temporaries;
  std::vector<std::string> lines;
  for (const auto& event : outcome.events) {
    std::string path = event.path;
    const bool inside = path == root || path.rfind(root + "/", 0) == 0;
    if (path.rfind(temporary, 0) == 0) {
      auto known = std::find(temporaries.begin(), temporaries.end(), path);
      if (known == temporaries.end()) {
        known = temporaries.insert(temporaries.end(), path);
      }
      path = "<dir>/tmp/#" + std::to_string(known - temporaries.begin());
    } else if (inside) {
      path = "<dir>" + path.substr(root.size());
    }
    std::string identity = "-";
    if (event.identity) {
      identity =
          inside ? "identity" : std::to_string(event.identity->inode) + ":" + std::to_string(event.identity->size);
    }
    lines.push_back(std::to_string(static_cast<int>(event.access)) + " " + path + " " + identity);
  }
  return lines;
}

/// How two runs' events are compared: in order (a tree that does one thing
/// at a time), or as sets (processes or threads that run at once).
enum class EventOrder { same, any };

/// The user_notification run of check_mechanisms_agree, for the caller's own checks.
struct ComparedRuns {
  std::unique_ptr<TraceTestDir> dir;  ///< the user_notification run's
  TraceOutcome outcome;               ///< the user_notification run's
};

/// One traced run under each mechanism of `command` (a shell command run in
/// a fresh directory that `prepare` fills, with TMPDIR=<dir>/tmp): CHECKs
/// the same status, the same blind reason (process ids aside) and the same
/// events, compared as `order` says.
ComparedRuns check_mechanisms_agree(const std::function<void(const TraceTestDir&)>& prepare, const std::string& command,
                                    EventOrder order) {
  std::vector<std::vector<std::string>> events;
  std::vector<std::optional<std::string>> blinds;
  std::vector<int> statuses;
  ComparedRuns notified;
  for (const auto mechanism : {TraceMechanism::ptrace_stop, TraceMechanism::user_notification}) {
    auto dir = std::make_unique<TraceTestDir>();
    fs::create_directories(*dir / "tmp");
    prepare(*dir);
    auto outcome = run_traced_under(
        mechanism, {"sh", "-c", "cd '" + dir->path.string() + "' && export TMPDIR=\"$PWD/tmp\" && " + command});
    check_trace_invariants(outcome);
    auto lines = comparable_events(outcome, *dir);
    if (order == EventOrder::any) {
      std::sort(lines.begin(), lines.end());
    }
    events.push_back(std::move(lines));
    blinds.push_back(outcome.blind ? std::optional(without_process_ids(*outcome.blind)) : std::nullopt);
    statuses.push_back(outcome.status);
    if (mechanism == TraceMechanism::user_notification) {
      notified = ComparedRuns{std::move(dir), std::move(outcome)};
    }
  }
  CHECK(statuses[0] == statuses[1]);
  CHECK_MESSAGE(blinds[0] == blinds[1], blinds[0].value_or("not blind") << " | " << blinds[1].value_or("not blind"));
  CHECK(events[0].size() == events[1].size());
  for (std::size_t i = 0; i < std::min(events[0].size(), events[1].size()); ++i) {
    CHECK_MESSAGE(events[0][i] == events[1][i], "event " << i);
  }
  return notified;
}

// Prints the file argv[1] names, opened through an io_uring
// (IORING_OP_OPENAT) and read with read(2): the open passes no path to any
// system call the filter sees. Exit 3 where io_uring is unavailable.
constexpr const char* k_io_uring_program = R"(#include <linux/io_uring.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
int print_descriptor(int fd);
int main(int argc, char** argv) {
  (void)argc;
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  int ring = (int)syscall(__NR_io_uring_setup, 4, &p);
  if (ring < 0) return 3;
  size_t sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  size_t cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
  char* sq = mmap(0, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_SQ_RING);
  char* cq = mmap(0, cq_size, PROT_READ | PROT_WRITE, MAP_SHARED, ring, IORING_OFF_CQ_RING);
  struct io_uring_sqe* sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                                   MAP_SHARED, ring, IORING_OFF_SQES);
  if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) return 3;
  memset(&sqes[0], 0, sizeof sqes[0]);
  sqes[0].opcode = IORING_OP_OPENAT;
  sqes[0].fd = AT_FDCWD;
  sqes[0].addr = (unsigned long)argv[1];
  sqes[0].open_flags = O_RDONLY;
  unsigned* tail = (unsigned*)(sq + p.sq_off.tail);
  ((unsigned*)(sq + p.sq_off.array))[*tail & *(unsigned*)(sq + p.sq_off.ring_mask)] = 0;
  __atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
  if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, 0, 0) < 0) return 3;
  unsigned head = __atomic_load_n((unsigned*)(cq + p.cq_off.head), __ATOMIC_ACQUIRE);
  struct io_uring_cqe* cqe = (struct io_uring_cqe*)(cq + p.cq_off.cqes) + (head & *(unsigned*)(cq + p.cq_off.ring_mask));
  if (cqe->res < 0) return 4;
  return print_descriptor(cqe->res);
}
)";

// Prints the file argv[1] names, opened O_PATH and reopened for reading
// through /proc/self/fd/N: the reading open names no file.
constexpr const char* k_reopen_program = R"(#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int print_descriptor(int fd);
int main(int argc, char** argv) {
  (void)argc;
  int handle = open(argv[1], O_PATH | O_CLOEXEC);
  if (handle < 0) return 3;
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", handle);
  int fd = open(link, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 4;
  return print_descriptor(fd);
}
)";

// Opens argv[2] below the directory argv[1] with openat2, RESOLVE_IN_ROOT
// when argv[3] is "in-root", and prints it.
constexpr const char* k_openat2_program = R"(#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
int print_descriptor(int fd);
int main(int argc, char** argv) {
  if (argc < 4) return 2;
  int root = open(argv[1], O_DIRECTORY | O_CLOEXEC);
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = O_RDONLY | O_CLOEXEC;
  how.resolve = strcmp(argv[3], "in-root") == 0 ? RESOLVE_IN_ROOT : 0;
  int fd = (int)syscall(437, root, argv[2], &how, sizeof how);
  if (fd < 0) return 3;
  return print_descriptor(fd);
}
)";

// Appended to every test program: prints what `fd` reads (up to 256 bytes); 0.
constexpr const char* k_print_descriptor = R"(
#include <stdio.h>
#include <unistd.h>
int print_descriptor(int fd) {
  char text[256];
  ssize_t got = read(fd, text, sizeof text);
  if (got > 0) fwrite(text, 1, (size_t)got, stdout);
  return 0;
}
)";

/// Builds the C program `source` (with k_print_descriptor) as `dir`/`name`; false when gcc cannot.
bool build_c_program(const TraceTestDir& dir, const std::string& name, const std::string& source) {
  opcache::test::write_text(dir / (name + ".c"), source + k_print_descriptor);
  return opcache::test::run_process({"gcc", "-O2", "-pthread", "-o", dir / name, dir / (name + ".c")}).exit_code == 0;
}

}  // namespace

TEST_CASE("trace::default_trace_mechanism is user notifications where they wake on the caller's CPU, else ptrace") {
  OPCACHE_SKIP_IF(std::getenv("OPCACHE_TRACE_MECHANISM") != nullptr,
                  "OPCACHE_TRACE_MECHANISM is set: it chooses the default");
  // The release decides the default; a run falls back to ptrace stops where the listener is refused after all.
  const bool by_release =
      opcache::trace::release_wakes_synchronously() && opcache::trace::can_restart_interrupted_calls();
  CHECK(opcache::trace::default_trace_mechanism() ==
        (by_release ? TraceMechanism::user_notification : TraceMechanism::ptrace_stop));
  TRACE_TEST_REQUIRE_TRACING();
  const bool notified = by_release && opcache::trace::notification_support() != opcache::trace::NotificationSupport::none;
  CHECK(run_traced_ok({"true"}).mechanism ==
        (notified ? TraceMechanism::user_notification : TraceMechanism::ptrace_stop));
}

namespace {

/// A program that stats and opens a file 20,000 times while a SIGALRM
/// caught without SA_RESTART comes every 50 us: untraced, not one call fails.
constexpr const char* k_alarmed_program = R"(#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
static volatile sig_atomic_t alarms;
static void on_alarm(int s) { (void)s; alarms++; }
int main(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_alarm; /* no SA_RESTART */
  sigaction(SIGALRM, &action, 0);
  struct itimerval every = {{0, 50}, {0, 50}};
  setitimer(ITIMER_REAL, &every, 0);
  struct stat info;
  for (int i = 0; i < 20000; i++) {
    if (stat("/etc/passwd", &info) != 0) {
      printf("stat failed: %s\n", strerror(errno));
      return 1;
    }
    int fd = open("/etc/passwd", O_RDONLY);
    if (fd < 0) {
      printf("open failed: %s\n", strerror(errno));
      return 1;
    }
    close(fd);
  }
  printf("%d alarms\n", (int)alarms);
  return alarms > 0 ? 0 : 2;
}
)";

/// A program whose open(2) of a FIFO, waiting for a writer, a SIGALRM caught
/// without SA_RESTART interrupts: untraced, the open fails with EINTR. A
/// thread opens the FIFO for writing after 3 s, so an open that is wrongly
/// restarted succeeds then instead of waiting for ever.
constexpr const char* k_fifo_program = R"(#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static void on_alarm(int s) { (void)s; }
static void* writer(void* fifo) {
  sleep(3);
  int fd = open((const char*)fifo, O_WRONLY | O_NONBLOCK);
  (void)fd;
  return 0;
}
int main(int argc, char** argv) {
  (void)argc;
  if (mkfifo(argv[1], 0600) != 0) return 3;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_alarm; /* no SA_RESTART */
  sigaction(SIGALRM, &action, 0);
  pthread_t thread;
  pthread_create(&thread, 0, writer, argv[1]);
  alarm(1);
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0 && errno == EINTR) {
    printf("interrupted\n");
    return 0;
  }
  printf("open returned %d: %s\n", fd, fd < 0 ? strerror(errno) : "opened");
  return 1;
}
)";

}  // namespace

TEST_CASE("trace::run_traced never fails a file's stat or open with EINTR, signals caught without SA_RESTART") {
  // Under user notifications, a call a signal interrupts before the listener
  // receives it returns -ERESTARTSYS without running (0.5-3 % of these calls,
  // 2 vCPUs): the tracer restarts it at the signal's delivery.
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  OPCACHE_SKIP_IF(!build_c_program(dir, "alarmed", k_alarmed_program), "gcc cannot build the test program");
  REQUIRE(opcache::test::run_process({dir / "alarmed"}).exit_code == 0);  // untraced
  for (const auto mechanism : {TraceMechanism::ptrace_stop, TraceMechanism::user_notification}) {
    if (mechanism == TraceMechanism::user_notification &&
        (notification_unavailable() || !opcache::trace::can_restart_interrupted_calls())) {
      MESSAGE("skipped under user notifications: this kernel or architecture has no listener or no restart");
      continue;
    }
    CAPTURE(static_cast<int>(mechanism));
    const auto outcome = run_traced_under(mechanism, {dir / "alarmed"});
    CHECK(outcome.status == 0);
    CHECK_FALSE(outcome.blind.has_value());
  }
}

TEST_CASE("trace::run_traced takes a file opened O_PATH as read: reopened through /proc/self/fd, it names no file") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  OPCACHE_SKIP_IF(!build_c_program(dir, "reopen", k_reopen_program), "gcc cannot build the test program");
  opcache::test::write_text(dir / "model.txt", "weights\n");
  const auto outcome = run_traced_ok({dir / "reopen", dir / "model.txt"});
  CHECK(outcome.status == 0);
  CHECK_FALSE(outcome.blind.has_value());
  check_read_with_identity(outcome, dir / "model.txt");
  // A directory opened O_PATH stays a look-up: what is read under it is opened by name.
  const auto listed = run_traced_ok({"sh", "-c", "cd '" + dir.path.string() + "' && ./reopen . ; true"});
  CHECK_FALSE(has_trace_event(listed, dir.path.string(), Access::read));
}

TEST_CASE("trace::run_traced goes blind when the tree may see other files under its paths: chroot, a mount namespace") {
  TRACE_TEST_REQUIRE_TRACING();
  OPCACHE_SKIP_IF(!trace_test_program("unshare"), "util-linux unshare is not installed");
  // Whether or not this user may make the call, it was made: blind either way.
  const auto rooted = run_traced_ok({"unshare", "--root=/", "true"});
  REQUIRE(rooted.blind.has_value());
  CHECK(rooted.blind->find("called chroot, after which its paths may name other files") != std::string::npos);
  const auto unshared = run_traced_ok({"unshare", "--mount", "true"});
  REQUIRE(unshared.blind.has_value());
  CHECK(unshared.blind->find("called unshare") != std::string::npos);
  // A namespace of another kind leaves the file system as it was.
  const auto user_only = run_traced_ok({"unshare", "--user", "true"});
  CHECK_FALSE(user_only.blind.has_value());
}

TEST_CASE("trace::run_traced goes blind on openat2 with RESOLVE_IN_ROOT, and follows it without") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  OPCACHE_SKIP_IF(!build_c_program(dir, "open2", k_openat2_program), "gcc cannot build the test program");
  opcache::test::write_text(dir / "tree/inc/k.h", "#define K 1\n");
  const auto plain = run_traced_ok({dir / "open2", dir / "tree", "inc/k.h", "plain"});
  OPCACHE_SKIP_IF(plain.status == 3, "this kernel has no openat2");
  CHECK(plain.status == 0);
  CHECK_FALSE(plain.blind.has_value());
  check_read_with_identity(plain, dir / "tree/inc/k.h");
  // "/inc/k.h" in the root the descriptor names: the tracer would resolve it from the real root.
  const auto rooted = run_traced_ok({dir / "open2", dir / "tree", "/inc/k.h", "in-root"});
  CHECK(rooted.status == 0);
  REQUIRE(rooted.blind.has_value());
  CHECK(rooted.blind->find("RESOLVE_IN_ROOT") != std::string::npos);
}

TEST_CASE("trace::run_traced follows a process's cwd, root and fd links in /proc to the files they lead to") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  opcache::test::write_text(dir / "model.txt", "weights\n");
  opcache::test::write_text(dir / "other.txt", "more\n");
  opcache::test::write_text(dir / "inc/k.h", "#define K 1\n");
  const auto outcome = run_traced_ok(
      {"sh", "-c",
       "cd '" + dir.path.string() + "' && cat /proc/self/cwd/model.txt /proc/self/root" + dir.path.string() +
           "/other.txt > /dev/null && exec 4<inc && cat /dev/fd/4/k.h /proc/self/fd/4/missing.h; true"});
  CHECK(outcome.status == 0);
  CHECK_FALSE(outcome.blind.has_value());
  check_read_with_identity(outcome, dir / "model.txt");
  check_read_with_identity(outcome, dir / "other.txt");
  check_read_with_identity(outcome, dir / "inc/k.h");
  CHECK(has_trace_event(outcome, dir / "inc/missing.h", Access::absent));
}

TEST_CASE("trace::run_traced resolves '..' after a symlink as the kernel does, not by the name written before it") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  opcache::test::write_text(dir / "real/k.h", "#define K 1\n");
  fs::create_directories(dir / "real/sub");
  fs::create_symlink(dir / "real/sub", dir / "link");
  const auto outcome = run_traced_ok(
      {"sh", "-c", "cd '" + dir.path.string() + "' && cat link/../k.h '" + dir.path.string() + "/link/../none.h'; true"});
  CHECK(outcome.status == 0);
  CHECK_FALSE(outcome.blind.has_value());
  check_read_with_identity(outcome, dir / "real/k.h");
  CHECK(has_trace_event(outcome, dir / "real/none.h", Access::absent));
  CHECK_FALSE(has_trace_event(outcome, dir / "k.h", Access::absent));
}

TEST_CASE("trace::run_traced goes blind on io_uring_setup: a file opened through a ring passes no path the filter sees") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  OPCACHE_SKIP_IF(!build_c_program(dir, "ring", k_io_uring_program), "gcc cannot build the test program");
  opcache::test::write_text(dir / "model.txt", "weights\n");
  for (const auto mechanism : {TraceMechanism::ptrace_stop, TraceMechanism::user_notification}) {
    if (mechanism == TraceMechanism::user_notification && notification_unavailable()) {
      MESSAGE("skipped under user notifications: " << *notification_unavailable());
      continue;
    }
    CAPTURE(static_cast<int>(mechanism));
    const auto outcome = run_traced_under(mechanism, {dir / "ring", dir / "model.txt"});
    // Where the kernel has io_uring (exit 0) the ring really read the file; either way the trace is blind.
    CHECK((outcome.status == 0 || outcome.status == 3));
    REQUIRE(outcome.blind.has_value());
    CHECK(outcome.blind->find("io_uring_setup") != std::string::npos);
  }
}

TEST_CASE("trace::run_traced leaves a FIFO's open interrupted by a signal failing with EINTR, as untraced") {
  TRACE_TEST_REQUIRE_TRACING();
  TraceTestDir dir;
  OPCACHE_SKIP_IF(!build_c_program(dir, "fifo", k_fifo_program), "gcc cannot build the test program");
  REQUIRE(opcache::test::run_process({dir / "fifo", dir / "untraced.fifo"}).exit_code == 0);
  for (const auto mechanism : {TraceMechanism::ptrace_stop, TraceMechanism::user_notification}) {
    if (mechanism == TraceMechanism::user_notification && notification_unavailable()) {
      MESSAGE("skipped under user notifications: " << *notification_unavailable());
      continue;
    }
    CAPTURE(static_cast<int>(mechanism));
    const std::string fifo = dir / (mechanism == TraceMechanism::ptrace_stop ? "ptrace.fifo" : "notify.fifo");
    const auto outcome = run_traced_under(mechanism, {dir / "fifo", fifo});
    CHECK(outcome.status == 0);
  }
}

TEST_CASE("trace::run_traced reports the same events of a gcc compile under ptrace stops and user notifications") {
  TRACE_TEST_REQUIRE_TRACING();
  OPCACHE_SKIP_IF(notification_unavailable().has_value(), *notification_unavailable());
  OPCACHE_SKIP_IF(!trace_test_program("gcc"), "gcc is not installed");
  const auto prepare = [](const TraceTestDir& dir) {
    opcache::test::write_text(dir / "k.c", "#include <stdio.h>\n#include \"k.h\"\nint k(void) { return K; }\n");
    opcache::test::write_text(dir / "inc2/k.h", "#define K 7\n");
    fs::create_directories(dir / "inc1");
    fs::create_directories(dir / "out");
  };
  const auto run = check_mechanisms_agree(prepare, "gcc -O2 -c k.c -Iinc1 -Iinc2 -o out/k.o", EventOrder::same);
  CHECK(run.outcome.status == 0);
  CHECK_FALSE(run.outcome.blind.has_value());
  check_read_with_identity(run.outcome, *run.dir / "k.c");
  CHECK(has_trace_event(run.outcome, *run.dir / "inc1/k.h", Access::absent));
  CHECK(has_trace_event(run.outcome, *run.dir / "out/k.o", Access::written));
  CHECK(trace_event_named(run.outcome, "cc1", Access::executed) != nullptr);
}

TEST_CASE("trace::run_traced reports the same events of a shell pipeline under ptrace stops and user notifications") {
  TRACE_TEST_REQUIRE_TRACING();
  OPCACHE_SKIP_IF(notification_unavailable().has_value(), *notification_unavailable());
  const auto prepare = [](const TraceTestDir& dir) {
    opcache::test::write_text(dir / "a.txt", "b\na\n");
    opcache::test::write_text(dir / "sub/x", "");
  };
  const auto run = check_mechanisms_agree(
      prepare, "cat a.txt | sort | tee b.txt > /dev/null && ls sub > c.txt && mv c.txt d.txt && rm b.txt",
      EventOrder::any);
  CHECK(run.outcome.status == 0);
  CHECK_FALSE(run.outcome.blind.has_value());
  check_read_with_identity(run.outcome, *run.dir / "a.txt");
  CHECK(has_trace_event(run.outcome, *run.dir / "sub", Access::listed));
  CHECK(has_trace_event(run.outcome, *run.dir / "b.txt", Access::removed));
  CHECK(has_trace_event(run.outcome, *run.dir / "d.txt", Access::written));
}

TEST_CASE("trace::run_traced reports the same events of a static busybox under ptrace stops and user notifications") {
  TRACE_TEST_REQUIRE_TRACING();
  OPCACHE_SKIP_IF(notification_unavailable().has_value(), *notification_unavailable());
  OPCACHE_SKIP_IF(!fs::exists("/bin/busybox"), "/bin/busybox is not installed (Debian's busybox-static)");
  const auto prepare = [](const TraceTestDir& dir) { opcache::test::write_text(dir / "b.txt", "beta\n"); };
  const auto run = check_mechanisms_agree(
      prepare, "exec /bin/busybox sh -c 'cat b.txt > c.txt && /bin/busybox ls . > /dev/null && test ! -e missing'",
      EventOrder::same);
  CHECK(run.outcome.status == 0);
  CHECK_FALSE(run.outcome.blind.has_value());
  CHECK(has_trace_event(run.outcome, "/bin/busybox", Access::executed));
  check_read_with_identity(run.outcome, *run.dir / "b.txt");
  CHECK(has_trace_event(run.outcome, *run.dir / "c.txt", Access::written));
  CHECK(has_trace_event(run.outcome, *run.dir / "missing", Access::absent));
}

TEST_CASE("trace::run_traced reports the same events of a vfork'd child under ptrace stops and user notifications") {
  TRACE_TEST_REQUIRE_TRACING();
  OPCACHE_SKIP_IF(notification_unavailable().has_value(), *notification_unavailable());
  OPCACHE_SKIP_IF(!trace_test_program("gcc"), "gcc is not installed");
  const std::string source =
      "#include <fcntl.h>\n#include <sys/wait.h>\n#include <unistd.h>\n"
      "int main(void) {\n"
      "  pid_t child = vfork();\n"
      "  if (child == 0) { execl(\"/bin/cat\", \"cat\", \"a.txt\", (char*)0); _exit(127); }\n"
      "  int status = 1;\n"
      "  waitpid(child, &status, 0);\n"
      "  return open(\"b.txt\", O_RDONLY) < 0 || status != 0;\n"
      "}\n";
  const auto prepare = [&source](const TraceTestDir& dir) {
    REQUIRE(build_c_program(dir, "vforks", source));
    opcache::test::write_text(dir / "a.txt", "alpha\n");
    opcache::test::write_text(dir / "b.txt", "beta\n");
  };
  const auto run = check_mechanisms_agree(prepare, "./vforks > out.txt", EventOrder::same);
  CHECK(run.outcome.status == 0);
  CHECK_FALSE(run.outcome.blind.has_value());
  check_read_with_identity(run.outcome, *run.dir / "a.txt");
  check_read_with_identity(run.outcome, *run.dir / "b.txt");
  CHECK(trace_event_index(run.outcome, *run.dir / "a.txt", Access::read) <
        trace_event_index(run.outcome, *run.dir / "b.txt", Access::read));
  CHECK(opcache::test::read_text(*run.dir / "out.txt") == "alpha\n");
}

TEST_CASE("trace::run_traced reports the same events of a multithreaded program under both mechanisms") {
  TRACE_TEST_REQUIRE_TRACING();
  OPCACHE_SKIP_IF(notification_unavailable().has_value(), *notification_unavailable());
  OPCACHE_SKIP_IF(!trace_test_program("gcc"), "gcc is not installed");
  // Four threads open a file each; then a thread other than the leader runs cat.
  const std::string source =
      "#include <fcntl.h>\n#include <pthread.h>\n#include <unistd.h>\n"
      "static void* reader(void* name) { int fd = open(name, O_RDONLY); if (fd >= 0) close(fd); return 0; }\n"
      "static void* runner(void* name) { execl(\"/bin/cat\", \"cat\", (char*)name, (char*)0); return 0; }\n"
      "int main(void) {\n"
      "  char* names[4] = {\"f0\", \"f1\", \"f2\", \"f3\"};\n"
      "  pthread_t threads[4];\n"
      "  for (int i = 0; i < 4; ++i) pthread_create(&threads[i], 0, reader, names[i]);\n"
      "  for (int i = 0; i < 4; ++i) pthread_join(threads[i], 0);\n"
      "  pthread_t exec_thread;\n"
      "  pthread_create(&exec_thread, 0, runner, \"g.txt\");\n"
      "  pthread_join(exec_thread, 0);\n"
      "  return 1;\n"
      "}\n";
  const auto prepare = [&source](const TraceTestDir& dir) {
    REQUIRE(build_c_program(dir, "threads", source));
    for (const char* name : {"f0", "f1", "f2", "f3"}) {
      opcache::test::write_text(dir / name, name);
    }
    opcache::test::write_text(dir / "g.txt", "gamma\n");
  };
  const auto run = check_mechanisms_agree(prepare, "./threads > out.txt", EventOrder::any);
  CHECK(run.outcome.status == 0);
  CHECK_FALSE(run.outcome.blind.has_value());
  for (const char* name : {"f0", "f1", "f2", "f3", "g.txt"}) {
    check_read_with_identity(run.outcome, *run.dir / name);
  }
  CHECK(trace_event_named(run.outcome, "cat", Access::executed) != nullptr);
  CHECK(opcache::test::read_text(*run.dir / "out.txt") == "gamma\n");
}

TEST_CASE("trace::run_traced goes blind alike on 32-bit and x32 calls and on a process that outlives the command") {
  TRACE_TEST_REQUIRE_TRACING();
  OPCACHE_SKIP_IF(notification_unavailable().has_value(), *notification_unavailable());
  TraceTestDir programs;
  const auto skip = build_foreign_convention_programs(programs);
  OPCACHE_SKIP_IF(skip.has_value(), *skip);
  for (const char* program : {"i386", "x32"}) {
    CAPTURE(program);
    const auto by_stop = run_traced_under(TraceMechanism::ptrace_stop, {programs / program});
    const auto notified = run_traced_under(TraceMechanism::user_notification, {programs / program});
    CHECK(notified.status == 0);
    REQUIRE(notified.blind.has_value());
    REQUIRE(by_stop.blind.has_value());
    CHECK(without_process_ids(*notified.blind) == without_process_ids(*by_stop.blind));
    CHECK(notified.events.size() == by_stop.events.size());
  }
  const auto prepare = [](const TraceTestDir&) {};
  const auto run = check_mechanisms_agree(prepare, "(sleep 0.3; echo late > late.txt) &", EventOrder::same);
  REQUIRE(run.outcome.blind.has_value());
  CHECK(run.outcome.blind->find("outlived the command") != std::string::npos);
  CHECK(has_trace_event(run.outcome, *run.dir / "late.txt", Access::written));
}

TEST_CASE("trace::run_traced refuses and fails alike under ptrace stops and user notifications") {
  TRACE_TEST_REQUIRE_TRACING();
  OPCACHE_SKIP_IF(notification_unavailable().has_value(), *notification_unavailable());
  TraceTestDir dir;
  opcache::test::write_executable(dir / "garbage", std::string("\x01\x02\x03 not a program\n"));
  for (const auto mechanism : {TraceMechanism::ptrace_stop, TraceMechanism::user_notification}) {
    CAPTURE(mechanism_name(mechanism));
    CHECK(run_traced_under(mechanism, {"sh", "-c", "exit 7"}).status == 7);
    CHECK(run_traced_under(mechanism, {"sh", "-c", "kill -TERM $$"}).status == 128 + 15);
    CHECK(run_traced_under(mechanism, {"sh", "-c", "kill -STOP $$; exit 3"}).status == 3);
    opcache::trace::TraceRequest unrunnable;
    unrunnable.argv = {dir / "garbage"};
    unrunnable.mechanism = mechanism;
    const auto refused = opcache::trace::run_traced(unrunnable);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code() == opcache::ErrorCode::usage);
    CHECK(refused.error().message() == "cannot run " + (dir / "garbage") + ": execve: Exec format error");
    opcache::trace::TraceRequest closed_input;
    closed_input.argv = {"true"};
    closed_input.stdin_fd = 987;  // not open
    closed_input.mechanism = mechanism;
    CHECK(opcache::trace::run_traced(closed_input).error().code() == opcache::ErrorCode::usage);
  }
}
