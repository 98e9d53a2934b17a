"""Checks the opcache wheel's contents (run by tests/package/test_wheel.sh).

Usage: check_wheel.py WHEEL SOURCE_DIR BUILD_DIR VERSION PLATFORM

The wheel must be named opcache-VERSION-py3-none-PLATFORM.whl and hold
exactly the package's .py files (those of SOURCE_DIR/python/opcache), its
py.typed, the library BUILD_DIR/libopcache.so.0 (its real file's bytes) as
opcache/_native/libopcache.so.0, the tracer's preload library beside it when
BUILD_DIR has one, and the dist-info; WHEEL must say
"Root-Is-Purelib: false" and the tag, METADATA the version and
"Requires-Python: >=3.9". Prints each problem and exits 1 when there is one.
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path
from typing import BinaryIO


PRELOAD = "libopcache-trace-preload.so"


def digest(stream: BinaryIO) -> str:
    """SHA-256 of a stream, read in pieces (the library is tens of MB)."""
    sha = hashlib.sha256()
    for piece in iter(lambda: stream.read(1 << 20), b""):
        sha.update(piece)
    return sha.hexdigest()


def expected_names(source_dir: Path, build_dir: Path, version: str) -> set[str]:
    package = source_dir / "python" / "opcache"
    names = {f"opcache/{path.name}" for path in package.glob("*.py")}
    names |= {"opcache/py.typed", "opcache/_native/libopcache.so.0"}
    if (build_dir / PRELOAD).exists():  # the tracer's preload library, x86_64 builds
        names.add(f"opcache/_native/{PRELOAD}")
    dist_info = f"opcache-{version}.dist-info"
    names |= {f"{dist_info}/{name}" for name in ("METADATA", "WHEEL", "top_level.txt", "RECORD")}
    return names


def header_lines(text: str) -> set[str]:
    """The "Key: value" lines before the first blank line (METADATA's body is the README)."""
    return set(text.split("\n\n", 1)[0].splitlines())


def problems(wheel: Path, source_dir: Path, build_dir: Path, version: str, platform: str) -> list[str]:
    found: list[str] = []
    tag = f"py3-none-{platform}"
    if wheel.name != f"opcache-{version}-{tag}.whl":
        found.append(f"wheel file name {wheel.name}, expected opcache-{version}-{tag}.whl")
    dist_info = f"opcache-{version}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        expected = expected_names(source_dir, build_dir, version)
        for name in sorted(expected - names):
            found.append(f"missing from the wheel: {name}")
        for name in sorted(names - expected):
            found.append(f"unexpected in the wheel: {name}")
        if found:
            return found
        wheel_info = header_lines(archive.read(f"{dist_info}/WHEEL").decode("utf-8"))
        for line in ("Root-Is-Purelib: false", f"Tag: {tag}"):
            if line not in wheel_info:
                found.append(f"{dist_info}/WHEEL lacks {line!r}: {sorted(wheel_info)}")
        metadata = header_lines(archive.read(f"{dist_info}/METADATA").decode("utf-8"))
        for line in ("Name: opcache", f"Version: {version}", "Requires-Python: >=3.9"):
            if line not in metadata:
                found.append(f"{dist_info}/METADATA lacks {line!r}")
        library = (build_dir / "libopcache.so.0").resolve()
        with archive.open("opcache/_native/libopcache.so.0") as packed, library.open("rb") as built:
            if digest(packed) != digest(built):
                found.append(f"opcache/_native/libopcache.so.0 differs from {library}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 6:
        print(f"usage: {argv[0]} WHEEL SOURCE_DIR BUILD_DIR VERSION PLATFORM", file=sys.stderr)
        return 2
    wheel, source_dir, build_dir = Path(argv[1]), Path(argv[2]), Path(argv[3])
    found = problems(wheel, source_dir, build_dir, argv[4], argv[5])
    for problem in found:
        print(f"check_wheel: FAILED: {problem}", file=sys.stderr)
    if not found:
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                print(f"check_wheel: {info.file_size:>10}  {info.filename}")
        print(f"check_wheel: {wheel.name} is complete")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
