"""A tool's settings, declared once.

Each setting is one line of ``ToolSettings``: its name, its type, the check a value must pass
(``Annotated`` metadata) and its default. Everything else follows from that class:

* ``Tool`` inherits it, so every setting is a class attribute a subclass overrides (``timeout = 5``);
* ``Tool(...)``, ``@tool(...)``, ``Tool.from_json_schema(...)`` and ``configure(...)`` take the settings
  as keywords, typed by ``SettingKeywords`` (PEP 692 types ``**kwargs`` only with a TypedDict, so the
  same fields are spelled once more there; this module refuses to import if the two differ);
* ``check_settings`` validates and normalises them by each field's check, naming the tool and the setting;
* ``settings_of`` reads a tool's current values (what a copy of the tool carries).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypedDict, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel

from toolfork.governance.limits import Limits, LimitsError
from toolfork.governance.ratelimit import RateLimit, RateLimitError
from toolfork.tools.errors import ToolDefinitionError

OnError = Literal["fail-run", "return-to-model"]
ON_ERROR_VALUES: tuple[str, ...] = get_args(OnError)
# ``approval_policy``: True asks every time, False never asks (even under an agent-wide policy), None
# leaves it to the agent, a callable decides per call from the validated inputs.
ApprovalPolicy = Union[bool, Callable[[dict[str, Any]], Union[bool, str]]]  # noqa: UP007

Check = Callable[[str, str, Any], Any]  # (where, setting, value) -> the value to store; raises if refused


def positive_seconds(where: str, key: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ToolDefinitionError(f"{where}: {key} must be a positive number of seconds or None")
    return float(value)


def _count_at_least(least: int, optional: bool) -> Check:
    def check(where: str, key: str, value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            if least == 0 and not optional:
                raise ToolDefinitionError(f"{where}: {key} must be a non-negative integer")
            raise ToolDefinitionError(f"{where}: {key} must be an integer >= {least}, or None")
        return value

    return check


optional_count = _count_at_least(0, optional=True)
optional_positive_count = _count_at_least(1, optional=True)
count = _count_at_least(0, optional=False)


def flag(where: str, key: str, value: Any) -> bool:
    return bool(value)


def one_of_on_error(where: str, key: str, value: Any) -> Any:
    if value not in ON_ERROR_VALUES:
        raise ToolDefinitionError(f"{where}: {key} must be one of {ON_ERROR_VALUES}, got {value!r}")
    return value


def callable_or_none(where: str, key: str, value: Any) -> Any:
    if value is not None and not callable(value):
        raise ToolDefinitionError(f"{where}: {key} must be callable or None, got {value!r}")
    return value


def model_class_or_none(where: str, key: str, value: Any) -> Any:
    if value is not None and not (isinstance(value, type) and issubclass(value, BaseModel)):
        raise ToolDefinitionError(f"{where}: {key} must be a pydantic BaseModel subclass")
    return value


def limits_or_none(where: str, key: str, value: Any) -> Any:
    """A ``Limits`` (or a dict of its fields, made into one); bad fields are refused here, by name."""
    if value is None or isinstance(value, Limits):
        return value
    if not isinstance(value, Mapping):
        raise ToolDefinitionError(f"{where}: {key} must be a toolfork.Limits (or a dict of its fields), got {value!r}")
    try:
        return Limits(**value)
    except LimitsError as exc:
        raise ToolDefinitionError(f"{where}: {key} must be valid: {exc}") from None


def group_name_or_none(where: str, key: str, value: Any) -> Any:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ToolDefinitionError(f"{where}: {key} must be a non-empty group name (its cap is given to the "
                                  f"Executor: concurrency={{name: N}}), got {value!r}")
    return value


def rate_or_none(where: str, key: str, value: Any) -> Any:
    """A rate such as "10/s", "30/min" or "100/h", checked here and kept as written."""
    if value is None:
        return None
    try:
        RateLimit.parse(value, setting=key)
    except RateLimitError as exc:
        raise ToolDefinitionError(f"{where}: {key} must be a rate such as '10/s', '30/min' or '100/h': {exc}") \
            from None
    return value


def approval(where: str, key: str, value: Any) -> Any:
    if value is not None and not isinstance(value, bool) and not callable(value):
        raise ToolDefinitionError(f"{where}: {key} must be True (always ask), False (never ask), "
                                  f"None (the agent's policy) or a callable (inputs) -> bool | str; got {value!r}")
    return value


class ToolSettings:
    """Every setting of a tool: type and check, then the default. ``Tool`` inherits these as class
    attributes."""

    timeout: Annotated[float | None, positive_seconds] = None
    max_runs: Annotated[int | None, optional_count] = None
    on_error: Annotated[OnError, one_of_on_error] = "fail-run"
    # Runs in the host process: never killed, no hooks; for tools that mutate in-process state.
    inline: Annotated[bool, flag] = False
    # Each call in a process of its own, forked from the pool's pristine template and gone after the
    # call: no state left by earlier calls (globals, cwd, environment) reaches it. Costs a fork a call.
    fresh_process: Annotated[bool, flag] = False
    retries: Annotated[int, count] = 0
    track_by_inputs: Annotated[bool, flag] = False
    approval_policy: Annotated[ApprovalPolicy | None, approval] = None
    output_model: Annotated[type[BaseModel] | None, model_class_or_none] = None
    # Cap on the text a model reads from this tool; applied by the agent (head and tail kept), not here.
    max_output_chars: Annotated[int | None, optional_positive_count] = None
    # A manual tool has no callable by design: the agent pauses the run (kind "manual") and a person or
    # program supplies the result with ``submit_tool_results``.
    manual: Annotated[bool, flag] = False
    # Interactive hooks (run by the agent, in the host). ``on_tool_called(inputs)``: None pauses the run
    # for a person (kind "hitl"), any other value is the call's result at once (the tool does not run).
    # ``on_response_received(value)``: checks or transforms a result supplied on resume, before
    # ``output_model``; raising refuses the submission.
    on_tool_called: Annotated[Callable[[dict[str, Any]], Any] | None, callable_or_none] = None
    on_response_received: Annotated[Callable[[Any], Any] | None, callable_or_none] = None
    # Resource governance (see docs/executor.md, "Limits"). ``limits``: what one call may use (rlimits,
    # no network, Landlock paths), over the Executor's default limits, field by field.
    limits: Annotated[Limits | None, limits_or_none] = None
    # At most this many calls of the tool run at once, on one Executor (every batch, thread and task).
    max_concurrency: Annotated[int | None, optional_positive_count] = None
    # A cap shared with other tools: the group's cap is given to the Executor (``concurrency={"db": 5}``).
    concurrency_group: Annotated[str | None, group_name_or_none] = None
    # Calls start at most this often ("10/s", "30/min", "100/h"): a smooth token bucket per Executor.
    rate_limit: Annotated[str | None, rate_or_none] = None
    # Running a call twice has the effect of running it once (it dedupes by ``runtime.idempotency_key``,
    # or acts on nothing but reads): a resumed job runs it again when it stopped while the call ran,
    # instead of reporting ``OutcomeUnknown``.
    idempotent: Annotated[bool, flag] = False
    # The most a call's result (with its context and error), or one progress value, may rebuild into in
    # the host, in MB; None: the default (``executor.wire.ceiling.DEFAULT_MB``). Past it: ResultTooLarge.
    max_result_mb: Annotated[int | None, optional_positive_count] = None


class SettingKeywords(TypedDict, total=False):
    """``ToolSettings`` as keywords (for ``**settings: Unpack[SettingKeywords]``); held equal to it below."""

    timeout: float | None
    max_runs: int | None
    on_error: OnError
    inline: bool
    fresh_process: bool
    retries: int
    track_by_inputs: bool
    approval_policy: ApprovalPolicy | None
    output_model: type[BaseModel] | None
    max_output_chars: int | None
    manual: bool
    on_tool_called: Callable[[dict[str, Any]], Any] | None
    on_response_received: Callable[[Any], Any] | None
    limits: Limits | None
    max_concurrency: int | None
    concurrency_group: str | None
    rate_limit: str | None
    idempotent: bool
    max_result_mb: int | None


def _declared() -> tuple[dict[str, Check], dict[str, Any]]:
    hints = get_type_hints(ToolSettings, include_extras=True)
    checks: dict[str, Check] = {}
    types: dict[str, Any] = {}
    for key, hint in hints.items():
        assert get_origin(hint) is Annotated, f"ToolSettings.{key} has no check"
        types[key], checks[key] = get_args(hint)[:2]
    keywords = get_type_hints(SettingKeywords)
    if keywords != types:
        raise TypeError(f"SettingKeywords differs from ToolSettings: {keywords} != {types}")
    return checks, types


CHECKS, TYPES = _declared()
NAMES: tuple[str, ...] = tuple(CHECKS)
DEFAULTS: Mapping[str, Any] = {key: getattr(ToolSettings, key) for key in NAMES}


def check_settings(where: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings as they are stored (each checked, flags made bool); an unknown name is refused."""
    out = {}
    for key, value in settings.items():
        check = CHECKS.get(key)
        if check is None:
            raise ToolDefinitionError(f"{where}: unknown setting {key!r} (valid: {', '.join(NAMES)})")
        out[key] = check(where, key, value)
    return out


def settings_of(tool: ToolSettings) -> dict[str, Any]:
    """A tool's current value of every setting (its own, else its class's)."""
    return {key: getattr(tool, key) for key in NAMES}


__all__ = ["DEFAULTS", "NAMES", "ON_ERROR_VALUES", "ApprovalPolicy", "OnError", "SettingKeywords", "ToolSettings",
           "check_settings", "settings_of"]
