"""Loads libopcache and declares the C ABI (include/opcache/opcache.h).

Lookup order for the shared library:

1. ``OPCACHE_LIBRARY``: an explicit path. When set, nothing else is tried.
2. The build tree next to this package: ``<repo>/build/libopcache.so``
   (this file lives in ``<repo>/python/opcache/``).
3. ``ctypes.util.find_library("opcache")`` (an installed library).

Only the standard library is used (ctypes); nothing is downloaded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

# Size of a buffer holding a key and its NUL (OPCACHE_KEY_BUFFER).
KEY_BUFFER = 65

# opcache_status values (stable; equal to the CLI exit codes where both exist).
OK = 0
NOT_FOUND = 1
USAGE = 2
CORRUPT = 3
REMOTE = 4
IO = 5
TIMEOUT = 6
BUILD_FAILED = 7
INTERNAL = 8
UNTRUSTED = 9

# opcache_source values.
SOURCE_HIT = 0
SOURCE_BUILT = 1
SOURCE_BYPASSED = 2

# typedef int (*opcache_build_fn)(const char* work_dir, void* user_data);
BUILD_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)

_PACKAGE_DIR = Path(__file__).resolve().parent
_BUILD_TREE_LIBRARY = _PACKAGE_DIR.parent.parent / "build" / "libopcache.so"


def _candidates() -> list[tuple[str, str]]:
    """(how it was found, what to pass to CDLL), in lookup order."""
    explicit = os.environ.get("OPCACHE_LIBRARY")
    if explicit:
        return [("OPCACHE_LIBRARY", explicit)]
    found = [("build tree", str(_BUILD_TREE_LIBRARY))]
    name = ctypes.util.find_library("opcache")
    if name:
        found.append(("ctypes.util.find_library('opcache')", name))
    return found


def _load() -> tuple[ctypes.CDLL, str]:
    tried = []
    for origin, path in _candidates():
        if origin == "build tree" and not os.path.exists(path):
            tried.append(f"{path} ({origin}): does not exist")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as error:
            tried.append(f"{path} ({origin}): {error}")
    if not os.environ.get("OPCACHE_LIBRARY") and len(tried) == 1:
        tried.append("ctypes.util.find_library('opcache'): not found")
    raise ImportError(
        "opcache: cannot load the shared library libopcache.so; tried:\n  "
        + "\n  ".join(tried)
        + "\nBuild it (cmake --build build --target opcache_shared) or set "
        "OPCACHE_LIBRARY to the path of libopcache.so."
    )


def _declare(lib: ctypes.CDLL) -> None:
    c_store = ctypes.c_void_p  # opcache_store*
    status = ctypes.c_int  # opcache_status
    # store, descriptor_json, scenario, out_dir, build, user_data
    get_or_build_args = [c_store, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, BUILD_FN, ctypes.c_void_p]
    table = {
        "opcache_version": ([], ctypes.c_char_p),
        "opcache_status_name": ([ctypes.c_int], ctypes.c_char_p),
        "opcache_last_error": ([], ctypes.c_char_p),
        "opcache_open": ([ctypes.c_char_p, ctypes.POINTER(c_store)], status),
        "opcache_open_ex": ([ctypes.c_char_p, ctypes.POINTER(c_store)], status),
        "opcache_close": ([c_store], None),
        "opcache_key": ([c_store, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p], status),
        "opcache_put": (
            [
                c_store,
                ctypes.c_char_p,
                ctypes.c_char_p,
                ctypes.POINTER(ctypes.c_char_p),
                ctypes.c_size_t,
                ctypes.c_int64,
                ctypes.c_char_p,
            ],
            status,
        ),
        "opcache_get": ([c_store, ctypes.c_char_p, ctypes.c_char_p], status),
        "opcache_has": ([c_store, ctypes.c_char_p], status),
        "opcache_remove": ([c_store, ctypes.c_char_p], status),
        # The out parameter is a void** so the pointer survives for opcache_string_free.
        "opcache_stats_json": ([c_store, ctypes.POINTER(ctypes.c_void_p)], status),
        "opcache_settings_schema_json": ([ctypes.POINTER(ctypes.c_void_p)], status),
        "opcache_string_free": ([ctypes.c_void_p], None),
        "opcache_get_or_build": ([*get_or_build_args, ctypes.POINTER(ctypes.c_int)], status),  # opcache_source*
        # char** result_json_out, freed with opcache_string_free
        "opcache_get_or_build_json": ([*get_or_build_args, ctypes.POINTER(ctypes.c_void_p)], status),
    }
    for name, (argtypes, restype) in table.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = restype


lib, library_path = _load()
_declare(lib)


def last_error() -> str:
    """The message of the last failure on this thread ("" if none)."""
    return lib.opcache_last_error().decode("utf-8", "replace")


def status_name(code: int) -> str:
    return lib.opcache_status_name(code).decode("ascii", "replace")
