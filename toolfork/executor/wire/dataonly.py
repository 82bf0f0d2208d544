"""The data-only codec: what a sandboxed call sends to the host, decoded without running its code.

Why not pickle here: unpickling runs code the sender chose (``__reduce__`` may name ``os.system``, any
importable callable, any class's ``__setstate__``), so a sandboxed call's result, progress or context
that the host unpickled would run that code in the host, outside every restriction. A worker that ran a
sandboxed call (``Limits.sandboxed``) therefore encodes every frame it sends with this codec, and the
host decodes that worker's frames, small and large (memory files included), with this codec only::

    sandboxed worker                                       host
    frame tuple ──encode──> msgpack bytes ──pipe / memfd──> decode ──> frame tuple (plain values)
                  │                                           │
                  └ a value that is not data: TypeError,      └ anything else (an unknown ext type,
                    naming its type (the call's result          a registered class with the wrong
                    becomes an error saying so)                 fields): the BAD_FRAME marker

What is data: None, bool, int (64-bit), float, str, bytes, lists, tuples, dicts with str keys, and the
classes registered here (``ToolOutput``, ``ContentBlock``, ``ErrorInfo``, ``ToolResult``), each sent as
its name and its fields in order and rebuilt by calling the class with them: a class is only ever
rebuilt from this registry, never looked up by a name the sender picks. ``register`` adds a class
(toolfork's own message types). Any other value is made data where it is encoded, by the values rule
(``toolfork.tools.values``: numpy by ``.tolist()``, other numbers, objects by ``str()``), so the wire
carries the converted value, never the object; what that rule refuses is ``NotData``.

Why msgpack: it is a small, well-kept C library whose decoder only makes plain values (extension types
come to ``ext_hook``, which knows two codes), it carries bytes as bytes and keeps str apart from bytes,
and it is several times quicker than json plus a tagged form for bytes (measured in bench/dataonly.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import msgpack

from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.executor.wire.markers import BAD_FRAME
from toolfork.tools import values
from toolfork.tools.output import ContentBlock, ToolOutput

_TUPLE = 1
_OBJECT = 2  # codes from 16 up are left to the codecs that add kinds of their own (``Codec``'s hooks)


class NotData(TypeError):
    """A value a sandboxed call tried to send that is not data (names its type)."""


_BY_TYPE: dict[type, tuple[str, tuple[str, ...]]] = {}
_BY_NAME: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {}


def register(cls: type, name: str | None = None, fields: tuple[str, ...] | None = None) -> None:
    """Let instances of ``cls`` (a trusted toolfork class) cross: sent as ``name`` and the values of
    ``fields`` (default: its dataclass fields, in order), rebuilt as ``cls(*values)``."""
    if fields is None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"register {cls.__name__}: give its fields (it is not a dataclass)")
        fields = tuple(f.name for f in dataclasses.fields(cls))
    key = name or f"{cls.__module__}.{cls.__qualname__}"
    _BY_TYPE[cls] = (key, fields)
    _BY_NAME[key] = (cls, fields)


for _cls in (ContentBlock, ToolOutput, ErrorInfo, ToolResult):
    register(_cls, _cls.__name__)


class Codec:
    """msgpack with toolfork's two extension types (tuples, registered objects), and room for more:
    ``extra_default(obj)`` returns an ``ExtType`` for a value of its kind (else None), ``extra_ext(code,
    data, codec)`` rebuilds one (raising ValueError for what it does not accept). The hooks reach nested
    values too."""

    __slots__ = ("extra_default", "extra_ext")

    def __init__(self, extra_default: Callable[[Any, Codec], Any] | None = None,
                 extra_ext: Callable[[int, bytes, Codec], Any] | None = None) -> None:
        self.extra_default, self.extra_ext = extra_default, extra_ext

    def default(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is tuple:
            return msgpack.ExtType(_TUPLE, self.pack(list(obj)))
        known = _BY_TYPE.get(kind)
        if known is not None:
            name, fields = known
            return msgpack.ExtType(_OBJECT, self.pack([name, [getattr(obj, f) for f in fields]]))
        if kind is bytearray or kind is memoryview:
            return bytes(obj)
        if self.extra_default is not None:
            out = self.extra_default(obj, self)
            if out is not None:
                return out
        try:  # the values rule (numpy by .tolist(), other numbers, objects by str()), here in the sandbox
            converted = values.as_data(obj, "a sandboxed call sent")
        except values.NotData as exc:
            raise NotData(f"{exc} (a sandboxed call may send None, bool, int, float, str, bytes, lists, tuples, "
                          "dicts with str keys and toolfork's own output types)") from None
        if type(converted) is kind:  # nothing changed (a subclass of a plain type the rule keeps)
            raise NotData(f"a value of type {kind.__module__}.{kind.__qualname__} is not data")
        return converted

    def pack(self, obj: Any) -> bytes:
        return msgpack.packb(obj, default=self.default, strict_types=True, use_bin_type=True)

    def encode(self, obj: Any) -> bytes:
        """``obj`` as data-only bytes; raises ``NotData`` (a TypeError naming the type) for anything else,
        and for ints past 64 bits."""
        try:
            return self.pack(obj)
        except (OverflowError, ValueError) as exc:
            raise NotData(f"a value that is not data: {exc}") from None

    def ext_hook(self, code: int, data: bytes) -> Any:
        if code == _TUPLE:
            return tuple(self.decode(data))
        if code == _OBJECT:
            name, values = self.decode(data)
            known = _BY_NAME.get(name) if type(name) is str else None
            if known is None or type(values) is not list or len(values) != len(known[1]):
                raise ValueError(f"an object of unknown type {str(name)[:80]!r} or with the wrong fields")
            return known[0](*values)
        if self.extra_ext is not None:
            return self.extra_ext(code, data, self)
        raise ValueError(f"unknown extension type {code}")

    def decode(self, data: bytes | bytearray | memoryview) -> Any:
        """The value ``encode`` made; raises ValueError (or msgpack's errors) for anything else. Never runs
        code of the sender: only plain values and the registered classes' constructors are made. Dict
        keys must be str or bytes (``strict_map_key``)."""
        return msgpack.unpackb(data, ext_hook=self.ext_hook, raw=False, strict_map_key=True, use_list=True)


_CODEC = Codec()
encode = _CODEC.encode
decode = _CODEC.decode


def decode_or_marker(data: bytes | bytearray | memoryview) -> Any:
    """The worker -> host frame in ``data``, or the marker ``("!", type name, message)`` if the bytes are
    not data. Its shape is checked where every frame's is, whatever its codec (``wire.frames.decode``)."""
    try:
        return decode(data)
    except Exception as exc:
        return (BAD_FRAME, type(exc).__name__, f"a frame from a sandboxed call that is not data: {exc}")


__all__ = ["Codec", "NotData", "decode", "decode_or_marker", "encode", "register"]
