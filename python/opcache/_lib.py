"""Loads libopcache and declares the C ABI (include/opcache/opcache.h).

Lookup order for the shared library:

1. ``OPCACHE_LIBRARY``: an explicit path. When set, nothing else is tried.
2. Inside the package: ``opcache/_native/libopcache.so.0``, where a wheel
   built by scripts/build-wheel.sh carries it.
3. The build tree next to this package: ``<repo>/build/libopcache.so``, when
   this file lives in ``<repo>/python/opcache/`` of a checkout.
4. The system: ``libopcache.so.0`` by soname through the dynamic linker (the
   Debian package's /usr/lib/<multiarch>/libopcache.so.0, LD_LIBRARY_PATH),
   then ``ctypes.util.find_library("opcache")``.

Only the standard library is used (ctypes); nothing is downloaded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path
from typing import Iterator, Optional

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

# Bits of opcache_scenario_parse's environment_out.
SCENARIO_FROM_ENVIRONMENT = 1
SCENARIO_DETECTED = 2


class BuildReport(ctypes.Structure):
    """struct opcache_build_report: what opcache_get_or_build_report did. ``files``
    points at ``files_size`` bytes: the paths, each NUL-terminated (slice it:
    ``report.files[:report.files_size]``), in memory the library keeps for the
    calling thread until its next opcache_get_or_build_report."""

    _fields_ = [
        ("key", ctypes.c_char * KEY_BUFFER),
        ("source", ctypes.c_int),  # opcache_source
        ("build_ms", ctypes.c_int64),
        ("file_count", ctypes.c_size_t),
        ("files", ctypes.POINTER(ctypes.c_char)),
        ("files_size", ctypes.c_size_t),
        ("note", ctypes.c_char_p),
    ]

# The library's SONAME: the name a wheel carries it under (opcache/_native/)
# and the name the dynamic linker knows an installed one by
# (/usr/lib/<multiarch>/libopcache.so.0 from the Debian package).
SONAME = "libopcache.so.0"

_PACKAGE_DIR = Path(__file__).resolve().parent
_PACKAGED_LIBRARY = _PACKAGE_DIR / "_native" / SONAME
_SOURCE_TREE = _PACKAGE_DIR.parent.parent
_BUILD_TREE_LIBRARY = _SOURCE_TREE / "build" / "libopcache.so"


def _in_source_tree() -> bool:
    """True when this package is <repo>/python/opcache of an opcache checkout
    (not installed), so that <repo>/build is worth a look."""
    return (_SOURCE_TREE / "include" / "opcache" / "opcache.h").is_file()


def _candidates() -> Iterator[tuple[str, Optional[str]]]:
    """(where it was looked for, what to pass to ctypes.CDLL or None when
    nothing was found there), in lookup order. Lazy: find_library, which runs
    ldconfig, is asked only when everything before it failed."""
    explicit = os.environ.get("OPCACHE_LIBRARY")
    if explicit:
        yield "OPCACHE_LIBRARY", explicit
        return
    yield "inside the package", str(_PACKAGED_LIBRARY)
    if _in_source_tree():
        yield "build tree", str(_BUILD_TREE_LIBRARY)
    yield "system, by soname", SONAME
    yield "system, ctypes.util.find_library('opcache')", ctypes.util.find_library("opcache")


def _load() -> tuple[ctypes.CDLL, str]:
    """The first candidate that loads, and what was passed to CDLL for it;
    ImportError listing every candidate and why it failed when none loads."""
    tried: list[str] = []
    for origin, name in _candidates():
        if name is None:
            tried.append(f"{origin}: not found")
        elif os.sep in name and not os.path.exists(name):
            tried.append(f"{name} ({origin}): does not exist")
        else:
            try:
                return ctypes.CDLL(name), name
            except OSError as error:
                tried.append(f"{name} ({origin}): {error}")
    raise ImportError(
        "opcache: cannot load the shared library libopcache.so; tried:\n  "
        + "\n  ".join(tried)
        + "\nInstall the opcache wheel or Debian package, build the library "
        "(cmake --build build --target opcache_shared), or set OPCACHE_LIBRARY "
        "to the path of libopcache.so."
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
        # store, descriptor_json, scenario, out_dir, const char* const* inputs, size_t input_count,
        # build, user_data, char** result_json_out
        "opcache_get_or_build_inputs_json": (
            [
                *get_or_build_args[:4],
                ctypes.POINTER(ctypes.c_char_p),
                ctypes.c_size_t,
                *get_or_build_args[4:],
                ctypes.POINTER(ctypes.c_void_p),
            ],
            status,
        ),
    }
    # const opcache_scenario*: a handle from opcache_scenario_parse.
    c_scenario = ctypes.c_void_p
    table.update({
        # scenario, opcache_scenario** out, unsigned* environment_out
        "opcache_scenario_parse": ([ctypes.c_char_p, ctypes.POINTER(c_scenario), ctypes.POINTER(ctypes.c_uint)], status),
        # char** json_out, freed with opcache_string_free
        "opcache_scenario_json": ([c_scenario, ctypes.POINTER(ctypes.c_void_p)], status),
        "opcache_scenario_free": ([c_scenario], None),
        # store, descriptor_json, scenario handle, out_dir, const char* const* inputs, size_t input_count,
        # build, user_data, opcache_build_report* report_out
        "opcache_get_or_build_report": (
            [
                c_store,
                ctypes.c_char_p,
                c_scenario,
                ctypes.c_char_p,
                ctypes.POINTER(ctypes.c_char_p),
                ctypes.c_size_t,
                BUILD_FN,
                ctypes.c_void_p,
                ctypes.POINTER(BuildReport),
            ],
            status,
        ),
    })
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
    """The name of an opcache_status value ("usage", "corrupt", ...)."""
    return lib.opcache_status_name(code).decode("ascii", "replace")
