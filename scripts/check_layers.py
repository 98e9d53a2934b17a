#!/usr/bin/env python3
"""Checks every #include of the source tree against the layer rules.

Each source folder has a DEPS file naming what its files may include (as
Chromium's checkdeps does). A folder without a DEPS file takes the rules of
the nearest folder above it that has one. Rules, one a line:

    +PREFIX     allow includes whose path starts with PREFIX
    -PREFIX     forbid them (the longest matching rule wins)
    # comment

PREFIX is written as the include is: `base/`, `store/local_store.hpp`,
`opcache/`; for system and library headers, with the angle bracket:
`-<curl/` forbids libcurl in that folder. A quoted include needs a rule that
allows it; an angle include is allowed unless a rule forbids it. A quoted
include must also name a file that exists (relative to the repository root or
to include/), except the generated opcache/version.hpp.

Usage: check_layers.py [REPO_ROOT]   (default: the repository this script is in)
Exit status: 0 when every include follows the rules, 1 when any does not (each
violation is printed as FILE:LINE: message), 2 on a malformed DEPS file.
"""
import os
import re
import sys

SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".c", ".cc")
# Folders the rules do not cover: tests and benchmarks may include anything
# (docs/architecture.md), the rest holds no C++ of the product.
UNCHECKED = {"tests", "bench", "build", ".git", "docs", "examples", "schemas", "scripts", "python", "cmake", ".ci"}
GENERATED = {"opcache/version.hpp"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


class DepsError(Exception):
    pass


def read_rules(deps_path):
    rules = []
    with open(deps_path, encoding="utf-8") as deps:
        for number, raw in enumerate(deps, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if line[0] not in "+-" or len(line) < 2:
                raise DepsError(f"{deps_path}:{number}: expected '+PREFIX' or '-PREFIX', got {raw.strip()!r}")
            rules.append((line[0] == "+", line[1:]))
    return rules


def rules_for(folder, root, cache):
    """The rules of the nearest DEPS file at or above `folder` (relative path), or None."""
    if folder in cache:
        return cache[folder]
    deps_path = os.path.join(root, folder, "DEPS")
    if os.path.isfile(deps_path):
        found = (os.path.join(folder, "DEPS"), read_rules(deps_path))
    elif folder in ("", "."):
        found = None
    else:
        found = rules_for(os.path.dirname(folder), root, cache)
    cache[folder] = found
    return found


def verdict(rules, written):
    """True/False from the longest rule matching `written`, or None when no rule matches."""
    best = None
    for allowed, prefix in rules:
        if written.startswith(prefix) and (best is None or len(prefix) > len(best[1])):
            best = (allowed, prefix)
    return None if best is None else best[0]


def include_exists(root, path):
    return path in GENERATED or any(
        os.path.isfile(os.path.join(root, base, path)) for base in ("", "include"))


def check_file(root, relative, deps_name, rules):
    problems = []
    allowed_list = ", ".join(prefix for allowed, prefix in rules if allowed and not prefix.startswith("<"))
    with open(os.path.join(root, relative), encoding="utf-8", errors="replace") as source:
        for number, line in enumerate(source, 1):
            match = INCLUDE_RE.match(line)
            if not match:
                continue
            bracket, path = match.groups()
            where = f"{relative}:{number}"
            if bracket == "<":
                if verdict(rules, "<" + path) is False:
                    problems.append(f"{where}: #include <{path}> is forbidden here by {deps_name}")
                continue
            if verdict(rules, path) is not True:
                problems.append(f'{where}: #include "{path}" is not allowed by {deps_name} '
                                f"(allowed: {allowed_list})")
            elif not include_exists(root, path):
                problems.append(f'{where}: #include "{path}" names no file in the repository')
    return problems


def source_files(root):
    for folder, subfolders, files in os.walk(root):
        relative_folder = os.path.relpath(folder, root)
        if relative_folder == ".":
            subfolders[:] = sorted(d for d in subfolders if d not in UNCHECKED and not d.startswith("build"))
            relative_folder = ""
        else:
            subfolders.sort()
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                yield relative_folder, os.path.join(relative_folder, name)


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    cache = {}
    problems = []
    checked = 0
    try:
        for folder, relative in source_files(root):
            found = rules_for(folder, root, cache)
            if found is None:
                problems.append(f"{relative}:1: no DEPS file in {folder or '.'} or above it says what it may include")
                continue
            checked += 1
            problems.extend(check_file(root, relative, *found))
    except DepsError as error:
        print(f"check_layers: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    print(f"check_layers: {checked} files checked, {len(problems)} include(s) break the layer rules")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
