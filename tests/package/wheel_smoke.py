"""Uses an installed opcache wheel (run by tests/package/test_wheel.sh).

Usage: VENV/bin/python -I wheel_smoke.py WORK_DIR

Run with the venv's Python, outside the repository, without OPCACHE_LIBRARY.
Checks that `import opcache` comes from the venv and loaded the library inside
the installed package, that the distribution's version is the library's, and
that get_or_build builds a tiny kernel once and then hits, writing the same
bytes both times. Prints what it loaded and each outcome; exits 1 with the
reason on the first failure.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

import opcache

SCENARIO = "device=single,phase=train,toolchain=8.0.RC2,soc=Ascend910B1"
DESCRIPTOR = {
    "op_type": "Add",
    "inputs": [{"shape": [8], "dtype": "float16", "format": "ND"}] * 2,
    "outputs": [{"shape": [8], "dtype": "float16", "format": "ND"}],
}
KERNEL = {"add_8.o": b"\x7fELF tiny kernel\x00" * 64, "add_8.json": json.dumps({"kernelName": "add_8"}).encode()}


def check(condition: bool, what: str) -> None:
    if not condition:
        print(f"wheel_smoke: FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def check_installed() -> None:
    """opcache is the venv's copy and loaded the library it carries."""
    package = Path(opcache.__file__).resolve().parent
    print(f"wheel_smoke: opcache {opcache.__version__} imported from {package}")
    print(f"wheel_smoke: library loaded: {opcache.library_path}")
    check(package.is_relative_to(Path(sys.prefix).resolve()), f"{package} is not inside the venv {sys.prefix}")
    check(
        Path(opcache.library_path) == package / "_native" / "libopcache.so.0",
        f"loaded {opcache.library_path}, not the library inside the installed package",
    )
    check((package / "py.typed").is_file(), f"{package}/py.typed is not installed")
    distribution = importlib.metadata.version("opcache")
    check(distribution == opcache.version(), f"distribution version {distribution} != library version {opcache.version()}")


def check_get_or_build(work: Path) -> None:
    """First call builds, second hits; both write KERNEL's bytes."""
    builds: list[Path] = []

    def build(work_dir: Path) -> None:
        builds.append(work_dir)
        for name, data in KERNEL.items():
            (work_dir / name).write_bytes(data)

    with opcache.Store(work / "cache", no_remote=True) as store:
        first = store.get_or_build(DESCRIPTOR, SCENARIO, work / "out1", build)
        second = store.get_or_build(DESCRIPTOR, SCENARIO, work / "out2", build)
    for result, source in ((first, "built"), (second, "hit")):
        print(f"wheel_smoke: get_or_build -> {result.source} {result.key} {[path.name for path in result.files]}")
        check(result.source == source, f"expected {source}, got {result.source}")
        check([path.name for path in result.files] == sorted(KERNEL), f"files {result.files}")
        for path in result.files:
            check(path.read_bytes() == KERNEL[path.name], f"{path} does not hold the built bytes")
    check(len(builds) == 1, f"the build ran {len(builds)} times, expected once")
    check(first.key == second.key, f"keys differ: {first.key} {second.key}")


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} WORK_DIR", file=sys.stderr)
        return 2
    check_installed()
    check_get_or_build(Path(sys.argv[1]))
    print("wheel_smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
