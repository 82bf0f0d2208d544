"""ToolOutput normalisation, output models, and pickling (outputs with pickle, tools with dill, across
a real process boundary)."""

from __future__ import annotations

import base64
import dataclasses
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import dill
import pytest
from pydantic import BaseModel

from toolfork import (
    ContentBlock,
    ObjectProperty,
    PropertyType,
    Tool,
    ToolOutput,
    ToolOutputError,
    ToolProperty,
    tool,
)


class Weather(BaseModel):
    city: str
    temperature: float


@dataclasses.dataclass
class Point:
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "text", "data"),
    [
        ("hello", "hello", None),
        (None, "", None),
        (3, "3", 3),
        (2.5, "2.5", 2.5),
        (True, "true", True),
        ({"a": [1, "é"]}, '{"a": [1, "é"]}', {"a": [1, "é"]}),
        ([1, 2], "[1, 2]", [1, 2]),
        ((1, 2), "[1, 2]", [1, 2]),
        (Weather(city="Oslo", temperature=3), '{"city": "Oslo", "temperature": 3.0}',
         {"city": "Oslo", "temperature": 3.0}),
        (Point(1, 2), '{"x": 1, "y": 2}', {"x": 1, "y": 2}),
        ({"when": Point(0, 0)}, '{"when": {"x": 0, "y": 0}}', {"when": {"x": 0, "y": 0}}),
        ({1, 2} and frozenset(), "frozenset()", None),
    ],
)
def test_from_value_normalises(value: object, text: str, data: object) -> None:
    out = ToolOutput.from_value(value)
    assert out.as_text() == text
    assert out.data == data
    assert not out.is_error


def test_structured_values_always_become_valid_json() -> None:
    import json

    out = ToolOutput.from_value({"raw": b"\xff\x00", "nan": float("nan")})
    parsed = json.loads(out.as_text())  # strict JSON: no NaN, no undecodable bytes
    assert parsed["raw"] == base64.urlsafe_b64encode(b"\xff\x00").decode() and parsed["nan"] is None
    assert out.data == parsed
    # something inside that is not data is refused, naming its type (not sent as "<object at 0x...>")
    with pytest.raises(TypeError, match=r"a dict holding something that is not data \(a object object\)"):
        ToolOutput.from_value({"obj": object()})


def test_from_value_keeps_tool_outputs_and_blocks() -> None:
    out = ToolOutput.text("x")
    assert ToolOutput.from_value(out) is out
    block = ContentBlock(type="image", url="https://e/x.png", media_type="image/png")
    assert ToolOutput.from_value(block).content == [block]


def test_bytes_are_refused_with_a_way_out() -> None:
    with pytest.raises(TypeError, match=r"raw bytes; wrap them in ToolOutput.file"):
        ToolOutput.from_value(b"\x00")


def test_media_shortcuts_and_text_fallback() -> None:
    png = b"\x89PNG" + bytes(100)
    image = ToolOutput.image(png)
    assert image.content[0].data == base64.b64encode(png).decode()
    assert image.as_text() == "[image image/png, 104 bytes]"
    assert ToolOutput.image(url="https://x/y.jpg", media_type="image/jpeg").as_text() == "[image https://x/y.jpg]"
    assert ToolOutput.file(b"%PDF", media_type="application/pdf", name="r.pdf").as_text() == (
        "[file r.pdf application/pdf, 4 bytes]")
    assert ToolOutput.audio(url="https://x/a.wav").content[0].media_type == "audio/wav"
    assert ToolOutput.video(base64.b64encode(b"abc").decode()).as_text() == "[video video/mp4, 3 bytes]"
    combined = ToolOutput.text("see:") + image
    assert combined.as_text() == "see:\n[image image/png, 104 bytes]"
    assert (combined + ToolOutput.error("x")).is_error
    with pytest.raises(ValueError, match="exactly one of data= or url="):
        ToolOutput.image()
    with pytest.raises(ValueError, match="exactly one of data= or url="):
        ToolOutput.image(b"x", url="https://x")
    with pytest.raises(TypeError, match="bytes or a base64 str"):
        ToolOutput.image(123)  # type: ignore[arg-type]


def test_error_shortcut() -> None:
    out = ToolOutput.error("division by zero")
    assert out.is_error and out.as_text() == "division by zero"


def test_dict_round_trip() -> None:
    out = ToolOutput(content=[ContentBlock(type="text", text="a"),
                              ContentBlock(type="file", data="QUJD", media_type="text/csv", name="t.csv")],
                     is_error=True, data={"k": 1})
    d = out.to_dict()
    assert d == {"content": [{"type": "text", "text": "a"},
                             {"type": "file", "data": "QUJD", "media_type": "text/csv", "name": "t.csv"}],
                 "is_error": True, "data": {"k": 1}}
    assert ToolOutput.from_dict(d) == out
    with pytest.raises(ValueError, match="content block type"):
        ToolOutput.from_dict({"content": [{"type": "pdf"}]})


