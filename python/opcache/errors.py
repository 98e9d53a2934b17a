"""Exceptions: one per opcache_status, all subclasses of OpcacheError."""

from __future__ import annotations

from typing import Optional

from . import _lib


class OpcacheError(Exception):
    """A failed opcache call.

    ``status`` is the status name ("usage", "corrupt", ...), ``code`` the
    opcache_status value, and ``str(error)`` the library's message
    (opcache_last_error()), which names the file, key or field at fault.
    """

    status = "internal"
    code = _lib.INTERNAL

    def __init__(self, message: str, *, code: Optional[int] = None, status: Optional[str] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class NotFoundError(OpcacheError):
    """A missing file or entry where one was required (a plain miss is not an error)."""

    status, code = "not_found", _lib.NOT_FOUND


class UsageError(OpcacheError):
    """A bad argument, JSON, descriptor, scenario or setting (status "usage")."""

    status, code = "usage", _lib.USAGE


class IntegrityError(OpcacheError):
    """Stored data failed verification (status "corrupt")."""

    status, code = "corrupt", _lib.CORRUPT


class RemoteError(OpcacheError):
    """A remote cache failed (status "remote")."""

    status, code = "remote", _lib.REMOTE


class CacheIOError(OpcacheError):
    """The local file system or index failed (status "io")."""

    status, code = "io", _lib.IO


class CacheTimeoutError(OpcacheError):
    """Waiting for another process building the same key ran out of time (status "timeout")."""

    status, code = "timeout", _lib.TIMEOUT


class BuildFailedError(OpcacheError):
    """A build failed: in another process this one waited for, or the build
    wrote nothing / something that is not a regular file (status "build_failed").

    When the build function of *this* call raises, get_or_build re-raises that
    exception itself instead (see Store.get_or_build).
    """

    status, code = "build_failed", _lib.BUILD_FAILED


class InternalError(OpcacheError):
    """A bug in opcache (status "internal")."""

    status, code = "internal", _lib.INTERNAL


class UntrustedError(OpcacheError):
    """The signature requirement refused an entry: unsigned, signed by no
    trusted key, or a bad signature (status "untrusted"; docs/security.md)."""

    status, code = "untrusted", _lib.UNTRUSTED


_BY_CODE = {
    cls.code: cls
    for cls in (
        NotFoundError,
        UsageError,
        IntegrityError,
        RemoteError,
        CacheIOError,
        CacheTimeoutError,
        BuildFailedError,
        UntrustedError,
        InternalError,
    )
}


def from_status(code: int, message: Optional[str] = None) -> OpcacheError:
    """The exception for a non-OK status; message defaults to opcache_last_error()."""
    if message is None:
        message = _lib.last_error() or f"opcache failed with status {_lib.status_name(code)}"
    cls = _BY_CODE.get(code, OpcacheError)
    return cls(message, code=code, status=_lib.status_name(code))
