#!/usr/bin/env python3
"""The locking rules, checked by the compiler.

Compiles every product source of a build (its compile_commands.json; not
tests/, bench/ or generated files) that includes base/mutex.hpp, directly or
through other headers, with clang++-14 -fsyntax-only
-Wthread-safety -Werror=thread-safety: a GUARDED_BY member touched without
its mutex, a REQUIRES function called without it, a lock not released on
every path... fails (base/thread_annotations.hpp, base/mutex.hpp,
docs/architecture.md "Locking"). Only the thread-safety diagnostics are
turned on: the gcc build owns the other warnings. (All 134 product sources
take about 4 minutes of one core; those that lock through base/mutex.hpp are
the ones the analysis has something to check in.)

    scripts/check_thread_safety.py BUILD_DIR [--jobs N] [--compiler CLANG] [FILE...]

FILE... (paths relative to the source root) checks only those, while editing.

Exit status 0 when every file passes, 1 when one does not (its diagnostics
are printed), 2 on a usage error. Without the compiler it prints
"OPCACHE_SKIP: <reason>" and exits 0, which CTest (architecture.thread_safety)
reports as skipped.
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
# gcc's warning flags are dropped: this pass reports thread safety only.
DROPPED_FLAGS = ("-Wall", "-Wextra", "-Wpedantic")
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
    parser.add_argument("files", nargs="*")
    options = parser.parse_intermixed_args()
    source_dir = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))

    compiler = shutil.which(options.compiler)
    if compiler is None:
        print(f"OPCACHE_SKIP: {options.compiler} not found (scripts/install-deps.sh installs clang-14)")
        return 0
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
    print(f"check_thread_safety: {len(commands)} files pass {' '.join(CHECK_FLAGS[1:])} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
