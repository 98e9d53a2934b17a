"""opcache — Python binding (ctypes over the C ABI in include/opcache/opcache.h).

A compile cache for accelerator operator kernels. For a Python op compiler
(TBE/AKG style) the one call is ``get_or_build``::

    import opcache

    scenario = "phase=train,toolchain=8.0.RC2,soc=Ascend910B1"
    with opcache.Store() as store:
        result = store.get_or_build(descriptor, scenario, "kernel_meta",
                                    lambda work_dir: compile_op(descriptor, work_dir))
        print(result.source, result.files)   # "hit" | "built" | "bypassed"

Only the standard library is used. The shared library is found through
OPCACHE_LIBRARY, else inside the package (opcache/_native/libopcache.so.0, as
a wheel carries it), else <repo>/build/libopcache.so (a checkout), else the
system's libopcache.so.0 (by soname, then ctypes.util.find_library); importing
raises ImportError listing what was tried when none loads. The public API is
typed (PEP 561: py.typed). See python/README.md.
"""

from ._lib import lib as _clib, library_path
from .errors import (
    BuildFailedError,
    CacheIOError,
    CacheTimeoutError,
    IntegrityError,
    InternalError,
    UntrustedError,
    NotFoundError,
    OpcacheError,
    RemoteError,
    UsageError,
)
from .scenario import ResolvedScenario, Scenario
from .store import SETTINGS, Result, Store, cached, default_store, get_or_build


def version() -> str:
    """The version of the loaded libopcache ("MAJOR.MINOR.PATCH")."""
    return _clib.opcache_version().decode("ascii")


__version__ = version()

__all__ = [
    "BuildFailedError",
    "CacheIOError",
    "CacheTimeoutError",
    "IntegrityError",
    "InternalError",
    "UntrustedError",
    "NotFoundError",
    "OpcacheError",
    "RemoteError",
    "ResolvedScenario",
    "Result",
    "SETTINGS",
    "Scenario",
    "Store",
    "UsageError",
    "cached",
    "default_store",
    "get_or_build",
    "library_path",
    "version",
]
