// The tracer's preload library (trace/preload/, trace/preload_channel.hpp):
// real programs traced with and without it report the same events, in an
// order that keeps "created during the run" right, with far fewer calls
// handed to the tracer; and a program that closes or replaces its channel
// is still seen.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/program_search.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/temp_dir.hpp"
#include "trace/preload_channel.hpp"
#include "trace/process_tracer.hpp"

namespace fs = std::filesystem;

using opcache::trace::Access;

namespace {

/// Skips where the preload library is not used: no tracing, no user
/// notifications (it goes with them), or no library (another architecture).
#define PRELOAD_TEST_REQUIRE_LIBRARY()                                                                             \
  OPCACHE_SKIP_IF(opcache::trace::tracing_unavailable().has_value(),                                               \
                  "cannot trace commands here: " + *opcache::trace::tracing_unavailable());                        \
  OPCACHE_SKIP_IF(opcache::trace::default_trace_mechanism() != opcache::trace::TraceMechanism::user_notification, \
                  "the tracer uses ptrace stops here, without the preload library");                              \
  OPCACHE_SKIP_IF(!opcache::trace::preload_library(), "no preload library for this build (x86_64 only)")

/// Skips where gcc, which these tests trace or build their programs with, is missing.
#define PRELOAD_TEST_REQUIRE_GCC()                                                                             \
  OPCACHE_SKIP_IF(!opcache::base::find_program("gcc", "/usr/bin:/bin", opcache::base::EmptyPathEntry::skipped), \
                  "gcc is not installed")

opcache::trace::TraceOutcome preload_test_trace(const std::vector<std::string>& argv, bool preload) {
  opcache::trace::TraceRequest request;
  request.argv = argv;
  request.preload = preload;
  auto outcome = opcache::trace::run_traced(request);
  REQUIRE_MESSAGE(outcome.ok(), (outcome.ok() ? "" : outcome.error().message()));
  CHECK(outcome->status == 0);
  CHECK_FALSE(outcome->blind.has_value());
  CHECK(outcome->preloaded == preload);
  return std::move(*outcome);
}


std::set<std::tuple<std::string, int, bool>> preload_test_event_set(const opcache::trace::TraceOutcome& outcome,
                                                                     const std::string& under) {
  std::set<std::tuple<std::string, int, bool>> events;
  for (const auto& event : outcome.events) {
    if (event.path.rfind(under, 0) == 0) {
      events.emplace(event.path, static_cast<int>(event.access), event.identity.has_value());
    }
  }
  return events;
}

/// CHECKs that the two outcomes have the same events under `under`, naming those that differ.
void check_same_preload_test_events(const opcache::trace::TraceOutcome& preloaded,
                                    const opcache::trace::TraceOutcome& notified, const std::string& under) {
  const auto with = preload_test_event_set(preloaded, under);
  const auto without = preload_test_event_set(notified, under);
  for (const auto& [path, access, identified] : with) {
    CHECK_MESSAGE(without.count({path, access, identified}) == 1,
                  "only with the library: " << path << " access " << access << " identity " << identified);
  }
  for (const auto& [path, access, identified] : without) {
    CHECK_MESSAGE(with.count({path, access, identified}) == 1,
                  "only without the library: " << path << " access " << access << " identity " << identified);
  }
}

long preload_test_index(const opcache::trace::TraceOutcome& outcome, const std::string& path, Access access) {
  const auto found = std::find_if(outcome.events.begin(), outcome.events.end(),
                                  [&](const auto& event) { return event.path == path && event.access == access; });
  return found == outcome.events.end() ? -1 : static_cast<long>(found - outcome.events.begin());
}

struct PreloadTestDir {
  opcache::test::TempDir temp;
  fs::path path = fs::canonical(temp.path());
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace

TEST_CASE("trace::preload gcc's events are the same with the preload library, with under half the calls handed") {
  PRELOAD_TEST_REQUIRE_LIBRARY();
  PRELOAD_TEST_REQUIRE_GCC();
  PreloadTestDir dir;
  opcache::test::write_text(dir / "k.c", "#include \"k.h\"\n#include <stddef.h>\nint k(void) { return K; }\n");
  opcache::test::write_text(dir / "inc2/k.h", "#define K 7\n");
  fs::create_directories(dir / "inc1");
  const std::vector<std::string> command = {
      "sh", "-c", "cd '" + dir.path.string() + "' && gcc -c k.c -Iinc1 -Iinc2 -o k.o && gcc -c k.c -Iinc2 -o k2.o"};

  const auto notified = preload_test_trace(command, false);
  fs::remove(dir / "k.o");  // each run starts from the same tree
  fs::remove(dir / "k2.o");
  const auto preloaded = preload_test_trace(command, true);

  // The work directory's events and the system's headers, one for one.
  check_same_preload_test_events(preloaded, notified, dir.path.string());
  check_same_preload_test_events(preloaded, notified, "/usr/lib/gcc");
  check_same_preload_test_events(preloaded, notified, "/usr/include");
  CHECK(preload_test_index(preloaded, dir / "inc1/k.h", Access::absent) >= 0);
  const auto header = preload_test_index(preloaded, dir / "inc2/k.h", Access::read);
  REQUIRE(header >= 0);
  CHECK(preloaded.events[static_cast<std::size_t>(header)].identity ==
        notified.events[static_cast<std::size_t>(preload_test_index(notified, dir / "inc2/k.h", Access::read))]
            .identity);
  // The library itself, which the loader reads into every program, is no input.
  for (const auto& event : preloaded.events) {
    CHECK_MESSAGE(event.path != *opcache::trace::preload_library(), event.path);
  }
  CHECK(preloaded.calls_handed * 2 < notified.calls_handed);
}

TEST_CASE("trace::preload records come before the notified calls after them: read then removed, written then read") {
  PRELOAD_TEST_REQUIRE_LIBRARY();
  PreloadTestDir dir;
  opcache::test::write_text(dir / "in.txt", "input\n");
  const auto outcome = preload_test_trace(
      {"sh", "-c",
       "cd '" + dir.path.string() + "' && cat in.txt > /dev/null && rm in.txt && echo made > made.txt && cat made.txt"},
      true);
  const auto read_input = preload_test_index(outcome, dir / "in.txt", Access::read);
  const auto removed_input = preload_test_index(outcome, dir / "in.txt", Access::removed);
  const auto written = preload_test_index(outcome, dir / "made.txt", Access::written);
  const auto read_made = preload_test_index(outcome, dir / "made.txt", Access::read);
  REQUIRE(read_input >= 0);
  REQUIRE(written >= 0);
  CHECK(read_input < removed_input);
  CHECK(written < read_made);
}

TEST_CASE("trace::preload a program that closes or replaces the library's channel is still seen, notified") {
  PRELOAD_TEST_REQUIRE_LIBRARY();
  PreloadTestDir dir;
  opcache::test::write_text(dir / "a.txt", "a\n");
  opcache::test::write_text(dir / "b.txt", "b\n");
  const auto descriptor = std::to_string(opcache::trace::PreloadChannel::child_descriptor_number());
  // bash: dash takes no descriptor number above 9 in a redirection.
  OPCACHE_SKIP_IF(!opcache::base::find_program("bash", "/usr/bin:/bin", opcache::base::EmptyPathEntry::skipped),
                  "bash is not installed");
  const auto outcome = preload_test_trace({"bash", "-c",
                                           "cd '" + dir.path.string() + "' && (exec " + descriptor +
                                               ">&-; cat a.txt missing-a.txt) ; (exec " + descriptor +
                                               "<b.txt; cat b.txt missing-b.txt); exit 0"},
                                          true);
  CHECK(preload_test_index(outcome, dir / "a.txt", Access::read) >= 0);
  CHECK(preload_test_index(outcome, dir / "b.txt", Access::read) >= 0);
  CHECK(preload_test_index(outcome, dir / "missing-a.txt", Access::absent) >= 0);
  CHECK(preload_test_index(outcome, dir / "missing-b.txt", Access::absent) >= 0);
}

/// Sets an environment variable for one test case, and puts back what was there.
class PreloadTestVariable {
 public:
  PreloadTestVariable(const char* name, const std::string& value) : m_name(name) {
    if (const char* before = std::getenv(name)) {
      m_before = before;
    }
    ::setenv(name, value.c_str(), 1);
  }
  ~PreloadTestVariable() {
    if (m_before) {
      ::setenv(m_name, m_before->c_str(), 1);
    } else {
      ::unsetenv(m_name);
    }
  }
  PreloadTestVariable(const PreloadTestVariable&) = delete;
  PreloadTestVariable& operator=(const PreloadTestVariable&) = delete;

