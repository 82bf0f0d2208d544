"""Tool settings are declared once (toolfork/tools/settings.py) and every way to give one follows it."""

from __future__ import annotations

import ast
import copy
import inspect
from typing import Any, get_type_hints

import pytest
from pydantic import BaseModel

from toolfork.governance import Limits
from toolfork.tools import Tool, ToolDefinitionError, tool
from toolfork.tools import decorator as decorator_module
from toolfork.tools.settings import DEFAULTS, NAMES, SettingKeywords, ToolSettings, check_settings, settings_of


class Answer(BaseModel):
    value: int


# A valid value for every setting, unlike its default, and one each check refuses.
GOOD: dict[str, Any] = {
    "timeout": 2, "max_runs": 3, "on_error": "return-to-model", "inline": True, "fresh_process": True,
    "retries": 1, "track_by_inputs": True, "approval_policy": True, "output_model": Answer,
    "max_output_chars": 50, "manual": False, "on_tool_called": print, "on_response_received": print,
    "limits": Limits(memory_mb=64), "max_concurrency": 2, "concurrency_group": "db", "rate_limit": "10/s",
    "idempotent": True, "max_result_mb": 32,
}
BAD: dict[str, Any] = {
    "timeout": -1, "max_runs": -1, "on_error": "explode", "retries": -2, "approval_policy": "yes",
    "output_model": dict, "max_output_chars": 0, "on_tool_called": 3, "on_response_received": "x",
    "limits": {"memory_mb": -1}, "max_concurrency": 0, "concurrency_group": "", "rate_limit": "fast",
    "max_result_mb": 0,
}


def echo(x: int) -> int:
    """Echo.

    Args:
        x: a number
    """
    return x


def test_the_tables_cover_every_setting_once() -> None:
    assert set(GOOD) == set(NAMES) == set(DEFAULTS)
    assert set(BAD) <= set(NAMES)
    hints = get_type_hints(ToolSettings)
    assert list(hints) == list(NAMES) == list(get_type_hints(SettingKeywords))
    for key in NAMES:
        assert getattr(Tool, key) == DEFAULTS[key], key  # the class attributes are the declared defaults


@pytest.mark.parametrize("key", sorted(GOOD))
def test_every_setting_is_taken_by_every_entry_point(key: str) -> None:
    value = GOOD[key]
    expected = float(value) if key == "timeout" else value
    by_decorator = tool(**{key: value})(echo)
    by_constructor = Tool("echo", fn=echo, **{key: value})
    by_schema = Tool.from_json_schema("echo", "Echo.", {"type": "object", "properties": {"x": {}}}, echo,
                                      **{key: value})
    by_configure = Tool("echo", fn=echo).configure(**{key: value})
    for made in (by_decorator, by_constructor, by_schema, by_configure):
        assert getattr(made, key) == expected, (key, made)
        assert settings_of(made) == {**DEFAULTS, key: expected}
        assert settings_of(copy.copy(made)) == settings_of(made)  # a copy (Toolkit.with_) carries them


@pytest.mark.parametrize("key", sorted(BAD))
def test_every_check_names_the_tool_and_the_setting(key: str) -> None:
    with pytest.raises(ToolDefinitionError, match=rf"tool 'echo': {key} must be"):
        tool(**{key: BAD[key]})(echo)
    with pytest.raises(ToolDefinitionError, match=rf"tool 'echo': {key} must be"):
        Tool("echo", fn=echo).configure(**{key: BAD[key]})
    with pytest.raises(ToolDefinitionError, match=rf"here: {key} must be"):
        check_settings("here", {key: BAD[key]})


def test_an_unknown_setting_is_refused_by_the_decorator_too() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tool 't': unknown setting 'timout' \(valid: timeout, "):
        tool(name="t", timout=3)(echo)


def test_a_subclass_overrides_a_setting_as_a_class_attribute() -> None:
    class Slow(Tool):
        """Slow."""

        timeout = 5

        def __call__(self) -> str:
            return "done"

    assert Slow().timeout == 5 and Slow(timeout=1).timeout == 1.0 and Tool.timeout is None


def test_the_typed_signatures_take_the_declared_settings() -> None:
    """``@tool(...)``'s overload and ``Tool.__init__`` type ``**settings`` with SettingKeywords (the
    declared settings), so a type checker knows every one of them, manual and the hooks included."""
    tree = ast.parse(inspect.getsource(decorator_module))
    overloads = [f for f in tree.body if isinstance(f, ast.FunctionDef)
                 and any(isinstance(d, ast.Name) and d.id == "overload" for d in f.decorator_list)]
    with_settings = [f for f in overloads if f.args.kwarg is not None]
    assert len(with_settings) == 1
    kwarg = with_settings[0].args.kwarg
    assert kwarg is not None and ast.unparse(kwarg.annotation) == "Unpack[SettingKeywords]"  # type: ignore[arg-type]
    init = inspect.signature(Tool.__init__).parameters["settings"]
    assert init.kind is inspect.Parameter.VAR_KEYWORD and init.annotation == "Unpack[SettingKeywords]"
