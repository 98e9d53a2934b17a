"""Store: a handle on a local opcache store, over the C ABI."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Union

from . import _lib
from ._lib import lib
from .errors import UsageError, from_status
from .scenario import DescriptorLike, ResolvedScenario, ScenarioLike, descriptor_text, scenario_text

PathLike = Union[str, "os.PathLike[str]"]
BuildFunction = Callable[[Path], Any]



class _CallDepth(threading.local):
    """How many build functions of one Store the current thread is inside (a
    build function may call the Store again), so that close() from inside one
    raises instead of waiting for its own call."""

    depth = 0


# One get_or_build call's pending build: a list, not an object, because one is
# made on every call, hit or not: [build_fn, the exception it raised or None,
# the ms it took, the Store's _CallDepth].
_BUILD_FN, _BUILD_ERROR, _BUILD_MS, _BUILD_DEPTH = range(4)

# The calls in progress, by the token passed to C as user_data (id() of their
# pending list, which the entry keeps alive until the call returns).
_PENDING: dict[int, list[Any]] = {}


def _run_build(work_dir: bytes, user_data: Optional[int]) -> int:
    """The C build callback of every get_or_build: runs the call's build_fn.
    Its exception never unwinds through C: it is kept (BaseException, so
    KeyboardInterrupt and SystemExit too) for the call to re-raise."""
    pending = _PENDING[user_data or 0]
    calls = pending[_BUILD_DEPTH]
    calls.depth += 1
    start = time.monotonic()
    try:
        pending[_BUILD_FN](Path(os.fsdecode(work_dir)))
        return 0
    except BaseException as error:  # must not unwind through C
        pending[_BUILD_ERROR] = error
        return 1
    finally:
        pending[_BUILD_MS] = int((time.monotonic() - start) * 1000)
        calls.depth -= 1


_BUILD_CALLBACK = _lib.BUILD_FN(_run_build)


# The file lists of opcache_get_or_build_report already seen, by their bytes
# (the paths, each NUL-terminated): a kernel hit again in this process reuses
# its (immutable) Paths instead of decoding the paths again. Bounded; oldest
# first out.
_FILE_LISTS: dict[bytes, tuple[Path, ...]] = {}
_FILE_LISTS_KEPT = 1024
# Serialises the evict-and-insert of a miss: another thread inserting between
# iter() and next() on the dict would raise RuntimeError. Lookups need none.
_FILE_LISTS_LOCK = threading.Lock()


def _file_list(packed: bytes) -> tuple[Path, ...]:
    """The Paths of a report's packed file list (each path NUL-terminated, in
    the report's order: sorted by file name)."""
    paths = _FILE_LISTS.get(packed)
    if paths is None:
        paths = tuple(Path(os.fsdecode(path)) for path in packed.split(b"\0")[:-1])
        with _FILE_LISTS_LOCK:
            if len(_FILE_LISTS) >= _FILE_LISTS_KEPT:
                _FILE_LISTS.pop(next(iter(_FILE_LISTS)), None)
            _FILE_LISTS[packed] = paths
    return paths


# Scenarios resolved once, by their text (the str given, or scenario_text's
# bytes): only those the text alone decides (ResolvedScenario.from_environment
# False), so no entry can go stale when the environment changes. Bounded: once
# full, other texts are resolved on each call. Entries are never freed while
# a call uses them (the call holds a reference).
_RESOLVED: dict[Union[str, bytes], ResolvedScenario] = {}
_RESOLVED_KEPT = 256

# opcache_source values -> Result.source.
_SOURCE_NAMES = ("hit", "built", "bypassed")