 private:
  const char* m_name;
  std::optional<std::string> m_before;
};

TEST_CASE("trace::preload the library comes after the user's LD_PRELOAD, and ASan is told not to insist on coming first") {
  PRELOAD_TEST_REQUIRE_LIBRARY();
  PreloadTestDir dir;
  const std::string user_library = "libm.so.6";  // a library every program may load
  const PreloadTestVariable preload("LD_PRELOAD", user_library);
  const PreloadTestVariable asan("ASAN_OPTIONS", "detect_leaks=0");
  const auto outcome = preload_test_trace(
      {"sh", "-c", "printf '%s|%s' \"$LD_PRELOAD\" \"$ASAN_OPTIONS\" > '" + (dir / "env.txt") + "' 2>/dev/null"}, true);
  CHECK(opcache::test::read_text(dir / "env.txt") ==
        user_library + ":" + *opcache::trace::preload_library() + "|detect_leaks=0:verify_asan_link_order=0");
}

TEST_CASE("trace::preload failed opens and /proc spelt oddly are classified as without the library") {
  PRELOAD_TEST_REQUIRE_LIBRARY();
  OPCACHE_SKIP_IF(!opcache::base::find_program("python3", "/usr/bin:/bin", opcache::base::EmptyPathEntry::skipped),
                  "python3 is not installed");
  PreloadTestDir dir;
  opcache::test::write_text(dir / "file.txt", "file\n");
  opcache::test::write_text(dir / "model.txt", "weights\n");
  fs::create_symlink(dir / "file.txt", dir / "link");
  opcache::test::write_text(dir / "opens.py",
                            "import os\n"
                            "for flags in (os.O_RDONLY | os.O_DIRECTORY, os.O_RDONLY | os.O_NOFOLLOW):\n"
                            "    for name in ('file.txt', 'link', 'missing/x'):\n"
                            "        try:\n"
                            "            os.close(os.open(name, flags))\n"
                            "        except OSError:\n"
                            "            pass\n"
                            "open('//proc/self/cwd/model.txt').read()\n"
                            "open('/usr/../proc/self/cwd/model.txt').read()\n");
  const std::vector<std::string> command = {"sh", "-c", "cd '" + dir.path.string() + "' && python3 -S opens.py"};
  const auto notified = preload_test_trace(command, false);
  const auto preloaded = preload_test_trace(command, true);
  check_same_preload_test_events(preloaded, notified, dir.path.string());
  // O_DIRECTORY on a file fails with ENOTDIR: the file is there, read.
  CHECK(preload_test_index(preloaded, dir / "file.txt", Access::read) >= 0);
  CHECK(preload_test_index(preloaded, dir / "file.txt", Access::absent) < 0);
  CHECK(preload_test_index(preloaded, dir / "link", Access::read) >= 0);  // O_NOFOLLOW: ELOOP on the link itself
  CHECK(preload_test_index(preloaded, dir / "missing/x", Access::absent) >= 0);
  CHECK(preload_test_index(preloaded, dir / "model.txt", Access::read) >= 0);  // through the tracee's /proc/self
}

namespace {

/// Runs its arguments where faccessat2 fails with ENOSYS, as on Linux
/// before 5.8 or under a seccomp profile that refuses it that way.
constexpr const char* k_without_faccessat2 = R"(#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
int main(int argc, char** argv) {
  (void)argc;
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 439 /* faccessat2 */, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {sizeof code / sizeof code[0], code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    perror("seccomp");
    return 99;
  }
  execv(argv[1], argv + 1);
  perror("execv");
  return 98;
}
)";

/// Checks its argument with faccessat and AT_EACCESS; prints 0 or the errno,
/// after what early.c's constructor printed.
constexpr const char* k_effective_access = R"(#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char** argv) {
  (void)argc;
  printf("%d\n", faccessat(AT_FDCWD, argv[1], R_OK, AT_EACCESS) == 0 ? 0 : errno);
  return 0;
}
)";

