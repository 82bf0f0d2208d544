"""ToolforkExecutor inside smolagents' own CodeAgent, with a scripted model: multi-step code actions,
tools defined in the session, the final answer, a rolled-back action, missing imports, a shared
Executor and cleanup. Real sandboxed sessions, real forked processes. smolagents' own remote-executor
tests run against it in tests/adapters/upstream/smolagents."""

from __future__ import annotations

import io
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console
from smolagents import CodeAgent, Tool
from smolagents.models import ChatMessage, MessageRole, Model
from smolagents.monitoring import AgentLogger, LogLevel
from smolagents.utils import AgentError

from toolfork.adapters.smolagents import PRELOAD, ToolforkExecutor
from toolfork.executor import Executor
from toolfork.executor.backends.fork import session_link
from toolfork.governance.limits import Limits


class ScriptedCode(Model):
    """A model that answers with the code actions it was given, one per step (no key, no network)."""

    def __init__(self, actions: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.actions = list(actions)
        self.seen: list[str] = []

    def generate(self, messages: list[Any], stop_sequences: list[str] | None = None, **kwargs: Any) -> ChatMessage:
        self.seen.append(str(messages[-1].content if hasattr(messages[-1], "content") else messages[-1]))
        code = self.actions.pop(0)
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: next.\n<code>\n{code}\n</code>")


class Multiply(Tool):
    name = "multiply"
    description = "Multiply two integers."
    inputs = {"a": {"type": "integer", "description": "first"}, "b": {"type": "integer", "description": "second"}}
    output_type = "integer"

    def forward(self, a: int, b: int) -> int:
        import os  # runs in the session, in the sandbox's own PID namespace

        print("multiplying in", os.getpid(), os.environ.get("HOST_ONLY_MARK"))
        return a * b


def logger() -> AgentLogger:
    return AgentLogger(LogLevel.OFF, Console(force_terminal=False, file=io.StringIO()))


@pytest.fixture
def executor() -> Iterator[ToolforkExecutor]:
    ex = ToolforkExecutor([], logger(), timeout=5)
    yield ex
    ex.cleanup()


def test_a_code_agent_runs_its_steps_in_the_session_and_returns_the_final_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOST_ONLY_MARK", "host")  # set before the session's process is forked
    executor = ToolforkExecutor([], logger(), timeout=5)
    try:
        model = ScriptedCode(["x = multiply(6, 7)\nprint(x)", "final_answer(x + 1)"])
        agent = CodeAgent(tools=[Multiply()], model=model, executor=executor, max_steps=4)
        assert agent.run("what is 6*7+1?") == 43
    finally:
        executor.cleanup()
    # the tool ran in the sandbox (its own PID namespace, not the host's environment); its print reached the model
    assert "multiplying in" in model.seen[1] and "None" in model.seen[1] and "42" in model.seen[1]


def test_a_timed_out_action_is_rolled_back_and_the_agent_is_told(executor: ToolforkExecutor) -> None:
    executor.timeout = 1
    executor("x = 1")
    with pytest.raises(AgentError, match="rolled back to its state before this cell"):
        executor("x = 2\nwhile True:\n    pass")
    assert executor("x").output == "1"
    assert executor.session.restores == 1


def test_a_crashed_action_is_rolled_back(executor: ToolforkExecutor) -> None:
    executor("items = [1]")
    with pytest.raises(AgentError, match=r"crashed.*rolled back"):
        executor("items.append(2)\nimport os\nos._exit(1)")
    assert executor("items").output == "[1]"


def test_variables_cross_as_smolagents_sends_them(executor: ToolforkExecutor) -> None:
    executor.send_variables({"rows": [1, 2, 3], "label": "total"})
    assert executor("f'{label}: {sum(rows)}'").output == "'total: 6'"


def test_an_import_the_sandbox_cannot_make_is_named_not_installed() -> None:
    with pytest.raises(ModuleNotFoundError, match=r"cannot import \['no_such_module_here'\].*nothing is pip-installed"):
        ToolforkExecutor(["numpy", "no_such_module_here", "math.*", "*"], logger())


def test_bad_settings_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="timeout=0"):
        ToolforkExecutor([], logger(), timeout=0)
    with pytest.raises(TypeError, match="toolfork Limits"):
        ToolforkExecutor([], logger(), limits={"network": False})  # type: ignore[arg-type]


def test_agents_share_an_executor_and_never_see_each_others_state() -> None:  # unsandboxed: the flag works too
    with Executor([], workers=1) as shared:
        a = ToolforkExecutor([], logger(), executor=shared)
        b = ToolforkExecutor([], logger(), executor=shared, _sandbox=False)
        a("secret = 1")
        assert b("'secret' in globals()").output == "False"
        a.cleanup()
        assert b("2 + 2").output == "4"  # one agent's cleanup leaves the shared executor and others alone
        b.cleanup()
        assert not shared.closed