def _resolved_scenario(scenario: ScenarioLike) -> ResolvedScenario:
    """scenario resolved: itself when it is a ResolvedScenario, else the kept
    resolution of its text, else a new one (kept when the text decides it)."""
    if type(scenario) is str:  # the common case first: no conversion, no ABC check
        text: Union[str, bytes] = scenario
    elif isinstance(scenario, ResolvedScenario):
        return scenario
    else:
        text = scenario_text(scenario)
    resolved = _RESOLVED.get(text)
    if resolved is None:
        resolved = ResolvedScenario(text)
        if not resolved.from_environment and len(_RESOLVED) < _RESOLVED_KEPT:
            _RESOLVED[text] = resolved
    return resolved


@dataclasses.dataclass(frozen=True)
class Result:
    """The outcome of get_or_build.

    ``source`` is "hit" (read from the cache, possibly after waiting for
    another process that built it), "built" (built by this call and stored) or
    "bypassed" (built by this call without the cache: mode "disable" or debug
    bypass). ``files`` are the kernel's files in ``out_dir``, sorted by name —
    exactly the files of this kernel, not whatever else out_dir holds.
    ``build_ms`` is the time build_fn took (0 on a hit).
    """

    key: str
    source: str
    files: list[Path]
    out_dir: Path
    build_ms: int = 0

    @property
    def hit(self) -> bool:
        return self.source == "hit"


_new_object = object.__new__
_set_attribute = object.__setattr__
_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


def _result(key: str, source: str, files: list[Path], out_dir: Path, build_ms: int) -> Result:
    """Result(key=..., ...) without the frozen dataclass's __init__, which sets
    each field through object.__setattr__ (a quarter of the Python wrapper's
    own cost on a hit): the same object, its fields written to its __dict__."""
    result: Result = _new_object(Result)
    _set_attribute(result, "__dict__", {"key": key, "source": source, "files": files, "out_dir": out_dir,
                                        "build_ms": build_ms})
    return result


def _check(code: int) -> None:
    if code != _lib.OK:
        raise from_status(code)


def _settings_table() -> list[dict[str, Any]]:
    """The settings table of the loaded library (opcache_settings_schema_json)."""
    text = ctypes.c_void_p()
    _check(lib.opcache_settings_schema_json(ctypes.byref(text)))
    try:
        return json.loads(ctypes.string_at(text.value).decode("utf-8"))
    finally:
        lib.opcache_string_free(text)


# name -> row, for the settings Store() takes as keyword arguments.
SETTINGS: dict[str, dict[str, Any]] = {row["name"]: row for row in _settings_table() if row["settable"]}


def _option_value(name: str, value: Any) -> Any:
    """A keyword argument in the JSON form opcache_open_ex takes for its setting."""
    kind = SETTINGS[name]["type"]
    if kind == "path":
        return os.path.abspath(os.fspath(value))
    if kind == "comma_list" and not isinstance(value, str):
        return ",".join(value)
    if kind == "repeated":
        return [value] if isinstance(value, str) else list(value)
    return value