/// A library of that program whose constructor makes the same check before
/// any preloaded library's constructor has run.
constexpr const char* k_early_access = R"(#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void early(void) {
  printf("%d\n", faccessat(AT_FDCWD, "file.txt", R_OK, AT_EACCESS) == 0 ? 0 : errno);
}
)";

}  // namespace

TEST_CASE("trace::preload faccessat with flags works where faccessat2 is missing (ENOSYS), as without the library") {
  PRELOAD_TEST_REQUIRE_LIBRARY();
  PRELOAD_TEST_REQUIRE_GCC();
  PreloadTestDir dir;
  opcache::test::write_text(dir / "without_faccessat2.c", k_without_faccessat2);
  opcache::test::write_text(dir / "effective_access.c", k_effective_access);
  opcache::test::write_text(dir / "early.c", k_early_access);
  opcache::test::write_text(dir / "file.txt", "file\n");
  const std::string cd = "cd '" + dir.path.string() + "' && ";
  const std::string build = "gcc -o without_faccessat2 without_faccessat2.c && "
                            "gcc -shared -fPIC -o libearly.so early.c && "
                            "gcc -o effective_access effective_access.c -L. -Wl,--no-as-needed -learly -Wl,-rpath,'$ORIGIN'";
  REQUIRE(std::system((cd + build).c_str()) == 0);
  for (const bool preload : {false, true}) {
    CAPTURE(preload);
    preload_test_trace({"sh", "-c", cd + "./without_faccessat2 ./effective_access file.txt > result.txt"}, preload);
    // The C library's emulation, not ENOSYS: from main, and from a constructor run before the library's own.
    CHECK(opcache::test::read_text(dir / "result.txt") == "0\n0\n");
  }
}

