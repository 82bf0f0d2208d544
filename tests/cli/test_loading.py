"""Loading what the user names on the command line, and reading call lines in every accepted shape."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, child_env
from toolfork.commands._loading import (
    BadLine,
    UsageError,
    default_tools_file,
    import_module,
    load_all_tools,
    load_hook,
    load_toolkit,
    load_tools_spec,
    parse_call,
    split_spec,
)
from toolfork.commands._output import RUN_FIELDS
from toolfork.executor import ToolCall
from toolfork.tools import Toolkit, collect_tools

# ------------------------------------------------------------------------------------------ specs


def test_split_spec() -> None:
    assert split_spec("examples/tools.py:TOOLS") == ("examples/tools.py", "TOOLS")
    assert split_spec("examples.tools") == ("examples.tools", None)
    with pytest.raises(UsageError, match="module:attribute"):
        split_spec("examples.tools:")


@pytest.mark.parametrize("spec", ["examples/tools.py:TOOLS", "examples.tools:TOOLS", "examples/tools.py",
                                  "examples.tools"])
def test_example_tools_load_by_path_or_module_relative_to_cwd(spec: str) -> None:
    names = set(collect_tools(load_tools_spec(spec)))
    assert names == {"add", "multiply", "fetch_page", "count_primes", "crawl"}


def test_file_outside_the_package_tree_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my tools").mkdir()
    (tmp_path / "my tools" / "mine.py").write_text(
        "from toolfork import tool\n"
        "@tool\ndef shout(text: str) -> str:\n    '''Upper-case.\n\n    Args:\n        text: input\n    '''\n"
        "    return text.upper()\n"
        "def plain(a: int) -> int:\n    '''Double.\n\n    Args:\n        a: n\n    '''\n    return 2 * a\n")
    monkeypatch.chdir(tmp_path)
    single = collect_tools(load_tools_spec("my tools/mine.py:shout"))
    assert list(single) == ["shout"]
    assert single["shout"].invoke({"text": "hi"}).as_text() == "HI"
    # A plain function becomes a tool; without :ATTR and without TOOLS, the module's Tool objects count.
    assert list(collect_tools(load_tools_spec("my tools/mine.py:plain"))) == ["plain"]
    assert list(collect_tools(load_tools_spec("my tools/mine.py"))) == ["shout"]


def test_dotted_module_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "cwdpkg_for_toolfork_test"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kit.py").write_text(
        "from toolfork import Toolkit, tool\n"
        "@tool\ndef ping() -> str:\n    '''Answer pong.'''\n    return 'pong'\n"
        "class Kit(Toolkit):\n    def provide(self):\n        return [ping]\n"
        "KIT = Kit()\n")
    monkeypatch.chdir(tmp_path)
    items = load_tools_spec("cwdpkg_for_toolfork_test.kit:KIT")
    assert isinstance(items[0], Toolkit)
    assert list(collect_tools(items)) == ["ping"]


@pytest.mark.parametrize(("spec", "message"), [
    ("nowhere/tools.py:TOOLS", r"'nowhere/tools.py': no such file"),
    ("no_such_module_xyz:TOOLS", r"'no_such_module_xyz': no such module"),
    ("tests/cli/cli_tools.py:MISSING", r"has no attribute 'MISSING'"),
    ("tests/cli/cli_tools.py:NOT_A_TOOL", r"cannot use 'nope' as a tool"),
])
def test_bad_tools_specs_name_the_problem(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_tools_spec(spec)


def test_module_that_fails_to_import_is_a_usage_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import os\nraise RuntimeError('config missing')\n")
    with pytest.raises(UsageError, match=r"failed to import:\nTraceback[^\0]*broken.py\", line 2[^\0]*"
                                         r"RuntimeError: config missing"):
        load_tools_spec(f"{broken}:TOOLS")
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(UsageError, match="no TOOLS list and no Tool or Toolkit"):
        load_tools_spec(str(empty))


def test_two_specs_with_one_tool_name_are_refused() -> None:
    with pytest.raises(UsageError, match="multiply"):
        load_all_tools(["examples/tools.py:multiply"], ["calculator"])


def test_hooks() -> None:
    hook = load_hook("tests.cli.cli_tools:count_before", "--before-child")
    assert callable(hook) and hook.__name__ == "count_before"
    with pytest.raises(UsageError, match=r"--after-child .*int object is not callable"):
        load_hook("tests/cli/cli_tools.py:NOT_CALLABLE", "--after-child")
    with pytest.raises(UsageError, match="expected module:function"):
        load_hook("tests.cli.cli_tools", "--before-child")


def test_toolkits_by_name() -> None:
    kit = load_toolkit("calculator")
    assert isinstance(kit, Toolkit)
    assert "divide" in collect_tools([kit])
    with pytest.raises(UsageError, match=r"unknown toolkit 'abacus'; the built-in toolkits are: .*calculator"):
        load_toolkit("abacus")


def test_default_tools_file_is_the_tools_py_beside_the_calls(tmp_path: Path) -> None:
    assert default_tools_file("examples/calls.jsonl") == Path("examples/tools.py")
    assert default_tools_file(str(tmp_path / "calls.jsonl")) is None
    assert default_tools_file("-") is None


# ------------------------------------------------------------------------------------------ call lines


def _ok(obj: object, lineno: int = 1) -> ToolCall:
    call = parse_call(json.dumps(obj).encode(), lineno)
    assert isinstance(call, ToolCall), call
    return call


def _bad(raw: str | bytes | object, lineno: int = 7) -> BadLine:
    data = raw if isinstance(raw, (str, bytes)) else json.dumps(raw)
    bad = parse_call(data, lineno)
    assert isinstance(bad, BadLine), bad
    return bad


def test_plain_shape() -> None:
    call = _ok({"id": "a", "name": "add", "arguments": {"a": 1, "b": 2}, "timeout": 2.5})
    assert (call.id, call.name, call.arguments, call.timeout) == ("a", "add", {"a": 1, "b": 2}, 2.5)
    assert _ok({"id": 17, "name": "ping"}).id == "17"  # integer ids and absent arguments are fine
    assert _ok({"name": "ping", "arguments": {}}, lineno=12).id == "line-12"


def test_openai_shapes() -> None:
    chat = _ok({"id": "call_1", "type": "function",
                "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}})
    assert (chat.id, chat.name, chat.arguments) == ("call_1", "add", {"a": 1, "b": 2})
    empty = {"id": "call_2", "type": "function", "function": {"name": "ping", "arguments": ""}}
    assert _ok(empty).arguments == {}
    responses = _ok({"type": "function_call", "id": "fc_9", "call_id": "call_3", "name": "add",
                     "arguments": "{\"a\": 3}"})
    assert (responses.id, responses.arguments) == ("call_3", {"a": 3})


def test_anthropic_shape() -> None:
    call = _ok({"type": "tool_use", "id": "toolu_1", "name": "multiply", "input": {"a": 6, "b": 7}})
    assert (call.id, call.name, call.arguments) == ("toolu_1", "multiply", {"a": 6, "b": 7})


@pytest.mark.parametrize(("raw", "bad_id", "name", "message"), [
    ('{"id": "a", "name": ', "line-7", None, r"line 7: not valid JSON"),
    (b'{"id": "\xff"}', "line-7", None, r"line 7: not valid JSON"),
    ("[1, 2]", "line-7", None, r"line 7: expected a JSON object, got array"),
    ({"id": "a", "arguments": {}}, "a", None, r'line 7: "name" missing'),
    ({"id": "a", "name": 5}, "a", None, r'"name" must be a non-empty string, got number'),
    ({"id": "a", "name": "add", "arguments": [1]}, "a", "add",
     r'"arguments" must be a JSON object, got array'),
    ({"id": "a", "name": "add", "arguments": "{oops"}, "a", "add", r'"arguments" is not valid JSON'),
    ({"id": {"x": 1}, "name": "add"}, "line-7", None, r'"id" must be a string or an integer, got object'),
    ({"id": "a", "name": "add", "timeout": -1}, "a", "add", r'"timeout" must be a positive number'),
    ({"id": "o", "type": "function", "function": {"name": "add", "arguments": "[]"}}, "o", "add",
     r'"function.arguments" must be a JSON object, got array'),
    ({"id": "o", "type": "function", "function": {"arguments": "{}"}}, "o", None, r'"function.name" missing'),
    ({"type": "tool_use", "id": "t", "name": "add", "input": "a=1"}, "t", "add",
     r'"input" must be a JSON object, got string'),
])
def test_malformed_lines_name_the_problem(raw: object, bad_id: str, name: str | None, message: str) -> None:
    bad = _bad(raw)
    assert (bad.id, bad.name) == (bad_id, name)
    assert re.search(message, bad.message), bad.message
    record = bad.record()
    assert record["status"] == "error" and record["error"]["type"] == "MalformedCallError"
    assert set(record) == {"id", "name", "status", "output", "error", *RUN_FIELDS}
    assert record["worker_pid"] is None and record["duration_s"] == 0.0


# ------------------------------------------------------------------ one spec grammar, stable names

# Every --tools form, and the tools it must give (tests/cli/spec_tools.py: TOOLS = [ping, shout]).
SPEC_FORMS = [
    ("tests.cli.spec_tools:louder", ["louder"]),  # MODULE:ATTR
    ("tests.cli.spec_tools", ["ping", "shout"]),  # MODULE: its TOOLS list
    ("tests/cli/spec_tools.py", ["ping", "shout"]),  # FILE
    ("tests/cli/spec_tools.py:louder", ["louder"]),  # FILE:ATTR
]


@pytest.mark.parametrize(("spec", "names"), SPEC_FORMS)
def test_every_spec_form_loads(spec: str, names: list[str]) -> None:
    assert list(collect_tools(load_tools_spec(spec))) == names


def _outside_file(tmp_path: Path) -> Path:
    outside = tmp_path / "elsewhere" / "my-tools.py"  # not a valid module name, outside the cwd
    outside.parent.mkdir()
    outside.write_text("from toolfork import tool\n"
                       "@tool\ndef far() -> str:\n    '''Far away.'''\n    return 'far'\n")
    return outside


NAME_OF = """
import sys
from toolfork.commands._loading import import_module, load_tools_spec
load_tools_spec(sys.argv[1] + ":far")
print(import_module(sys.argv[1]).__name__)
"""


def test_a_file_outside_the_cwd_gets_the_same_module_name_in_every_process(tmp_path: Path) -> None:
    outside = _outside_file(tmp_path)
    names = set()
    for seed in ("1", "2"):  # hash() of a str differs between these two; the name must not
        env = {**child_env(), "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", NAME_OF, str(outside)], capture_output=True,
                              text=True, cwd=REPO, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        names.add(done.stdout.strip())
    digest = hashlib.sha256(str(outside.resolve()).encode()).hexdigest()[:16]
    assert names == {f"_toolfork_user_my_tools_{digest}"}
    # In this process too, and the module is registered under it (dill and the workers find it there).
    assert list(collect_tools(load_tools_spec(str(outside)))) == ["far"]
    module = import_module(str(outside))
    assert module.__name__ in names and sys.modules[module.__name__] is module


def test_a_file_inside_the_cwd_is_named_by_its_dotted_path() -> None:
    assert import_module("tests/cli/spec_tools.py").__name__ == "tests.cli.spec_tools"


def test_a_file_named_like_another_module_does_not_replace_it(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import calendar
    import json as json_module

    (tmp_path / "calendar.py").write_text(  # a stdlib name, already imported
        "from toolfork import tool\n@tool\ndef cal() -> str:\n    '''Cal.'''\n    return 'c'\n")
    (tmp_path / "json.py").write_text(
        "from toolfork import tool\n@tool\ndef js() -> str:\n    '''Js.'''\n    return 'j'\n")
    monkeypatch.chdir(tmp_path)
    assert list(collect_tools(load_tools_spec("calendar.py"))) == ["cal"]
    assert list(collect_tools(load_tools_spec("json.py:js"))) == ["js"]
    assert sys.modules["calendar"] is calendar and sys.modules["json"] is json_module
    assert import_module("calendar.py").__name__.startswith("_toolfork_user_calendar_")


@pytest.mark.parametrize(("spec", "message"), [
    ("tests/cli/nope.py", r"'tests/cli/nope.py': no such file"),
    ("tests/cli/nope.py:TOOLS", r"'tests/cli/nope.py': no such file"),
    ("tests.cli.spec_tools:nothing", r"module 'tests.cli.spec_tools' has no attribute 'nothing'"),
    ("tests/cli/spec_tools.py:nothing", r"has no attribute 'nothing'"),
    ("tests/cli/cli_tools.py:NOT_A_TOOL", r"cannot use 'nope' as a tool"),
    ("tests.cli.cli_tools:NOT_CALLABLE", r"cannot use 42 as a tool"),
])
def test_bad_specs_name_what_was_wrong(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_tools_spec(spec)


def test_a_user_module_missing_an_optional_package_names_the_extra(tmp_path: Path) -> None:
    needs = tmp_path / "needs_boto.py"
    needs.write_text("raise ModuleNotFoundError(\"No module named 'boto3'\", name='boto3')\n")
    with pytest.raises(UsageError, match=r"No module named 'boto3' \(the 'boto3' package is not installed: "
                                         r"pip install 'toolfork\[ses\]'\)"):
        load_tools_spec(str(needs))
