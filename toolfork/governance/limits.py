"""`Limits`: what one tool call may use, as one frozen, validated value.

Why a value of its own: the same limits are declared on a tool, given as an Executor's default, typed
on the command line and used to group workers, and each of those must see the same checks and the same
meaning. So construction validates everything (a bad setting fails where it is written, naming it),
`merged_over` is the one rule for "a tool's own fields win", `restriction_key` is the one rule for which
fields a worker process cannot shed after a call (and so must be grouped by), and `parse` is the one
reading of the CLI form. Nothing here applies a limit; `rlimits` and `sandbox` do.

Every field left at None is "not limited". Budgets are on top of what the worker holds when the call
starts (see `toolfork.governance.rlimits`): `memory_mb` (MiB), `cpu_s` (seconds of CPU), `open_files`,
`processes`; `file_size_mb` is the largest file the call may write. `network=False` means no network
at all; `read_paths` / `write_paths` are absolute paths the call may read / write under. Any of those,
or `sandbox=True`, runs the call in the sandbox (`sandboxed`), which shows it only a minimal
environment plus the host variables named in `env`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Enforce = Literal["strict", "best-effort"]

# The largest value of each numeric field: what the worker can hand the kernel and its timer. A budget
# in MiB becomes a resource limit in bytes on top of what the worker holds (a signed 64-bit number in
# setrlimit: 2**42 MiB = 2**62 bytes leaves room for the worker's own), descriptors and tasks are counted
# in a C int by the kernel, and the CPU budget arms a profiling timer whose interval Python takes in
# signed 64-bit nanoseconds (about 9.2e9 s: 1e9 s, some 31 years, leaves room for the CPU already used).
MAX_MB = 2**42
MAX_COUNT = 2**31 - 1
MAX_CPU_S = 10**9
_BOUNDS: dict[str, tuple[int, str]] = {
    "memory_mb": (MAX_MB, "MiB: the largest budget a resource limit in bytes can hold"),
    "file_size_mb": (MAX_MB, "MiB: the largest size a resource limit in bytes can hold"),
    "open_files": (MAX_COUNT, "descriptors: the kernel counts them in a C int"),
    "processes": (MAX_COUNT, "tasks: the kernel counts them in a C int"),
    "cpu_s": (MAX_CPU_S, "seconds: the longest CPU budget the worker's profiling timer can be armed with"),
}


class LimitsError(ValueError):
    """A Limits setting is invalid; the message names the setting and the value given."""


def _name_list(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (Sequence, set, frozenset)):
        raise LimitsError(f"Limits: env={value!r}: give a list of environment variable names")
    for item in value:
        if not isinstance(item, str) or not item or "=" in item or "\0" in item:
            raise LimitsError(f"Limits: env has {item!r}, which is not an environment variable name")
    return tuple(sorted(set(value)))


def _path_list(setting: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        raise LimitsError(f"Limits: {setting}={value!r}: give a list of paths, not one string")
    if not isinstance(value, Sequence) and not isinstance(value, (set, frozenset)):
        raise LimitsError(f"Limits: {setting}={value!r}: give a list of absolute paths")
    out: list[str] = []
    for item in value:
        if not isinstance(item, (str, os.PathLike)):
            raise LimitsError(f"Limits: {setting} has {item!r}, which is not a path")
        text = os.fspath(item)
        if not isinstance(text, str) or not text or "\0" in text:
            raise LimitsError(f"Limits: {setting} has {item!r}, which is not a usable path")
        if not os.path.isabs(text):
            raise LimitsError(f"Limits: {setting} has {text!r}, which is not an absolute path")
        out.append(os.path.normpath(text))
    return tuple(sorted(set(out)))


class Limits(BaseModel):
    """What one call may use; None = not limited. Frozen, hashable, validated at construction."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    memory_mb: int | None = Field(default=None, gt=0)
    cpu_s: float | None = Field(default=None, gt=0)
    file_size_mb: int | None = Field(default=None, gt=0)
    open_files: int | None = Field(default=None, gt=0)
    processes: int | None = Field(default=None, gt=0)
    network: bool | None = None
    read_paths: tuple[str, ...] | None = None
    write_paths: tuple[str, ...] | None = None
    # True: run in the sandbox even when nothing above asks for it (see `sandboxed`).
    sandbox: bool | None = None
    # Names of the host's environment variables a sandboxed call sees (besides a fixed minimal set).
    env: tuple[str, ...] | None = None
    # None: not said here (a default's setting applies; "strict" when nobody says).
    enforce: Enforce | None = None

    def __init__(self, **data: Any) -> None:
        for setting in ("read_paths", "write_paths"):
            if setting in data:
                data[setting] = _path_list(setting, data[setting])
        if "env" in data:
            data["env"] = _name_list(data["env"])
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise LimitsError(_describe(exc)) from None

    @field_validator("cpu_s")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return value

    @field_validator("memory_mb", "file_size_mb", "open_files", "processes", "cpu_s")
    @classmethod
    def _bounded(cls, value: float | None, info: Any) -> float | None:
        if value is not None:
            bound, why = _BOUNDS[info.field_name]
            if value > bound:
                raise ValueError(f"must be at most {bound} {why}")
        return value

    @property
    def strict(self) -> bool:
        """True unless enforce="best-effort": a limit that cannot be enforced must refuse the start."""
        return self.enforce != "best-effort"

    @property
    def sandboxed(self) -> bool:
        """Whether a call under these limits runs in the sandbox (a process of its own, see
        `toolfork.governance.sandbox`): asked for with sandbox=True, network=False, read_paths or
        write_paths. Such a call is never run anywhere else."""
        return (self.sandbox is True or self.network is False or self.read_paths is not None
                or self.write_paths is not None)

    @property
    def restriction_key(self) -> tuple[bool | None, tuple[str, ...] | None, tuple[str, ...] | None,
                                       tuple[str, ...] | None] | None:
        """The part of these limits a sandbox is made of, or None when the call is not sandboxed.

        Two calls may share a process only if their keys are equal: a key is hashable, and `network=True`
        (allowed, the same as not restricted) gives the same key as leaving network unset.
        """
        if not self.sandboxed:
            return None
        network = False if self.network is False else None
        return (network, self.read_paths, self.write_paths, self.env)

    def set_fields(self) -> dict[str, Any]:
        """The fields given a value (not None)."""
        return {name: getattr(self, name) for name in type(self).model_fields if getattr(self, name) is not None}

    def merged_over(self, default: Limits | None) -> Limits:
        """These limits over a default: every field set here wins, the default fills the rest."""
        if default is None:
            return self
        return Limits(**{**default.set_fields(), **self.set_fields()})

    @classmethod
    def parse(cls, text: str, *, setting: str = "--limits") -> Limits:
        """Read the CLI form: ``memory_mb=256,cpu_s=2,network=off,read_paths=/data:/srv``.

        Paths are separated by ``:`` (as in PATH); network takes on/off/true/false/yes/no/1/0.
        """
        data: dict[str, Any] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, sep, raw = (s.strip() for s in part.partition("="))
            if not sep or not raw:
                raise LimitsError(f"{setting}: {part!r} is not NAME=VALUE")
            if name not in cls.model_fields:
                known = ", ".join(cls.model_fields)
                raise LimitsError(f"{setting}: unknown limit {name!r} (known: {known})")
            if name in data:
                raise LimitsError(f"{setting}: {name} is given twice")
            data[name] = _parse_value(setting, name, raw)
        try:
            return cls(**data)
        except LimitsError as exc:
            raise LimitsError(f"{setting}: {exc}") from None


_BOOLS = {"on": True, "true": True, "yes": True, "1": True, "off": False, "false": False, "no": False, "0": False}


def _parse_value(setting: str, name: str, raw: str) -> Any:
    if name in ("network", "sandbox"):
        if raw.lower() not in _BOOLS:
            raise LimitsError(f"{setting}: {name}={raw!r}: say on or off")
        return _BOOLS[raw.lower()]
    if name in ("read_paths", "write_paths"):
        return [p for p in raw.split(":") if p]
    if name == "env":
        return [n for n in raw.split(":") if n]
    if name == "enforce":
        return raw
    try:
        number = float(raw) if name == "cpu_s" else int(raw)
    except ValueError:
        kind = "a number" if name == "cpu_s" else "a whole number"
        raise LimitsError(f"{setting}: {name}={raw!r} is not {kind}") from None
    return number


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "?"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown setting {loc}={err['input']!r} (known: {', '.join(Limits.model_fields)})")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            parts.append(f"{loc}={err['input']!r}: {msg}")
    return "Limits: " + "; ".join(parts)