namespace {

/// Runs `prog hello` by execvp, execlp or execvpe (argv[1]) with PATH set to
/// argv[2], or argv[2] itself by execve ("ve"); prints the errno when that fails.
constexpr const char* k_path_walker = R"(#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char** argv) {
  (void)argc;
  setenv("PATH", argv[2], 1);
  char* args[] = {"prog", "hello", NULL};
  if (strcmp(argv[1], "vp") == 0) execvp("prog", args);
  if (strcmp(argv[1], "lp") == 0) execlp("prog", "prog", "hello", (char*)NULL);
  if (strcmp(argv[1], "vpe") == 0) execvpe("prog", args, environ);
  if (strcmp(argv[1], "ve") == 0) execve(argv[2], args, environ);
  printf("errno %d\n", errno);
  return 0;
}
)";

}  // namespace

TEST_CASE("trace::preload a PATH walk (execvp, execlp, execvpe) skips missing programs unnotified, as the C library would") {
  PRELOAD_TEST_REQUIRE_LIBRARY();
  PRELOAD_TEST_REQUIRE_GCC();
  PreloadTestDir dir;
  opcache::test::write_text(dir / "walker.c", k_path_walker);
  const std::string cd = "cd '" + dir.path.string() + "' && ";
  REQUIRE(std::system((cd + "gcc -o walker walker.c").c_str()) == 0);
  // m1..m6 lack prog; denied/prog is there but not executable (EACCES: the walk goes on);
  // found/prog has no #! line (ENOEXEC: /bin/sh runs it).
  std::string search;
  for (int i = 1; i <= 6; ++i) {
    fs::create_directories(dir / ("m" + std::to_string(i)));
    search += dir / ("m" + std::to_string(i)) + ":";
  }
  opcache::test::write_text(dir / "denied/prog", "echo denied > result.txt\n");
  opcache::test::write_executable(dir / "found/prog", "echo \"ran $1\" > result.txt\n");
  search += dir / "denied" + ":" + dir / "found";
  for (const std::string mode : {"vp", "lp", "vpe"}) {
    CAPTURE(mode);
    const std::vector<std::string> command = {"sh", "-c", cd + "./walker " + mode + " '" + search + "' > out.txt"};
    const auto notified = preload_test_trace(command, false);
    CHECK(opcache::test::read_text(dir / "result.txt") == "ran hello\n");
    fs::remove(dir / "result.txt");
    const auto preloaded = preload_test_trace(command, true);
    CHECK(opcache::test::read_text(dir / "result.txt") == "ran hello\n");
    CHECK(opcache::test::read_text(dir / "out.txt").empty());
    fs::remove(dir / "result.txt");
    check_same_preload_test_events(preloaded, notified, dir.path.string());
    for (int i = 1; i <= 6; ++i) {
      CHECK(preload_test_index(preloaded, dir / ("m" + std::to_string(i) + "/prog"), Access::absent) >= 0);
    }
    CHECK(preload_test_index(preloaded, dir / "found/prog", Access::executed) >= 0);
    CHECK(preloaded.calls_handed + 6 <= notified.calls_handed);  // no execve for the six missing ones
  }
  // Only a program that is not executable: EACCES, as the C library reports it.
  const std::string only_denied = dir / "m1" + ":" + dir / "denied";
  preload_test_trace({"sh", "-c", cd + "./walker vp '" + only_denied + "' > out.txt"}, true);
  CHECK(opcache::test::read_text(dir / "out.txt") == "errno 13\n");
  // "prog/" fails with ENOTDIR though prog is there: left to the tracer, which sees the file.
  const std::vector<std::string> slashed = {"sh", "-c", cd + "./walker ve '" + dir / "found/prog/" + "' > out.txt"};
  const auto slashed_notified = preload_test_trace(slashed, false);
  CHECK(opcache::test::read_text(dir / "out.txt") == "errno 20\n");
  const auto slashed_preloaded = preload_test_trace(slashed, true);
  CHECK(opcache::test::read_text(dir / "out.txt") == "errno 20\n");
  check_same_preload_test_events(slashed_preloaded, slashed_notified, dir.path.string());
}
