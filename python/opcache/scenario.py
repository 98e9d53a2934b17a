"""Scenarios and descriptors: conversion of Python values to the C ABI's text."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Optional, Union

from .errors import UsageError


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


ScenarioLike = Union[Scenario, Mapping[str, Any], str]
DescriptorLike = Union[Mapping[str, Any], str, bytes]


def scenario_text(scenario: ScenarioLike) -> bytes:
    """Scenario, dict (JSON form) or CLI spec string ("phase=train,toolchain=...,soc=...")
    as the UTF-8 text the C ABI parses."""
    if type(scenario) is str:  # the common case first: no ABC check per call
        return scenario.encode("utf-8")
    if isinstance(scenario, Scenario):
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