def test_on_a_shared_executor_the_next_agent_is_opened_ahead_for_its_own_workspace_and_settings_only(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ToolforkExecutor on a shared Executor opens the next one's session ahead in a new workspace:
    the next with the same settings is handed it whole, with nothing of the agent before (no file, no
    variable); one with other settings (another read path) gets a session of its own with them; every
    workspace made ahead and not used is removed with the executor."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "ws"))
    os.mkdir(tmp_path / "ws")
    handed: list[bool] = []
    take = session_link.SessionSpares.take_ready

    def seen(spares: session_link.SessionSpares, key: tuple[Any, ...]) -> Any:  # observed, not changed
        link = take(spares, key)
        handed.append(link is not None)
        return link

    monkeypatch.setattr(session_link.SessionSpares, "take_ready", seen)
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "note.txt").write_text("readable")
    with Executor([], workers=1) as shared:
        a = ToolforkExecutor([], logger(), timeout=10, executor=shared)
        a("secret = 'a'\nopen('a.txt', 'w').write('a')")
        ahead = set(os.listdir(tmp_path / "ws")) - {os.path.basename(a.workspace)}
        assert len(ahead) == 1  # the next agent's, made ahead
        a.cleanup()
        b = ToolforkExecutor([], logger(), timeout=10, executor=shared)
        assert {os.path.basename(b.workspace)} == ahead and handed[-1] is True
        assert b("import os\nsorted(os.listdir('.')), 'secret' in globals()").output == "([], False)"
        # what smolagents' final answer imports was imported as the kernel started, bound to no name
        assert b(f"import sys\n[m in sys.modules for m in {PRELOAD!r}], 'numpy' in globals()").output == \
            f"({[True] * len(PRELOAD)!r}, False)"
        b.cleanup()
        other = Limits(read_paths=[str(extra)])
        c = ToolforkExecutor([], logger(), timeout=10, executor=shared, limits=other)
        assert handed[-1] is False  # its settings differ from those opened ahead: a session of its own
        assert c(f"open({str(extra / 'note.txt')!r}).read()").output == "'readable'"
        c.cleanup()
    assert os.listdir(tmp_path / "ws") == []


def test_agents_made_at_once_on_a_shared_executor_never_share_a_workspace_opened_ahead() -> None:
    """Threads make executors on one shared Executor at once: the session opened ahead goes to one of them
    at most; each has a workspace of its own and sees only its own files."""
    from concurrent.futures import ThreadPoolExecutor

    def agent(i: int) -> tuple[str, str]:
        ex = ToolforkExecutor([], logger(), timeout=20, executor=shared)
        try:
            ex(f"open('mine-{i}.txt', 'w').write('x')")
            return ex.workspace, str(ex("import os\nsorted(os.listdir('.'))").output)
        finally:
            ex.cleanup()

    with Executor([], workers=1) as shared:
        agent(-1)  # one before: the next is opened ahead
        with ThreadPoolExecutor(4) as pool:
            seen = list(pool.map(agent, range(4)))
    assert len({workspace for workspace, _ in seen}) == 4
    assert [files for _, files in seen] == [f"['mine-{i}.txt']" for i in range(4)]


def test_cleanup_ends_the_session_and_removes_the_workspace(executor: ToolforkExecutor) -> None:
    executor("open('f.txt', 'w').write('x')")
    pid, workspace = executor.session.pid, executor.workspace
    assert os.path.exists(os.path.join(workspace, "f.txt"))
    executor.delete()
    assert not os.path.exists(workspace)
    with pytest.raises(ProcessLookupError):
        for _ in range(200):
            os.kill(pid, 0)
            time.sleep(0.025)


def test_the_default_executor_is_sandboxed(tmp_path: Any) -> None:
    ex = ToolforkExecutor([], logger())
    try:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            server.settimeout(0.5)
            with pytest.raises(AgentError):
                ex(f"import socket\nsocket.create_connection(('127.0.0.1', {server.getsockname()[1]}), timeout=2)")
            with pytest.raises(TimeoutError):
                server.accept()  # nothing reached the host's loopback
        outside = tmp_path / "escaped.txt"
        with pytest.raises(AgentError):
            ex(f"open({str(outside)!r}, 'w').write('x')")
        assert not outside.exists()
    finally:
        ex.cleanup()


class Peek(Tool):
    name = "peek"
    description = "Read a file of the host."
    inputs = {"path": {"type": "string", "description": "the file"}}
    output_type = "string"

    def forward(self, path: str) -> str:
        import os

        with open(path) as f:
            return f"{f.read()} (read by {os.getpid()})"


def test_host_tools_run_in_the_host_pool_and_the_code_calls_them_as_tools(tmp_path: Any) -> None:
    """A tool named in host_tools runs in the host's pool: it reads a file the sandbox cannot, and the
    code action calls it as any tool (by keyword or by position); the other tools stay inside."""
    secret = tmp_path / "host_only.txt"
    secret.write_text("host data")
    ex = ToolforkExecutor([], logger(), timeout=20, host_tools=["peek"])
    try:
        ex.send_tools({"peek": Peek(), "multiply": Multiply()})
        assert ex.run_code_raise_errors("multiply(a=6, b=7)").output == "42"  # inside, as before
        out = ex.run_code_raise_errors(f"peek(path={str(secret)!r})").output  # the value's repr, as a notebook's
        assert out.startswith("'host data (read by ") and int(out.split()[-1][:-2]) != ex.session.pid
        assert "host data" in ex.run_code_raise_errors(f"peek({str(secret)!r})").output
        with pytest.raises(AgentError, match=r"PermissionError|Permission denied"):
            ex.run_code_raise_errors(f"open({str(secret)!r}).read()")  # the sandbox itself cannot
        with pytest.raises(AgentError, match=r"host tool .peek. error: ToolInputError"):
            ex.run_code_raise_errors("peek(path=3)")  # the host checks the arguments
    finally:
        ex.cleanup()
    with pytest.raises(TypeError, match="host_tools"):
        ToolforkExecutor([], logger(), host_tools="peek")  # type: ignore[arg-type]
