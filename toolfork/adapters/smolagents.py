"""``ToolforkExecutor``: smolagents' code executor, each code action in a toolfork sandboxed session.

Why: smolagents' ``CodeAgent`` runs the Python its model writes. Its local executor is an AST
interpreter that its own docs call no security boundary; its remote executors need Docker or a cloud
account. This one is a ``RemotePythonExecutor`` (the class smolagents' Docker, E2B and Modal executors
share, so ``send_tools``, ``send_variables`` and the final answer work as theirs do) whose "remote" is a
toolfork session holding a ``Kernel`` (``toolfork.toolkits.interpreter_kernel``): a process of its own,
in the sandbox (no network, writes only in a private workspace, memory and CPU bounded), with a
checkpoint so a code action that times out or crashes leaves the state as it was before it.

    CodeAgent ──code action──> ToolforkExecutor.run_code_raise_errors ──> session.run(smolagents_code)
       ──> Kernel.run in the sandboxed session process ──> plain data (stdout, value, error, images)
       ──> CodeOutput(output, logs, is_final_answer) | AgentError (traceback, or why it was rolled back)

The tools ``send_tools`` receives are defined inside the session from their source (as every remote
executor does), so they run in the sandbox too; those named in ``host_tools`` run in the host's pool
instead, reached from the sandbox by a stub (``ToolRuntime.call_host``), so they keep the network and
the credentials the sandbox has not. ``additional_imports`` are checked, not installed:
the sandbox imports what this Python environment has; a missing module is a clear error naming it.

On a shared ``executor`` (one agent after another), each executor opens the next one's session ahead
(``Executor.session_ahead``) in a workspace of its own, its kernel already holding what smolagents'
final answer imports (``PRELOAD``), so the next agent's executor and its first step start at once;
it is handed only to an executor whose settings are equal in every part (host tools are never opened
ahead), and its workspace is removed if it goes unused.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import io
import shutil
import tempfile
import threading
import weakref
from typing import Any

from toolfork._extras import import_optional
from toolfork.executor import Executor
from toolfork.governance.limits import Limits
from toolfork.toolkits.interpreter import CHECKPOINT, ROLLED_BACK, readable
from toolfork.toolkits.interpreter_kernel import Kernel
from toolfork.tools import Tool, ToolOutput, ToolRuntime

import_optional("smolagents", "toolfork.adapters.smolagents")

from smolagents.local_python_executor import CodeOutput  # noqa: E402
from smolagents.remote_executors import RemotePythonExecutor  # noqa: E402
from smolagents.utils import AgentError  # noqa: E402

TOOL_NAME = "smolagents_code"
_SOURCE_LOCK = threading.Lock()
# What smolagents' final_answer, defined in the session at an agent's first step, imports that this
# process may not have: on a shared executor the kernel imports them as it starts (so in the session
# opened ahead, while the agent before runs), not in the agent's first step (~150 ms).
PRELOAD = tuple(m for m in ("numpy", "PIL") if importlib.util.find_spec(m) is not None)
# A shared Executor -> the workspace of the session opened ahead on it for the next ToolforkExecutor
_AHEAD: weakref.WeakKeyDictionary[Executor, str] = weakref.WeakKeyDictionary()
_AHEAD_LOCK = threading.Lock()
FINAL = RemotePythonExecutor.FINAL_ANSWER_EXCEPTION
# Distributions whose module is named otherwise (``additional_imports`` may name either).
MODULE_OF = {"pillow": "PIL", "scikit-learn": "sklearn", "beautifulsoup4": "bs4", "opencv-python": "cv2",
             "pyyaml": "yaml", "python-dateutil": "dateutil"}


def _code_action(code: str, runtime: ToolRuntime) -> ToolOutput:
    """Run a smolagents code action in this session's kernel.

    Args:
        code: the code action's Python source
    """
    kernel = runtime.state
    kernel.namespace[CALL_HOST] = runtime.call_host  # this action's: host tools' stubs ask through it
    return ToolOutput([], False, kernel.run(code))


CALL_HOST = "__toolfork_call_host__"
# In the kernel, a host tool is a stub that asks the host to run it (``ToolRuntime.call_host``), its
# positional arguments named as the tool's inputs are.
STUB_MAKER = f"""
def __toolfork_host_tool__(name, inputs):
    def call(*args, **kwargs):
        kwargs.update(zip(inputs, args))
        return {CALL_HOST}(name, **kwargs)
    call.__name__ = name
    return call