def _options_of(cache_dir: Optional[PathLike], settings: dict[str, Any]) -> dict[str, Any]:
    """opcache_open_ex's JSON options; TypeError for a keyword that is no setting."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise TypeError(
            f"Store() got an unexpected keyword argument {unknown[0]!r} (settings: {', '.join(SETTINGS)})"
        )
    given = dict(settings, cache_dir=cache_dir)
    return {name: _option_value(name, value) for name, value in given.items() if value is not None}


class Store:
    """An open opcache store (a cache directory shared by threads and processes).

    ``Store()`` opens the default root (OPCACHE_DIR, else $XDG_CACHE_HOME/opcache,
    else ~/.cache/opcache); keyword arguments override the environment and the
    config file, exactly like opcache_open_ex's JSON options. They are the
    settable rows of the library's settings table (``opcache.SETTINGS``, the
    same table the CLI flags and ``opcache config`` come from), e.g.:

    * ``mode``: "enable" (default), "force" (rebuild entries older than this
      Store and replace them) or "disable" (get_or_build builds without the cache);
    * ``op_debug_level``: non-zero bypasses the cache in get_or_build (CANN);
    * ``op_debug_list``: op types (a list or "A,B") that bypass the cache;
    * ``volatile_fields``: descriptor fields dropped before hashing ("none",
      "+a,b" adds to the built-in list, "a,b" replaces it; a list is joined);
    * ``wait_timeout_s``, ``min_idle_s``, ``config_file``, ``compression_level``,
      ``remotes`` (a list of URLs), ``no_remote``, ``token_file``,
      ``shared_group`` (a bool: a team shares the cache directory).

    Paths are made absolute; ``None`` leaves a setting unset. An unknown
    keyword raises TypeError.

    Raises UsageError for bad settings, CacheIOError when the root cannot be
    created. Use as a context manager (``with Store(...) as store:``) or call
    close(); a Store that is garbage-collected is closed.

    Thread safety: one Store may be used from several threads at once (the C
    handle is thread-safe and ctypes releases the GIL during each call);
    close() waits for calls running in other threads. Processes: open one
    Store per process; a Store passed to another process (pickled, e.g. to a
    multiprocessing pool) is reopened there with the same options.
    """

    def __init__(self, cache_dir: Optional[PathLike] = None, **settings: Any) -> None:
        self._handle: Optional[ctypes.c_void_p] = None
        # The calls in progress, by a token of each: registered and removed
        # without a lock (dict operations are atomic under the GIL; see
        # _acquire); close() waits on _idle until none is left.
        self._calls: dict[object, None] = {}
        self._idle = threading.Condition()
        self._closing = False
        self._local = _CallDepth()
        self._options = _options_of(cache_dir, settings)
        handle = ctypes.c_void_p()
        _check(lib.opcache_open_ex(json.dumps(self._options).encode("utf-8"), ctypes.byref(handle)))
        self._handle = handle

    # -- lifetime -----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._handle is None

    @property
    def options(self) -> dict[str, Any]:
        """The options this Store was opened with (unset ones left out)."""
        return dict(self._options)

    def close(self) -> None:
        """Closes the handle; waits for calls running in other threads. Idempotent."""
        with self._idle:
            if self._handle is None:
                return
            if self._local.depth:
                raise UsageError("cannot close an opcache Store from inside one of its own calls (e.g. a build function)")
            self._closing = True
            while self._calls:
                self._idle.wait()
            handle, self._handle = self._handle, None
        lib.opcache_close(handle)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __reduce__(self) -> tuple[Callable[[dict[str, Any]], "Store"], tuple[dict[str, Any]]]:
        """Pickles as its options: unpickling reopens the store (see _reopen)."""
        return (_reopen, (self._options,))

    def __repr__(self) -> str:
        where = self._options.get("cache_dir", "<default root>")
        return f"<opcache.Store {where} {'closed' if self.closed else 'open'}>"

    def _acquire(self, token: object) -> ctypes.c_void_p:
        """The handle, the call `token` (any object unique among the calls in
        progress) counted as in use until _release(token). UsageError when the
        Store is closed or closing."""
        # Registered first, checked after: close() sets _closing first and looks
        # at the calls after, so either it waits for this call or this call sees
        # it closing. No lock per call.
        self._calls[token] = None
        handle = self._handle
        if handle is None or self._closing:
            self._release(token)
            raise UsageError("the opcache Store is closed")
        return handle

    def _release(self, token: object) -> None:
        """Ends what _acquire(token) began; wakes a waiting close()."""
        del self._calls[token]
        if self._closing:
            with self._idle:
                self._idle.notify_all()

    @contextlib.contextmanager
    def _using(self) -> Iterator[ctypes.c_void_p]:
        """The handle, kept open for the duration of the block."""
        token = object()
        handle = self._acquire(token)
        try:
            yield handle
        finally:
            self._release(token)

    # -- operations ---------------------------------------------------------

    def key(self, descriptor: DescriptorLike, scenario: ScenarioLike) -> str:
        """The cache key (64 lowercase hex) of descriptor in scenario; the same
        as `opcache key`. Pure: touches no files. UsageError for a bad descriptor
        (must be a JSON object with "op_type") or scenario (names the field)."""
        buffer = ctypes.create_string_buffer(_lib.KEY_BUFFER)
        desc, scen = descriptor_text(descriptor), scenario_text(scenario)
        with self._using() as handle:
            _check(lib.opcache_key(handle, desc, scen, buffer))
        return buffer.value.decode("ascii")

    def put(
        self,
        descriptor: DescriptorLike,
        scenario: ScenarioLike,
        files: Union[PathLike, Iterable[PathLike]],
        build_ms: int = 0,
    ) -> str:
        """Stores files (members keep their base names) as the kernel of
        descriptor + scenario and returns its key. An existing entry is kept.
        NotFoundError when a file is missing."""
        if isinstance(files, (str, bytes, os.PathLike)):
            files = [files]
        encoded = [os.fsencode(path) for path in files]
        array = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
        buffer = ctypes.create_string_buffer(_lib.KEY_BUFFER)
        desc, scen = descriptor_text(descriptor), scenario_text(scenario)
        with self._using() as handle:
            _check(lib.opcache_put(handle, desc, scen, array, len(encoded), int(build_ms), buffer))
        return buffer.value.decode("ascii")

    def get(self, key: str, out_dir: PathLike) -> bool:
        """Writes the members of key into out_dir (created if needed), each
        verified; False on a miss (a corrupt entry is dropped, warned about on
        stderr, and a miss)."""
        with self._using() as handle:
            code = lib.opcache_get(handle, key.encode("ascii", "replace"), os.fsencode(out_dir))
        if code == _lib.NOT_FOUND:
            return False
        _check(code)
        return True

    def has(self, key: str) -> bool:
        """True when key has an entry."""
        with self._using() as handle:
            code = lib.opcache_has(handle, key.encode("ascii", "replace"))
        if code == _lib.NOT_FOUND:
            return False
        _check(code)
        return True

    def remove(self, key: str) -> bool:
        """Removes key's entry; False when there was none."""
        with self._using() as handle:
            code = lib.opcache_remove(handle, key.encode("ascii", "replace"))
        if code == _lib.NOT_FOUND:
            return False
        _check(code)
        return True

    def stats(self) -> dict[str, Any]:
        """{"entries", "bundle_bytes", "raw_bytes", "pinned", "counters": {...}}."""
        text = ctypes.c_void_p()
        with self._using() as handle:
            _check(lib.opcache_stats_json(handle, ctypes.byref(text)))
        try:
            return json.loads(ctypes.string_at(text.value).decode("utf-8"))
        finally:
            lib.opcache_string_free(text)

    def get_or_build(
        self,
        descriptor: DescriptorLike,
        scenario: ScenarioLike,
        out_dir: PathLike,
        build_fn: BuildFunction,
        inputs: Union[None, PathLike, Iterable[PathLike]] = None,
    ) -> Result:
        """The transparent path: on a hit writes the kernel's files into
        out_dir; on a miss calls ``build_fn(work_dir)`` once across every
        process sharing the store (the others wait, then read its result),
        stores what it wrote and moves the files into out_dir.

        ``inputs`` declares the files and directories build_fn reads that the
        descriptor does not describe (headers, a directory of templates), as
        str or os.PathLike items (or one path): their content enters the key
        as ``opcache exec --input``'s does (a file's SHA-256, a directory's
        files; a path keyed as given, below the base_dir setting as
        "{base}/..."), so an edited declared file, or a file added, removed or
        changed below a declared directory, is a miss, and unchanged inputs a
        hit. ``Result.key`` is then the key with the inputs. A missing input,
        one that is neither a file nor a directory, or a descriptor with a
        member "declared_inputs" (reserved for this) raises UsageError before
        build_fn runs. None or empty: the key is the descriptor's and the
        scenario's alone.

        build_fn receives a pathlib.Path to an empty directory on out_dir's file
        system, writes the kernel's flat regular files there, and returns
        (its return value is ignored) or raises.

        If build_fn raises, nothing is stored, processes waiting for this build
        get BuildFailedError, and *this* call re-raises build_fn's own exception
        object (its traceback still points into build_fn; a note names the key).
        The exception never crosses the C boundary: the ctypes callback catches
        it (BaseException, so KeyboardInterrupt and SystemExit too) and returns
        non-zero. Other failures raise OpcacheError subclasses: BuildFailedError
        (another process's build failed, or build_fn wrote no files),
        CacheTimeoutError, UsageError, CacheIOError.
        """
        # The common cases inline (a hit's wrapper is a third of the binding's
        # cost over the C++ call): descriptor text, a scenario string resolved before.
        desc = descriptor.encode("utf-8") if type(descriptor) is str else descriptor_text(descriptor)
        resolved = _RESOLVED.get(scenario) if type(scenario) is str else None
        if resolved is None:
            resolved = _resolved_scenario(scenario)
        out_bytes = os.fspath(out_dir).encode(_FS_ENCODING, _FS_ERRORS)  # os.fsencode, without its frame
        declared = None if inputs is None else _declared_inputs(inputs)
        # The build runs through the one module-level callback, which finds its
        # pending list by the user_data pointer (no ctypes thunk per call).
        pending = [build_fn, None, 0, self._local]
        token = id(pending)
        report = _lib.BuildReport()
        # opcache_get_or_build_report writes the files into out_dir itself and
        # names them (and the key), without JSON: no staging directory, no
        # key() call. A plain acquire/release, not `with self._using()`: the
        # generator-based context manager costs 4 µs a call.
        handle = self._acquire(token)
        _PENDING[token] = pending
        try:
            code = lib.opcache_get_or_build_report(
                handle, desc, resolved._handle, out_bytes, declared, 0 if declared is None else len(declared),
                _BUILD_CALLBACK, token, report,
            )
        finally:
            del _PENDING[token]
            self._release(token)
        if pending[_BUILD_ERROR] is not None:
            error, pending[_BUILD_ERROR] = pending[_BUILD_ERROR], None
            if hasattr(error, "add_note"):
                error.add_note(self._failure_note(desc, resolved, declared))
            try:
                raise error
            finally:
                del error
        if code:
            raise from_status(code)
        source = _SOURCE_NAMES[report.source]
        packed = report.files[: report.files_size]
        files = _FILE_LISTS.get(packed) or _file_list(packed)
        out = out_dir if isinstance(out_dir, Path) else Path(os.fsdecode(out_bytes))
        return _result(report.key.decode("ascii"), source, list(files), out, 0 if source == "hit" else pending[_BUILD_MS])

    def _failure_note(
        self, desc: bytes, scen: ResolvedScenario, declared: Optional[ctypes.Array[ctypes.c_char_p]]
    ) -> str:
        """The note a failed build's exception gets: the key it was for, or
        (with declared inputs, whose key only the failed call computed) how
        many inputs were declared."""
        if declared is None:
            return f"opcache: the build of {self.key(desc, scen)} failed; nothing was stored"
        return f"opcache: the build with {len(declared)} declared input(s) failed; nothing was stored"

    def cached(
        self,
        scenario: Union[ScenarioLike, Callable[[Any], ScenarioLike]],
        out_dir: Union[PathLike, Callable[[Any], PathLike]],
    ) -> Callable[[Callable[..., Any]], Callable[..., Result]]:
        """A decorator for an op compiler ``compile(descriptor, work_dir, *args, **kwargs)``.

        The decorated function takes ``(descriptor, *args, **kwargs)`` and
        returns a Result: it runs get_or_build(descriptor, scenario, out_dir,
        ...) and calls the original function only on a miss. ``scenario`` and
        ``out_dir`` may be values or callables of the descriptor. Extra
        arguments are passed through to the compiler but are NOT part of the
        key: everything that changes the kernel belongs in the descriptor or
        the scenario. The wrapper has ``.key(descriptor)``, ``.store()`` (the
        Store it uses) and ``.uncached`` (the original function).
        """
        return _cached(lambda: self, scenario, out_dir)


