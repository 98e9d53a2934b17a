#!/usr/bin/env python3
"""The locking rules, checked by the compiler.

Two checks, both over the product's folders (api/ base/ store/ remote/
server/ cli/ trace/ refcc/ layouts/ include/; not tests/, bench/ or generated
files):

1. No bare standard lock: std::mutex, std::condition_variable,
   std::lock_guard, std::unique_lock and the other lock types of <mutex>,
   <shared_mutex> and <condition_variable> appear in product code only in
   base/mutex.hpp, which wraps them. Shared state is locked through
   base::Mutex, base::MutexLock and base::CondVar, which the analysis below
   understands (docs/architecture.md "Locking"). Each use elsewhere is
   reported with its file and line. Pure text (comments and string literals
   do not count); needs no compiler.
2. Clang's thread-safety analysis: every product source of a build (its
   compile_commands.json) that includes base/mutex.hpp, directly or through
   other headers, compiled with clang++-14 -fsyntax-only -Wthread-safety
   -Werror=thread-safety: a GUARDED_BY member touched without its mutex, a
   REQUIRES function called without it, a lock not released on every path...
   fails (base/thread_annotations.hpp, base/mutex.hpp). Only the
   thread-safety diagnostics are turned on: the gcc build owns the other
   warnings. Since check 1 leaves base/mutex.hpp the only way to lock, the
   files that include it are all the files that lock.

    scripts/check_thread_safety.py BUILD_DIR [--jobs N] [--compiler CLANG] [--source-dir DIR] [FILE...]

FILE... (paths relative to the source root) compiles only those, while
editing. --source-dir is the tree to check (default: this checkout; the
checker's own tests point it at small trees of fixtures).

Exit status 0 when every file passes, 1 when one does not (its diagnostics
are printed) or when the compiler is missing, 2 on a usage error.

Without the compiler the check fails: CI (.ci/run, scripts/test.sh, whose
scripts/install-deps.sh --test installs clang-14) must not pass a check it
did not make. A developer on a machine without clang may opt out explicitly
with OPCACHE_ALLOW_MISSING_CLANG=1 in the environment (e.g.
`OPCACHE_ALLOW_MISSING_CLANG=1 ctest -R architecture`): then check 1 still
runs and, when it passes, the script prints "OPCACHE_SKIP: <reason>" and
exits 0, which CTest (architecture.thread_safety) reports as skipped, never
as passed. .ci/run unsets the variable.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

# Folders whose sources are not the product.
SKIPPED_FOLDERS = ("tests", "bench", "build", "python", "examples")
# The product's folders, where check 1 looks for bare standard locks.
PRODUCT_FOLDERS = ("api", "base", "store", "remote", "server", "cli", "trace", "refcc", "layouts", "include")
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx", ".hpp", ".hh", ".hxx", ".h", ".ipp", ".inc", ".c")
# The one file that may name them: the annotated wrappers.
WRAPPER = "base/mutex.hpp"
BARE_LOCK = re.compile(r"\bstd\s*::\s*(mutex|recursive_mutex|timed_mutex|recursive_timed_mutex|shared_mutex|"
                       r"shared_timed_mutex|condition_variable|condition_variable_any|lock_guard|unique_lock|"
                       r"scoped_lock|shared_lock)\b")
# The developer's explicit opt-out when clang++-14 is not installed.
ALLOW_MISSING_COMPILER = "OPCACHE_ALLOW_MISSING_CLANG"
# gcc's warning flags (and OPCACHE_WERROR's -Werror) are dropped: this pass
# reports thread safety only, the gcc build every other warning.
DROPPED_FLAGS = ("-Wall", "-Wextra", "-Wpedantic", "-Werror")
CHECK_FLAGS = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety"]
# The header that brings the annotated lock types.
ANNOTATED_HEADER = "base/mutex.hpp"
QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
# A unity build's batch file (-DCMAKE_UNITY_BUILD=ON, the default) and its lines.
UNITY_BATCH = re.compile(r"/Unity/unity_[0-9]+_cxx\.cxx$")
ABSOLUTE_INCLUDE = re.compile(r'^#include "(/[^"]+)"$', re.MULTILINE)


def includes_annotated_header(path, source_dir, seen=None):
    """Whether `path` includes ANNOTATED_HEADER, following the product's quoted
    includes (written relative to the source root, as the layer rules require)."""
    seen = set() if seen is None else seen
    if path in seen:
        return False
    seen.add(path)
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError:
        return False
    for included in QUOTED_INCLUDE.findall(text):
        if included == ANNOTATED_HEADER:
            return True
        if includes_annotated_header(os.path.join(source_dir, included), source_dir, seen):
            return True
    return False


def code_only(text):
    """`text` with its comments and the contents of its string and character
    literals blanked (raw strings too), line breaks kept: what the compiler
    reads as code, at the same line numbers."""
    out = []
    i, n = 0, len(text)

    def blank(chunk):
        out.append("".join(c if c == "\n" else " " for c in chunk))

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(text[i:end])
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(text[i:end])
            i = end
        elif c == '"' and re.search(r"(?:^|[^A-Za-z0-9_])(?:u8|u|U|L)?R$", text[max(0, i - 3):i]):
            match = re.compile(r'"([^()\\ \t\n]{0,16})\(').match(text, i)
            if not match:
                out.append(c)
                i += 1
                continue
            close = ")" + match.group(1) + '"'
            end = text.find(close, match.end())
            end = n if end < 0 else end + len(close)
            out.append('"')
            blank(text[i + 1:end])
            i = end
        elif c == '"' or (c == "'" and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_"))):
            # A string or character literal (a ' after a digit or letter is a digit separator: 1'000).
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c)
            blank(text[i + 1:j])
            i = j + 1 if j < n and text[j] == c else j
            if i > j:
                out.append(c)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def bare_locks(source_dir):
    """Check 1: each use of a standard lock type in the product's folders
    outside WRAPPER, as "path:line: std::name" (paths relative to source_dir)."""
    found = []
    for folder in PRODUCT_FOLDERS:
        top = os.path.join(source_dir, folder)
        for directory, subdirectories, files in os.walk(top):
            subdirectories.sort()
            for name in sorted(files):
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, source_dir).replace(os.sep, "/")
                if not name.endswith(SOURCE_SUFFIXES) or relative == WRAPPER:
                    continue
                try:
                    with open(path, encoding="utf-8", errors="replace") as file:
                        code = code_only(file.read())
                except OSError:
                    continue
                for number, line in enumerate(code.split("\n"), start=1):
                    for match in BARE_LOCK.finditer(line):
                        found.append(f"{relative}:{number}: std::{match.group(1)}")
    return found


def compiled_sources(entry):
    """(source path, compiler arguments) for each source one compile_commands
    entry compiles: itself, or each file of a unity batch (CMake's
    CMakeFiles/<target>.dir/Unity/unity_<n>_cxx.cxx, a list of #include
    "<absolute path>" lines), with the batch's flags."""
    path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    arguments = entry.get("arguments") or shlex.split(entry["command"])
    if not UNITY_BATCH.search(path):
        return [(path, arguments)]
    with open(path, encoding="utf-8") as file:
        members = ABSOLUTE_INCLUDE.findall(file.read())
    return [(os.path.realpath(member), [member if argument == entry["file"] else argument for argument in arguments])
            for member in members]


