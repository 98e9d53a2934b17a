"""Scenarios and descriptors: conversion of Python values to the C ABI's text."""

from __future__ import annotations

import ctypes
import dataclasses
import json
from typing import Any, Mapping, Optional, Union

from . import _lib
from .errors import UsageError, from_status


@dataclasses.dataclass
class Scenario:
    """The scenario a kernel is compiled for (docs/formats.md).

    ``device_mode`` is "single" or "multi"; None lets opcache decide from the
    environment (RANK_SIZE or LOCAL_WORLD_SIZE > 1 means "multi"). ``phase`` is
    "train" or "infer"; ``toolchain`` (e.g. the CANN version) and ``soc`` (e.g.
    "Ascend910B1") are detected when None or "auto" (from the CANN install
    and npu-smi; docs/formats.md "Detected scenario fields"). ``extra`` is a free-form str -> str map (debug
    options, framework version, ...). Validation happens in the library: a bad
    value raises UsageError naming the field.
    """

    phase: Optional[str] = None
    toolchain: Optional[str] = None
    soc: Optional[str] = None
    device_mode: Optional[str] = None
    extra: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The scenario as a JSON object; unset fields and an empty extra are left out."""
        value: dict[str, Any] = {}
        for name in ("device_mode", "phase", "toolchain", "soc"):
            field = getattr(self, name)
            if field is not None:
                value[name] = field
        if self.extra:
            value["extra"] = dict(self.extra)
        return value

    def to_json(self) -> str:
        """The JSON form accepted by opcache_key & co. (not canonical; opcache canonicalizes)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)


class ResolvedScenario:
    """A scenario parsed and resolved once (opcache_scenario_parse), for many calls.

    ``ResolvedScenario(scenario)`` takes whatever a scenario argument takes (a
    spec string, a dict, a Scenario) and resolves it now: a toolchain or soc
    omitted or "auto" is detected, an omitted device_mode taken from
    RANK_SIZE / LOCAL_WORLD_SIZE, from the environment of this moment — later
    changes of the environment (a CANN upgrade) do not change it; create a new
    one to see them. Pass it as the scenario of get_or_build (which then parses
    nothing per call), key, put and ``cached``. UsageError for a bad scenario,
    as those calls raise.

    get_or_build keeps such a resolution itself, by the scenario's text, for
    scenarios that the text alone decides (``from_environment`` False: device,
    phase, toolchain and soc all given); scenarios that read the environment
    are resolved again on each call unless the caller passes one of these.

    Immutable; may be shared by threads and Stores; its C handle is freed when
    it is garbage-collected.
    """

    __slots__ = ("_handle", "_environment", "_json")

    def __init__(self, scenario: "ScenarioLike") -> None:
        self._handle: Optional[ctypes.c_void_p] = None
        handle = ctypes.c_void_p()
        environment = ctypes.c_uint()
        code = _lib.lib.opcache_scenario_parse(scenario_text(scenario), ctypes.byref(handle), ctypes.byref(environment))
        if code != _lib.OK:
            raise from_status(code)
        self._handle = handle
        self._environment = environment.value
        text = ctypes.c_void_p()
        code = _lib.lib.opcache_scenario_json(handle, ctypes.byref(text))
        if code != _lib.OK:
            raise from_status(code)
        try:
            self._json: str = ctypes.string_at(text.value).decode("utf-8")
        finally:
            _lib.lib.opcache_string_free(text)

    @property
    def from_environment(self) -> bool:
        """True when the resolution read the environment: a device_mode from
        RANK_SIZE / LOCAL_WORLD_SIZE, or a detected toolchain or soc."""
        return self._environment != 0

    def to_json(self) -> str:
        """The resolved scenario's canonical JSON (the bytes hashed into keys),
        every field explicit: parsing it again gives this scenario in any
        environment."""
        return self._json

    def to_dict(self) -> dict[str, Any]:
        """The resolved scenario as a JSON object."""
        value: dict[str, Any] = json.loads(self._json)
        return value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ResolvedScenario):
            return NotImplemented
        return self._json == other._json

    def __hash__(self) -> int:
        return hash(self._json)

    def __repr__(self) -> str:
        return f"<opcache.ResolvedScenario {self._json}>"

    def __reduce__(self) -> tuple[type, tuple[str]]:
        """Pickles as its resolved JSON (another process gets the same scenario)."""
        return (ResolvedScenario, (self._json,))

    def __del__(self) -> None:
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None:
            try:
                _lib.lib.opcache_scenario_free(handle)
            except Exception:  # interpreter shutdown: the library may be gone
                pass


ScenarioLike = Union[Scenario, ResolvedScenario, Mapping[str, Any], str]
DescriptorLike = Union[Mapping[str, Any], str, bytes]


def scenario_text(scenario: ScenarioLike) -> bytes:
    """Scenario, ResolvedScenario (its resolved JSON), dict (JSON form) or CLI spec
    string ("phase=train,toolchain=...,soc=...") as the UTF-8 text the C ABI parses."""
    if type(scenario) is str:  # the common case first: no ABC check per call
        return scenario.encode("utf-8")
    if isinstance(scenario, Scenario):
        return scenario.to_json().encode("utf-8")
    if isinstance(scenario, ResolvedScenario):
        return scenario.to_json().encode("utf-8")
    if isinstance(scenario, Mapping):
        try:
            return json.dumps(dict(scenario), ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as error:
            raise UsageError(f"scenario is not JSON-serializable: {error}") from error
    if isinstance(scenario, str):
        return scenario.encode("utf-8")
    if isinstance(scenario, (bytes, bytearray)):
        return bytes(scenario)
    raise TypeError(
        "scenario must be an opcache.Scenario, a dict or a spec string like "
        f"'phase=train,toolchain=8.0.RC2,soc=Ascend910B1', not {type(scenario).__name__}"
    )


def descriptor_text(descriptor: DescriptorLike) -> bytes:
    """A descriptor (dict, serialized with json.dumps, or JSON text) as UTF-8 bytes."""
    if type(descriptor) is str:  # the common case first: no ABC check per call
        return descriptor.encode("utf-8")
    if isinstance(descriptor, Mapping):
        try:
            return json.dumps(dict(descriptor), ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as error:
            raise UsageError(f"descriptor is not JSON-serializable: {error}") from error
    if isinstance(descriptor, str):
        return descriptor.encode("utf-8")
    if isinstance(descriptor, (bytes, bytearray)):
        return bytes(descriptor)
    raise TypeError(
        f"descriptor must be a dict or a JSON string with \"op_type\", not {type(descriptor).__name__}"
    )