def test_outputs_and_blocks_pickle_with_plain_pickle() -> None:
    out = ToolOutput.text("a") + ToolOutput.image(b"png") + ToolOutput(data={"x": [1]})
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        copy = pickle.loads(pickle.dumps(out, protocol=protocol))
        assert copy == out and copy.content[1].media_type == "image/png"


# -- output models ---------------------------------------------------------------------------------

def test_output_model_validates_and_coerces() -> None:
    @tool(output_model=Weather)
    def weather(city: str) -> dict[str, object]:
        """Weather."""
        return {"city": city, "temperature": "4.5"}

    out = weather.invoke({"city": "Oslo"})
    assert out.data == {"city": "Oslo", "temperature": 4.5}
    assert "Weather" in weather.to_string()


def test_output_model_mismatch_names_the_field() -> None:
    @tool(output_model=Weather)
    def broken(city: str) -> dict[str, object]:
        """Broken."""
        return {"city": city, "temperature": "warm"}

    with pytest.raises(ToolOutputError) as info:
        broken.invoke({"city": "Oslo"})
    assert str(info.value).startswith("Invalid output from tool 'broken': temperature: ")
    assert info.value.errors[0]["loc"] == "temperature"
    copy = pickle.loads(pickle.dumps(info.value))
    assert copy.errors == info.value.errors


def test_output_model_with_tool_outputs() -> None:
    @tool(output_model=Weather)
    def flexible(kind: str) -> ToolOutput:
        """Flexible."""
        if kind == "error":
            return ToolOutput.error("no weather")
        if kind == "data":
            return ToolOutput(content=[ContentBlock(type="text", text="sunny")],
                              data={"city": "x", "temperature": 1})
        return ToolOutput.text("just text")

    assert flexible.invoke({"kind": "error"}).is_error
    assert flexible.invoke({"kind": "data"}).data == {"city": "x", "temperature": 1.0}
    with pytest.raises(ToolOutputError, match="no structured data"):
        flexible.invoke({"kind": "text"})


# -- tools across processes -------------------------------------------------------------------------

def _closure_tool() -> Tool:
    offset = 10

    @tool
    def shifted(x: int) -> int:
        """Shift x."""
        return x + offset

    return shifted


def _tools_to_ship() -> list[tuple[Tool, dict[str, object], str]]:
    raw = Tool.from_json_schema(
        "raw", "Raw.", {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]},
        lambda s: s.upper())
    fluent = (Tool.make("fluent", "Fluent.")
              .add_property(ToolProperty("n", PropertyType.INTEGER, required=True))
              .add_property(ObjectProperty("w", model=Weather))
              .set_callable(lambda n, w=None: f"{n} {w.city if w else '-'}")
              .set_timeout(3))
    return [
        (_closure_tool(), {"x": 1}, "11"),
        (raw, {"s": "ab"}, "AB"),
        (fluent, {"n": 2, "w": {"city": "Rome", "temperature": 1}}, "2 Rome"),
    ]


def test_tools_round_trip_through_dill_in_process() -> None:
    for t, args, expected in _tools_to_ship():
        copy = dill.loads(dill.dumps(t))
        assert copy is not t
        assert copy.invoke(args).as_text() == expected
        assert copy.to_anthropic() == t.to_anthropic()
        assert (copy.timeout, copy.is_visible) == (t.timeout, t.is_visible)


def test_tools_pickled_with_dill_work_in_a_fresh_interpreter() -> None:
    shipped = [(t, args) for t, args, _ in _tools_to_ship()]
    payload = dill.dumps(shipped)
    script = textwrap.dedent("""
        import pickle, sys
        import dill
        tools = dill.loads(sys.stdin.buffer.read())
        outputs = [t.invoke(args) for t, args in tools]
        bad = []
        for t, _ in tools:
            try:
                t.invoke({"nope": 1})
            except Exception as exc:
                bad.append(type(exc).__name__)
        sys.stdout.buffer.write(pickle.dumps((outputs, bad)))
    """)
    # The receiving process can import the module that defined the tools, as a worker could: its directory
    # and the project's, nothing else of this process's sys.path (other tests put their own folders there).
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), str(here.parents[1])])}
    try:
        proc = subprocess.run([sys.executable, "-c", script], input=payload, capture_output=True, timeout=90,
                              env=env, cwd=here)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the receiving interpreter did not answer in 90 s; it printed: {exc.stderr!r}")
    assert proc.returncode == 0, proc.stderr.decode()
    outputs, bad = pickle.loads(proc.stdout)
    assert [o.as_text() for o in outputs] == [expected for _, _, expected in _tools_to_ship()]
    assert bad == ["ToolInputError"] * 3


def test_subclass_tools_pickle_and_rebind_their_call() -> None:
    from toolfork.toolkits.calculator import DivideTool

    t = DivideTool().set_timeout(2)
    for dumps, loads in ((pickle.dumps, pickle.loads), (dill.dumps, dill.loads)):
        copy = loads(dumps(t))
        assert copy.invoke({"a": 1, "b": 4}).data == 0.25
        assert copy.timeout == 2.0
        assert copy._fn.__self__ is copy  # type: ignore[union-attr]
