"""Tests of the package's shape (standard library only): where it finds
libopcache (opcache/_lib.py), its type hints (PEP 561), and setup.py, which
the wheel is built with (scripts/build-wheel.sh; the wheel itself is tested
by tests/package/test_wheel.sh).

Run with the system Python: python/tests/run_tests.sh <build dir>.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import typing
import unittest
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python" / "opcache"
sys.path.insert(0, str(REPO / "python"))

import opcache  # noqa: E402
import opcache._lib  # noqa: E402
import opcache.errors  # noqa: E402
import opcache.scenario  # noqa: E402
import opcache.store  # noqa: E402

BUILT_LIBRARY = Path(os.environ.get("OPCACHE_LIBRARY", str(REPO / "build" / "libopcache.so"))).resolve()
IMPORT_AND_REPORT = "import sys; sys.path.insert(0, sys.argv[1]); import opcache; print(opcache.library_path)"


class LibraryLookupTest(unittest.TestCase):
    """The lookup order of _lib.py, each case on a copy of the package laid
    out as a checkout (<tree>/python/opcache next to <tree>/build) or as an
    installed package (<tree>/site/opcache), imported in a child process
    without OPCACHE_LIBRARY."""

    def setUp(self) -> None:
        if not BUILT_LIBRARY.is_file():
            self.skipTest(f"{BUILT_LIBRARY} not built (target opcache_shared)")
        temporary = tempfile.TemporaryDirectory(prefix="opcache-py-lookup-")
        self.addCleanup(temporary.cleanup)
        self.tree = Path(temporary.name).resolve()

    def copy_package(self, parent: Path) -> Path:
        """The package's sources (no _native/) copied into parent/opcache."""
        package = parent / "opcache"
        package.mkdir(parents=True)
        for source in [*PACKAGE.glob("*.py"), PACKAGE / "py.typed"]:
            shutil.copy2(source, package)
        return package

    def checkout(self) -> Path:
        """<tree>/python/opcache of a checkout with <tree>/build/libopcache.so."""
        (self.tree / "include" / "opcache").mkdir(parents=True)
        (self.tree / "include" / "opcache" / "opcache.h").write_text("/* marks an opcache checkout */\n")
        (self.tree / "build").mkdir()
        (self.tree / "build" / "libopcache.so").symlink_to(BUILT_LIBRARY)
        return self.copy_package(self.tree / "python")

    def import_opcache(self, package: Path, ld_library_path: Optional[Path] = None) -> subprocess.CompletedProcess[str]:
        env = {name: value for name, value in os.environ.items() if name not in ("OPCACHE_LIBRARY", "LD_LIBRARY_PATH")}
        if ld_library_path is not None:
            env["LD_LIBRARY_PATH"] = str(ld_library_path)
        return subprocess.run(
            [sys.executable, "-c", IMPORT_AND_REPORT, str(package.parent)],
            env=env, cwd=str(self.tree), capture_output=True, text=True, timeout=60,
        )

    def loaded(self, package: Path, ld_library_path: Optional[Path] = None) -> str:
        completed = self.import_opcache(package, ld_library_path)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        return completed.stdout.strip()

    def test_library_inside_the_package_comes_before_the_build_tree(self) -> None:
        package = self.checkout()
        (package / "_native").mkdir()
        (package / "_native" / "libopcache.so.0").symlink_to(BUILT_LIBRARY)
        self.assertEqual(self.loaded(package), str(package / "_native" / "libopcache.so.0"))

    def test_build_tree_when_the_package_carries_no_library(self) -> None:
        package = self.checkout()
        self.assertEqual(self.loaded(package), str(self.tree / "build" / "libopcache.so"))

    def test_installed_package_finds_the_system_library_by_soname(self) -> None:
        # Only the SONAME, no libopcache.so development link: what a runtime
        # package installs, and what find_library alone does not find here.
        libraries = self.tree / "lib"
        libraries.mkdir()
        (libraries / "libopcache.so.0").symlink_to(BUILT_LIBRARY)
        package = self.copy_package(self.tree / "site")
        self.assertEqual(self.loaded(package, ld_library_path=libraries), "libopcache.so.0")

    def test_nothing_found_lists_every_place_tried(self) -> None:
        package = self.copy_package(self.tree / "site")
        completed = self.import_opcache(package)
        if completed.returncode == 0:
            self.skipTest(f"this system has a libopcache installed ({completed.stdout.strip()})")
        self.assertIn("ImportError", completed.stderr)
        self.assertIn(f"{package}/_native/libopcache.so.0 (inside the package): does not exist", completed.stderr)
        self.assertIn("libopcache.so.0 (system, by soname): libopcache.so.0: cannot open shared object file", completed.stderr)
        self.assertIn("system, ctypes.util.find_library('opcache'): not found", completed.stderr)
        self.assertNotIn("build tree", completed.stderr)  # an installed package is no checkout


