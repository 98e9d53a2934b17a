"""The parts of the opcache wheel that pyproject.toml cannot say.

* The version: the CMake project version, which scripts/build-wheel.sh writes
  into VERSION next to this file from the build directory it packages. There
  is no second copy of the number in python/.
* The tag: the wheel carries libopcache.so.0 (opcache/_native/), so it is a
  platform wheel ("py3-none-<platform>", e.g. py3-none-linux_x86_64): any
  Python 3 can load the library through ctypes (no Python ABI involved), but
  only on the platform it was built for.

Build it with scripts/build-wheel.sh, not from python/ directly: that stages
a copy, so nothing is written into the source tree.
"""

from pathlib import Path

from setuptools import Distribution, setup
from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
STAGED = "run scripts/build-wheel.sh BUILD_DIR OUT_DIR, which stages python/ with the library and the version"


def staged_version() -> str:
    """The version build-wheel.sh staged; SystemExit naming the fix when absent."""
    version_file = HERE / "VERSION"
    if not version_file.is_file():
        raise SystemExit(f"opcache wheel: {version_file} is missing; {STAGED}")
    version = version_file.read_text(encoding="ascii").strip()
    if not version:
        raise SystemExit(f"opcache wheel: {version_file} is empty; {STAGED}")
    return version


def check_library() -> None:
    """A wheel without its library would install and then fail at import."""
    library = HERE / "opcache" / "_native" / "libopcache.so.0"
    if not library.is_file():
        raise SystemExit(f"opcache wheel: {library} is missing; {STAGED}")


class NativeDistribution(Distribution):
    """Has a native part, so the wheel's root is platlib (Root-Is-Purelib:
    false) and bdist_wheel names the platform."""

    def has_ext_modules(self) -> bool:
        return True


class platform_wheel(bdist_wheel):
    """Tags the wheel py3-none-<platform>: the library is loaded through
    ctypes, so no Python ABI is involved."""

    def get_tag(self) -> "tuple[str, str, str]":
        _python, _abi, platform = super().get_tag()
        return "py3", "none", platform


check_library()
setup(version=staged_version(), distclass=NativeDistribution, cmdclass={"bdist_wheel": platform_wheel})
