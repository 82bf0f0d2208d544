"""The data-only codec: what a sandboxed call sends to the host, decoded without running its code.

Why not pickle here: unpickling runs code the sender chose (``__reduce__`` may name ``os.system``, any
importable callable, any class's ``__setstate__``), so a sandboxed call's result, progress or context
that the host unpickled would run that code in the host, outside every restriction. A worker that ran a
sandboxed call (``Limits.sandboxed``) therefore encodes every frame it sends with this codec, and the
host decodes that worker's frames, small and large (memory files included), with this codec only::

    sandboxed worker                                       host
    frame tuple ──encode──> msgpack bytes ──pipe / memfd──> decode ──> frame tuple (plain values)
                  │                                           │
                  └ a value that is not data: TypeError,      ├ anything else (an unknown ext type,
                    naming its type (the call's result          │ a registered class with the wrong
                    becomes an error saying so)                 │ fields): the BAD_FRAME marker
                                                                └ past the call's ceiling (``wire.ceiling``):
                                                                  the ResultTooLarge marker

What is data: None, bool, int (64-bit), float, str, bytes, lists, tuples, dicts with str keys, and the
classes registered here (``ToolOutput``, ``ContentBlock``, ``ErrorInfo``, ``ToolResult``), each sent as
a list headed by a mark (a 3-byte extension value), its name and its fields in order, and rebuilt by
calling the class with them: a class is only ever rebuilt from this registry, never looked up by a name
the sender picks. A tuple is a list headed by the other mark. ``register`` adds a class (toolfork's own
message types). Any other value is made data where it is encoded, by the values rule
(``toolfork.tools.values``: numpy by ``.tolist()``, other numbers, objects by ``str()``), so the wire
carries the converted value, never the object; what that rule refuses is ``NotData``.

Why msgpack: it is a small, well-kept C library whose decoder only makes plain values (extension types
come to ``ext_hook``), it carries bytes as bytes and keeps str apart from bytes, and it is several times
quicker than json plus a tagged form for bytes (measured in bench/dataonly.py). Its decoder stops at
no size of its own, so ``decode`` counts what it rebuilds against a ceiling when one is given.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import msgpack

from toolfork.executor.types import ErrorInfo, ToolResult
from toolfork.executor.wire.ceiling import MB, TooLarge, marker
from toolfork.executor.wire.markers import BAD_FRAME
from toolfork.tools import values
from toolfork.tools.output import ContentBlock, ToolOutput

_size = sys.getsizeof
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
    """msgpack with toolfork's two marks (tuples, registered objects), and room for more:
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
            return [_TUPLE_MARK, *obj]
        known = _BY_TYPE.get(kind)
        if known is not None:
            name, fields = known
            return [_OBJECT_MARK, name, *[getattr(obj, f) for f in fields]]
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
        """An extension type of the codecs that add kinds of their own (the marks are ``_Decoding``'s)."""
        if self.extra_ext is not None:
            return self.extra_ext(code, data, self)
        raise ValueError(f"unknown extension type {code}")

    def decode(self, data: bytes | bytearray | memoryview, ceiling: int | None = None) -> Any:
        """The value ``encode`` made; raises ValueError (or msgpack's errors) for anything else. Never runs
        code of the sender: only plain values and the registered classes' constructors are made. Dict
        keys must be str or bytes (``strict_map_key``). With ``ceiling`` (bytes), what is rebuilt is
        counted as it grows and ``ceiling.TooLarge`` is raised past it (see ``_Decoding``)."""
        return _Decoding(self, ceiling).run(data)


class _Mark:
    """What a tuple's or a registered object's mark decodes to, until its list is rebuilt (``_Decoding``)."""

    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code


_TUPLE_MARK = msgpack.ExtType(_TUPLE, b"")  # a tuple crosses as [mark, *items]
_OBJECT_MARK = msgpack.ExtType(_OBJECT, b"")  # a registered object as [mark, name, *fields]
_MARKS = {_TUPLE: _Mark(_TUPLE), _OBJECT: _Mark(_OBJECT)}
# At most this many bytes rebuilt per byte of data-only input, whatever the input (measured in
# tests/governance/test_data_only.py: an empty dict, one byte, is 64 bytes and a pointer): a frame this
# many times smaller than its ceiling cannot pass it, and is rebuilt without counting.
MAX_GROWTH = 128
# Counting, no list or dict may hold more than ceiling / ITEM_SHARE items: what one container holds is
# counted when it is complete, and its items are then at most about the ceiling again.
ITEM_SHARE = 128