"""
JSON_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean",
              "array": "array", "object": "object"}


def host_tool(smol: Any) -> Tool:
    """A smolagents tool as a toolfork tool, to run in the host's pool: its inputs as a JSON Schema
    (smolagents' ``any``, ``image`` and ``audio`` accept any value), its ``forward`` as the function."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in smol.inputs.items():
        kind = JSON_TYPES.get(str(spec.get("type")))
        properties[name] = {"description": str(spec.get("description", ""))} | ({"type": kind} if kind else {})
        if not spec.get("nullable"):
            required.append(name)
    schema = {"type": "object", "properties": properties, "required": required}

    def run(**arguments: Any) -> Any:
        return smol(**arguments, sanitize_inputs_outputs=True)

    return Tool.from_json_schema(smol.name, smol.description, schema, fn=run)


CODE_TOOL = Tool(TOOL_NAME, fn=_code_action)


def modules(names: list[str]) -> list[str]:
    """The top-level modules ``additional_imports`` (import patterns or distributions) ask for."""
    out: list[str] = []
    for name in names:
        top = MODULE_OF.get(name.lower(), name).split(".")[0].replace("-", "_")
        if top and top != "*" and top not in out:
            out.append(top)
    return out


class ToolforkExecutor(RemotePythonExecutor):
    """A smolagents ``PythonExecutor`` for ``CodeAgent(..., executor=ToolforkExecutor([...], logger))``.

    ``timeout``: seconds per code action (None: the executor's). ``limits``: the session's ``Limits``,
    over the defaults (the sandbox, no network, writes only in a private workspace, reads only there, in
    the interpreter and in the system's libraries). ``checkpoint``:
    roll a failed code action back (True) or lose the session on it (False). ``executor``: an
    ``Executor`` to share between agents (its tools gain ``smolagents_code``; it is not closed here).
    ``host_tools``: names of the agent's tools that run in the host's pool, not in the sandbox (a web
    search that needs the network, a tool with credentials); the code calls them as any tool."""

    def __init__(self, additional_imports: list[str], logger: Any, *, timeout: float | None = None,
                 limits: Limits | None = None, checkpoint: bool = True, executor: Executor | None = None,
                 allow_pickle: bool = False, host_tools: list[str] | tuple[str, ...] = (),
                 _sandbox: bool = True) -> None:
        super().__init__(additional_imports, logger, allow_pickle)
        if isinstance(host_tools, str) or not all(isinstance(n, str) and n for n in host_tools):
            raise TypeError(f"ToolforkExecutor: host_tools must be a list of tool names, got {host_tools!r}")
        if "final_answer" in host_tools:
            raise ValueError("ToolforkExecutor: final_answer always runs in the sandbox (it ends the code action)")
        self.host_tools = tuple(host_tools)
        if timeout is not None and not timeout > 0:
            raise ValueError(f"ToolforkExecutor: timeout={timeout!r}: give seconds (> 0) or None")
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"ToolforkExecutor: limits must be a toolfork Limits, got {type(limits).__name__}")
        self.timeout = timeout
        self._own = executor is None
        self._limits = limits
        self._sandbox = _sandbox
        self._kept = CHECKPOINT if checkpoint else False  # the interpreter's: the copy goes after the result
        self.workspace = (_take_ahead(executor) if executor is not None and not host_tools else None) or _workspace()
        self.code_actions = 0
        self.session: Any = None
        try:
            self.executor = Executor([CODE_TOOL], workers=1) if executor is None else executor
            if TOOL_NAME not in self.executor.tools:
                self.executor.add_tools(CODE_TOOL)
            if not _sandbox and self.executor.mode != "fork":
                raise RuntimeError(f"ToolforkExecutor(_sandbox=False): the executor's sessions run in "
                                   f"{self.executor.mode} mode, where a code action would run in this process: "
                                   "use mode='fork'")
            args, options = self._session_spec(self.workspace)
            # refused at open, naming why, where the backend or the machine cannot give the sandbox
            self.session = self.executor.session(*args, **options, host_tools=self.host_tools)
            if not self._own and not self.host_tools:
                self._prepare_next()
            self.installed_packages = self.install_packages(additional_imports)
        except BaseException:
            self.cleanup()
            raise
        self.logger.log("toolfork session is running")

    def _session_spec(self, workspace: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The session's factory and arguments, and its options, for an agent whose workspace is ``workspace``."""
        options: dict[str, Any] = {"checkpoint": self._kept}
        if self._sandbox:
            options["limits"] = Limits(**{"sandbox": True, "network": False, "write_paths": [workspace],
                                          "read_paths": readable(workspace),
                                          **(self._limits.set_fields() if self._limits is not None else {})})
        return (Kernel, workspace, 20_000, (FINAL,), () if self._own else PRELOAD), options

    def _prepare_next(self) -> None:
        """The next agent's session on this shared executor, opened ahead in a workspace of its own (see
        the module docstring); one at a time per executor."""
        executor = self.executor
        with _AHEAD_LOCK:
            if executor in _AHEAD:
                return
            where = _AHEAD[executor] = _workspace()
        owner = weakref.ref(executor)

        def discard() -> None:  # unless an executor took the workspace meanwhile: it is that agent's then
            ex = owner()
            with _AHEAD_LOCK:
                if ex is not None and _AHEAD.get(ex) != where:
                    return
                if ex is not None:
                    del _AHEAD[ex]
            shutil.rmtree(where, ignore_errors=True)

        args, options = self._session_spec(where)
        try:
            kept = executor.session_ahead(*args, **options, on_discard=discard)
        except Exception:  # (the executor closed meanwhile): the next agent opens its own
            kept = False
        if not kept:
            discard()

    def run_code_raise_errors(self, code: str) -> CodeOutput:
        """Run ``code`` in the session: its ``CodeOutput``, or ``AgentError`` naming what went wrong."""
        self.code_actions += 1
        before = self.session.restores
        result = self.session.run([{"id": f"action-{self.code_actions}", "name": TOOL_NAME,
                                    "arguments": {"code": code}, "timeout": self.timeout}])[0]
        if result.status != "ok" or result.output is None or not isinstance(result.output.data, dict):
            why = result.error.message if result.error is not None else result.output.as_text()
            if self.session.restores > before:
                why = f"{why}; {ROLLED_BACK}"
            raise AgentError(f"Executing code yielded an error:\n{why}", self.logger)
        cell = result.output.data
        logs = cell["stdout"] + cell["stderr"]
        error = cell["error"]
        if error is not None:
            if error["type"] == FINAL:
                return CodeOutput(self._deserialize_final_answer(error["message"], self.allow_pickle), logs, True)
            raise AgentError(f"{logs}\nExecuting code yielded an error:\n{error['traceback']}", self.logger)
        if cell["value_image"]:
            import PIL.Image  # smolagents requires pillow

            return CodeOutput(PIL.Image.open(io.BytesIO(base64.b64decode(cell["images"][0]["data"]))), logs, False)
        return CodeOutput(cell["value"], logs, False)

    def send_tools(self, tools: dict[str, Any]) -> None:
        """smolagents' own for the tools that run in the sandbox, one agent at a time in this process: it
        reads the tools' source with ``inspect``, whose ``ast`` parsing is not safe from several threads at
        once (CPython 3.11: "AST constructor recursion depth mismatch"). The tools named in ``host_tools``
        run in the host's pool instead: each is added to the executor, and the kernel gets a stub of it."""
        inside = {name: t for name, t in tools.items() if name not in self.host_tools}
        with _SOURCE_LOCK:
            super().send_tools(inside)
        outside = [t for name, t in tools.items() if name in self.host_tools]
        if not outside:
            return
        new = [host_tool(t) for t in outside if t.name not in self.executor.tools]
        if new:
            self.executor.add_tools(*new)
        stubs = "".join(f"{t.name} = __toolfork_host_tool__({t.name!r}, {list(t.inputs)!r})\n" for t in outside)
        self.run_code_raise_errors(STUB_MAKER + stubs)

    def install_packages(self, additional_imports: list[str]) -> list[str]:
        """Check that the sandbox can import them: it installs nothing (a missing one is an error)."""
        wanted = modules(list(additional_imports))
        if not wanted:
            return list(additional_imports)
        probe = f"import importlib.util\n[m for m in {wanted!r} if importlib.util.find_spec(m) is None]"
        missing = self.run_code_raise_errors(probe).output
        if missing != "[]":
            raise ModuleNotFoundError(
                f"ToolforkExecutor: the sandbox cannot import {missing} (asked for by additional_imports or a "
                "tool's requirements): install them into this Python environment; nothing is pip-installed "
                "at run time")
        return list(additional_imports)

    def cleanup(self) -> None:
        """End the session (its process, its state) and remove its workspace; close an executor made here."""
        if self.session is not None:
            with contextlib.suppress(Exception):
                self.session.close()
            self.session = None
        if self._own and getattr(self, "executor", None) is not None:
            self.executor.close()
        shutil.rmtree(self.workspace, ignore_errors=True)

    def delete(self) -> None:
        """As the Docker executor's: clean up."""
        self.cleanup()


def _take_ahead(executor: Executor) -> str | None:
    with _AHEAD_LOCK:
        return _AHEAD.pop(executor, None)


def _workspace() -> str:
    return tempfile.mkdtemp(prefix="toolfork-smolagents-")


__all__ = ["TOOL_NAME", "ToolforkExecutor"]