def _declared_inputs(
    inputs: Union[None, PathLike, Iterable[PathLike]]
) -> Optional[ctypes.Array[ctypes.c_char_p]]:
    """get_or_build's declared inputs as the C array of
    opcache_get_or_build_report, paths as given; None when there are none.
    TypeError for an item that is not a str or os.PathLike."""
    if inputs is None:
        return None
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    encoded = []
    for item in inputs:
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"get_or_build inputs must be str or os.PathLike paths, not {type(item).__name__}")
        encoded.append(os.fsencode(item))
    if not encoded:
        return None
    return (ctypes.c_char_p * len(encoded))(*encoded)


def _reopen(options: dict[str, Any]) -> Store:
    return Store(options.get("cache_dir"), **{k: v for k, v in options.items() if k != "cache_dir"})


def _cached(
    store_of: Callable[[], Store],
    scenario: Union[ScenarioLike, Callable[[Any], ScenarioLike]],
    out_dir: Union[PathLike, Callable[[Any], PathLike]],
) -> Callable[[Callable[..., Any]], Callable[..., Result]]:
    def resolve(value: Any, descriptor: Any) -> Any:
        return value(descriptor) if callable(value) else value

    def decorate(compile_fn: Callable[..., Any]) -> Callable[..., Result]:
        @functools.wraps(compile_fn)
        def wrapper(descriptor: DescriptorLike, *args: Any, **kwargs: Any) -> Result:
            return store_of().get_or_build(
                descriptor,
                resolve(scenario, descriptor),
                resolve(out_dir, descriptor),
                lambda work_dir: compile_fn(descriptor, work_dir, *args, **kwargs),
            )

        def key(descriptor: DescriptorLike) -> str:
            return store_of().key(descriptor, resolve(scenario, descriptor))

        wrapper.key = key  # type: ignore[attr-defined]
        wrapper.uncached = compile_fn  # type: ignore[attr-defined]
        wrapper.store = store_of  # type: ignore[attr-defined]
        return wrapper

    return decorate