class _Decoding:
    """One decode: the marks turned back into tuples and registered objects (a list whose first item is
    a mark; a mark anywhere else is refused), and with a ceiling, the rebuilt size counted.

    Why marks and not extension types holding the packed items: msgpack hands an extension's payload to
    the hook as a bytes copy, so each level of nesting copied the whole value again (a result is a tuple
    holding a ToolOutput holding blocks: four copies of a large text). A mark is three bytes and copies
    nothing.

    Counting: each list and dict, when complete, adds its own size and its items' (``sys.getsizeof``),
    so a value referenced 12,000 times counts 12,000 times, as the copies it is here; a small int or
    an interned key counts as its own object. ``ITEM_SHARE`` bounds what one container holds before it
    is counted."""

    __slots__ = ("ceiling", "codec", "marks", "used")

    def __init__(self, codec: Codec, ceiling: int | None) -> None:
        self.codec, self.ceiling = codec, ceiling
        self.marks = 0  # marks made and not yet at the head of their list
        self.used = 0

    def run(self, data: bytes | bytearray | memoryview) -> Any:
        ceiling = self.ceiling
        if ceiling is None or len(data) * MAX_GROWTH <= ceiling:
            value = msgpack.unpackb(data, ext_hook=self.ext_hook, list_hook=self.rebuilt, raw=False,
                                    strict_map_key=True, use_list=True)
        else:
            most = max(1, ceiling // ITEM_SHARE)
            try:
                value = msgpack.unpackb(data, ext_hook=self.ext_hook, list_hook=self.counted_list,
                                        object_hook=self.counted_dict, raw=False, strict_map_key=True,
                                        use_list=True, max_array_len=most, max_map_len=most)
            except ValueError as exc:
                if "exceeds max_" not in str(exc):
                    raise
                raise TooLarge(f"a list or dict of more than {most} items", ceiling) from None
        if self.marks:
            raise ValueError("a tuple or object mark out of its place")
        return value

    def ext_hook(self, code: int, data: bytes) -> Any:
        mark = _MARKS.get(code)
        if mark is not None and not data:
            self.marks += 1
            return mark
        if self.ceiling is None:
            return self.codec.ext_hook(code, data)
        self.add(len(data))
        return _Within(self).ext_hook(code, data)  # what its payload rebuilds counts here too

    def rebuilt(self, items: list[Any]) -> Any:
        """A list, or the tuple or registered object its head marks."""
        if not items or type(items[0]) is not _Mark:
            return items
        self.marks -= 1
        code = items[0].code
        if code == _TUPLE:
            del items[0]
            return tuple(items)
        name = items[1] if len(items) > 1 else None
        known = _BY_NAME.get(name) if type(name) is str else None
        if known is None or len(items) - 2 != len(known[1]):
            raise ValueError(f"an object of unknown type {str(name)[:80]!r} or with the wrong fields")
        return known[0](*items[2:])

    def counted_list(self, items: list[Any]) -> Any:
        self.add(_size(items) + sum(map(_size, items)))
        value = self.rebuilt(items)
        if value is not items:
            self.add(_size(value))
        return value

    def counted_dict(self, value: dict[Any, Any]) -> Any:
        self.add(_size(value) + sum(map(_size, value)) + sum(map(_size, value.values())))
        return value

    def add(self, size: int) -> None:
        self.used += size
        if self.ceiling is not None and self.used > self.ceiling:
            raise TooLarge(f"it rebuilds to more than {self.used / MB:.0f} MB (shared references counted "
                           "as copies)", self.ceiling)


class _Within(Codec):
    """The codec an extension's hook decodes its payload with during a counted decode: the payload's
    values count against the same ceiling."""

    __slots__ = ("outer",)

    def __init__(self, outer: _Decoding) -> None:
        super().__init__(outer.codec.extra_default, outer.codec.extra_ext)
        self.outer = outer

    def decode(self, data: bytes | bytearray | memoryview, ceiling: int | None = None) -> Any:
        outer = self.outer
        assert outer.ceiling is not None
        inner = _Decoding(outer.codec, outer.ceiling - outer.used)
        try:
            return inner.run(data)
        finally:
            outer.add(inner.used)


_CODEC = Codec()
encode = _CODEC.encode
decode = _CODEC.decode


def decode_or_marker(data: bytes | bytearray | memoryview, ceiling: int | None = None) -> Any:
    """The worker -> host frame in ``data``, or the marker ``("!", type name, message)`` if the bytes are
    not data or rebuild past ``ceiling`` (bytes; ``wire.ceiling``). Its shape is checked where every
    frame's is, whatever its codec (``wire.frames.decode``)."""
    try:
        return decode(data, ceiling)
    except TooLarge as exc:
        return marker(exc)
    except Exception as exc:
        return (BAD_FRAME, type(exc).__name__, f"a frame from a sandboxed call that is not data: {exc}")


__all__ = ["Codec", "NotData", "decode", "decode_or_marker", "encode", "register"]