def public_callables(module: Any) -> Iterator[tuple[str, Callable[..., Any], bool]]:
    """(qualified name, function, whether its first parameter is self/cls) of
    each public function and class method defined in module."""
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(value):
            yield f"{module.__name__}.{name}", value, False
        elif inspect.isclass(value):
            yield from class_callables(module, value)


def class_callables(module: Any, cls: type) -> Iterator[tuple[str, Callable[..., Any], bool]]:
    for name, member in vars(cls).items():
        if name.startswith("_") and name not in ("__init__", "__enter__", "__exit__", "__reduce__"):
            continue
        function = member.fget if isinstance(member, property) else member
        if isinstance(function, (staticmethod, classmethod)):
            yield f"{module.__name__}.{cls.__name__}.{name}", function.__func__, isinstance(function, classmethod)
        elif inspect.isfunction(function):
            yield f"{module.__name__}.{cls.__name__}.{name}", function, True


def missing_hints(function: Callable[..., Any], bound: bool) -> list[str]:
    """The parameters (and "return") of function without a type hint."""
    hints = typing.get_type_hints(function)
    parameters = list(inspect.signature(function).parameters)[1 if bound else 0:]
    return [name for name in [*parameters, "return"] if name not in hints]


class TypingTest(unittest.TestCase):
    def test_the_package_is_marked_typed(self) -> None:
        self.assertTrue((PACKAGE / "py.typed").is_file(), "PEP 561 marker python/opcache/py.typed")

    def test_every_public_function_and_method_is_fully_annotated(self) -> None:
        checked = 0
        for module in (opcache, opcache._lib, opcache.errors, opcache.scenario, opcache.store):
            for name, function, bound in public_callables(module):
                with self.subTest(function=name):
                    self.assertEqual(missing_hints(function, bound), [], f"{name} lacks type hints")
                checked += 1
        self.assertGreater(checked, 30)  # the walk reached the API, not an empty module list


@unittest.skipUnless(
    importlib.util.find_spec("setuptools") and importlib.util.find_spec("wheel"),
    "setup.py needs setuptools and wheel (Debian's python3-setuptools, python3-wheel)",
)
class SetupTest(unittest.TestCase):
    """python/setup.py in a staged copy of python/, as build-wheel.sh makes one."""

    def setUp(self) -> None:
        temporary = tempfile.TemporaryDirectory(prefix="opcache-py-setup-")
        self.addCleanup(temporary.cleanup)
        self.stage = Path(temporary.name)
        for name in ("setup.py", "pyproject.toml", "README.md"):
            shutil.copy2(REPO / "python" / name, self.stage)
        (self.stage / "opcache" / "_native").mkdir(parents=True)
        shutil.copy2(PACKAGE / "__init__.py", self.stage / "opcache")

    def setup_version(self) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        return subprocess.run(
            [sys.executable, "setup.py", "--version"],
            cwd=str(self.stage), env=env, capture_output=True, text=True, timeout=120,
        )

    def test_version_is_the_staged_one(self) -> None:
        (self.stage / "VERSION").write_text("7.8.9\n")
        (self.stage / "opcache" / "_native" / "libopcache.so.0").write_bytes(b"\x7fELF")
        completed = self.setup_version()
        self.assertEqual(completed.returncode, 0, completed.stderr)
        self.assertEqual(completed.stdout.strip().splitlines()[-1], "7.8.9")

    def test_without_a_staged_version_it_refuses(self) -> None:
        (self.stage / "opcache" / "_native" / "libopcache.so.0").write_bytes(b"\x7fELF")
        completed = self.setup_version()
        self.assertNotEqual(completed.returncode, 0)
        self.assertIn(f"{self.stage / 'VERSION'} is missing; run scripts/build-wheel.sh", completed.stderr)

    def test_without_the_library_it_refuses(self) -> None:
        (self.stage / "VERSION").write_text("7.8.9\n")
        completed = self.setup_version()
        self.assertNotEqual(completed.returncode, 0)
        library = self.stage / "opcache" / "_native" / "libopcache.so.0"
        self.assertIn(f"{library} is missing; run scripts/build-wheel.sh", completed.stderr)


if __name__ == "__main__":
    unittest.main()