_default_lock = threading.Lock()
_default: Optional[tuple[int, Store]] = None


def default_store() -> Store:
    """A process-wide Store on the default root (OPCACHE_DIR, ...), opened on
    first use and reopened in a forked child (an SQLite handle must not be used
    across fork)."""
    global _default
    with _default_lock:
        if _default is None or _default[0] != os.getpid() or _default[1].closed:
            _default = (os.getpid(), Store())
        return _default[1]


def get_or_build(
    descriptor: DescriptorLike,
    scenario: ScenarioLike,
    out_dir: PathLike,
    build_fn: BuildFunction,
    inputs: Union[None, PathLike, Iterable[PathLike]] = None,
) -> Result:
    """Store.get_or_build on default_store()."""
    return default_store().get_or_build(descriptor, scenario, out_dir, build_fn, inputs)


def cached(
    scenario: Union[ScenarioLike, Callable[[Any], ScenarioLike]],
    out_dir: Union[PathLike, Callable[[Any], PathLike]],
    store: Optional[Store] = None,
) -> Callable[[Callable[..., Any]], Callable[..., Result]]:
    """Like Store.cached; without ``store`` it uses default_store(), opened at
    the first call (so decorating at import time opens nothing)."""
    if store is not None:
        return store.cached(scenario, out_dir)
    return _cached(default_store, scenario, out_dir)