def product_commands(build_dir, source_dir):
    """One clang command per product source: {source path: argument list}."""
    with open(os.path.join(build_dir, "compile_commands.json"), encoding="utf-8") as file:
        entries = json.load(file)
    commands = {}
    for entry in entries:
        for path, arguments in compiled_sources(entry):
            relative = os.path.relpath(path, source_dir)
            if relative.startswith("..") or relative.split(os.sep)[0] in SKIPPED_FOLDERS:
                continue
            if not path.endswith(".cpp") or path in commands or not includes_annotated_header(path, source_dir):
                continue
            commands[path] = (entry["directory"], clang_arguments(arguments[1:]))
    return commands


def clang_arguments(arguments):
    """The compiler's arguments without output, compile-only and warning flags."""
    kept = []
    skip_next = False
    for argument in arguments:
        if skip_next:
            skip_next = False
        elif argument == "-o":
            skip_next = True
        elif argument == "-c" or argument in DROPPED_FLAGS:
            continue
        else:
            kept.append(argument)
    return kept + CHECK_FLAGS


def check(compiler, directory, arguments):
    """Runs one file's check: (exit status, diagnostics)."""
    result = subprocess.run([compiler] + arguments, cwd=directory, capture_output=True, text=True, check=False)
    return result.returncode, result.stdout + result.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--compiler", default="clang++-14")
    parser.add_argument("--source-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                        help="the tree to check (default: this checkout)")
    parser.add_argument("files", nargs="*")
    options = parser.parse_intermixed_args()
    source_dir = os.path.realpath(options.source_dir)

    bare = bare_locks(source_dir)
    if bare:
        print(f"check_thread_safety: {len(bare)} bare standard lock(s) in product code; lock through "
              f"base::Mutex, base::MutexLock and base::CondVar ({WRAPPER}) with GUARDED_BY annotations:")
        for finding in bare:
            print("  " + finding)

    compiler = shutil.which(options.compiler)
    if compiler is None:
        reason = f"{options.compiler} not found (scripts/install-deps.sh --test installs clang-14)"
        if os.environ.get(ALLOW_MISSING_COMPILER) == "1":
            if bare:
                print(f"check_thread_safety: {reason}, the analysis skipped ({ALLOW_MISSING_COMPILER}=1); "
                      f"the bare standard locks above fail the check")
                return 1
            print(f"OPCACHE_SKIP: {reason}; the thread-safety analysis did not run "
                  f"({ALLOW_MISSING_COMPILER}=1), only the check for bare standard locks")
            return 0
        print(f"check_thread_safety: {reason}: the thread-safety analysis cannot run. On a machine "
              f"without clang, {ALLOW_MISSING_COMPILER}=1 reports it as skipped instead (never in CI)",
              file=sys.stderr)
        return 1
    if not os.path.exists(os.path.join(options.build_dir, "compile_commands.json")):
        print(f"check_thread_safety: no compile_commands.json in {options.build_dir}", file=sys.stderr)
        return 2

    commands = product_commands(options.build_dir, source_dir)
    if not commands:
        print(f"check_thread_safety: no product source in {options.build_dir}/compile_commands.json "
              f"includes {ANNOTATED_HEADER}", file=sys.stderr)
        return 2
    if options.files:
        wanted = {os.path.realpath(os.path.join(source_dir, path)) for path in options.files}
        commands = {path: command for path, command in commands.items() if path in wanted}
    start = time.monotonic()
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        futures = {pool.submit(check, compiler, directory, arguments): path
                   for path, (directory, arguments) in sorted(commands.items())}
        for future in concurrent.futures.as_completed(futures):
            status, output = future.result()
            if status != 0:
                failed.append(futures[future])
                sys.stdout.write(output)
    elapsed = time.monotonic() - start
    if failed:
        print(f"check_thread_safety: {len(failed)} of {len(commands)} files break the locking rules:")
        for path in sorted(failed):
            print("  " + os.path.relpath(path, source_dir))
        return 1
    if bare:
        return 1
    print(f"check_thread_safety: no bare standard lock outside {WRAPPER}; {len(commands)} files pass "
          f"{' '.join(CHECK_FLAGS[1:])} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
