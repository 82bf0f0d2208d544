"""Toolkit filters, additions, adjustments, and the registry's refusal of duplicate names."""

from __future__ import annotations

import pytest

from toolfork import DuplicateToolError, Tool, ToolDefinitionError, Toolkit, collect_tools, tool
from toolfork.toolkits import TOOLKITS, CalculatorToolkit
from toolfork.toolkits.calculator import DivideTool, SumTool


class PingTool(Tool):
    name = "ping"
    description = "Ping."

    def __call__(self, host: str) -> str:
        return f"pong {host}"


class EchoTool(Tool):
    name = "echo"
    description = "Echo."

    def __call__(self, text: str) -> str:
        return text


class NetKit(Toolkit):
    name = "net"

    def __init__(self) -> None:
        super().__init__()
        self.provided = 0

    def guidelines(self) -> str:
        return "Ping before you echo."

    def provide(self) -> list[Tool]:
        self.provided += 1
        return [PingTool(), EchoTool()]


@tool
def extra(x: int) -> int:
    """An added tool."""
    return x


def names(kit: Toolkit) -> list[str]:
    return [t.name for t in kit.tools()]


def test_provide_guidelines_and_name() -> None:
    kit = NetKit()
    assert names(kit) == ["ping", "echo"]
    assert kit.guidelines() == "Ping before you echo."
    assert kit.toolkit_name == kit.name == "net"

    class Unnamed(Toolkit):
        pass

    assert Unnamed.name == "Unnamed" and Unnamed().toolkit_name == "Unnamed"
    assert Toolkit().toolkit_name == "Toolkit" and Toolkit().tools() == [] and Toolkit().guidelines() is None


def test_exclude_by_name_and_class() -> None:
    assert names(NetKit().exclude(["echo"])) == ["ping"]
    assert names(NetKit().exclude([PingTool])) == ["echo"]
    assert names(NetKit().exclude(["not-there"])) == ["ping", "echo"]  # harmless


def test_only_by_name_and_class_and_typos_are_errors() -> None:
    assert names(NetKit().only(["echo"])) == ["echo"]
    assert names(NetKit().only([PingTool])) == ["ping"]
    with pytest.raises(ToolDefinitionError, match=r"net.only\(\): no tool 'ehco' \(tools: ping, echo\)"):
        NetKit().only(["ehco"]).tools()


def test_filters_apply_to_added_tools_too() -> None:
    kit = NetKit().add(extra).exclude(["extra"])
    assert names(kit) == ["ping", "echo"]
    kit = NetKit().add(extra).only(["extra", "ping"])
    assert names(kit) == ["ping", "extra"]
    # Order does not matter: a filter set before add() still applies.
    kit = NetKit().exclude(["extra"]).add(extra)
    assert names(kit) == ["ping", "echo"]


def test_add_wraps_plain_functions() -> None:
    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    kit = NetKit().add(double)
    added = kit.tools()[-1]
    assert added.name == "double" and added.invoke({"x": 4}).data == 8


def test_with_adjusts_one_tool_in_place_or_by_replacement() -> None:
    kit = NetKit().with_(PingTool, lambda t: t.set_max_runs(3) and None)
    ping = kit.tools()[0]
    assert ping.max_runs == 3
    assert kit.tools()[1].max_runs is None

    @tool(name="echo", description="Loud echo.")
    def replacement(text: str) -> str:
        return text.upper()

    kit = NetKit().with_("echo", lambda t: replacement)
    assert kit.tools()[1] is replacement

    with pytest.raises(ToolDefinitionError, match=r"net.with_\(\): no tool 'nope'"):
        NetKit().with_("nope", lambda t: None).tools()
    with pytest.raises(ToolDefinitionError, match="not a Tool"):
        NetKit().with_("echo", lambda t: "oops").tools()  # type: ignore[arg-type,return-value]
    with pytest.raises(ToolDefinitionError, match="must be callable"):
        NetKit().with_("echo", 3)  # type: ignore[arg-type]


def test_tools_are_computed_once_per_configuration() -> None:
    kit = NetKit()
    first = kit.tools()
    assert kit.tools() == first and kit.provided == 1
    narrowed = kit.exclude(["echo"])
    assert names(narrowed) == ["ping"] and narrowed.provided == 2
    assert kit.tools() == first and kit.provided == 1, "the toolkit a filter was called on is unchanged"


SHARED_ECHO = EchoTool()


class SharedKit(Toolkit):
    """Hands out the same module-level tool object every time, as many toolkits do."""

    name = "shared"

    def provide(self) -> list[Tool]:
        return [PingTool(), SHARED_ECHO]


def test_filters_and_with_return_new_toolkits_and_never_touch_shared_tools() -> None:
    base = SharedKit()
    narrowed = base.only(["echo"])
    dropped = base.exclude(["echo"])
    slowed = base.with_("echo", lambda t: t.configure(timeout=7, max_runs=1))
    added = base.add(extra)
    assert len({id(base), id(narrowed), id(dropped), id(slowed), id(added)}) == 5
    assert names(base) == ["ping", "echo"], "only/exclude/with_/add left the original toolkit alone"
    assert names(narrowed) == ["echo"] and names(dropped) == ["ping"]
    assert names(added) == ["ping", "echo", "extra"]
    adjusted = slowed.tools()[1]
    assert (adjusted.timeout, adjusted.max_runs) == (7.0, 1)
    assert adjusted is not SHARED_ECHO and adjusted.invoke({"text": "hi"}).as_text() == "hi"
    assert (SHARED_ECHO.timeout, SHARED_ECHO.max_runs) == (None, None), "the module-level tool was not changed"
    assert base.tools()[1] is SHARED_ECHO and SharedKit().tools()[1].timeout is None
    # Chaining narrows step by step, each step a new toolkit.
    assert names(base.exclude(["ping"]).with_("echo", lambda t: None)) == ["echo"]


def test_bad_filters_and_bad_provide() -> None:
    with pytest.raises(ToolDefinitionError, match="tool names or Tool subclasses"):
        NetKit().exclude([3])  # type: ignore[list-item]

    class Broken(Toolkit):
        def provide(self) -> list[Tool]:
            return ["not a tool"]  # type: ignore[list-item]

    with pytest.raises(ToolDefinitionError, match="which is not a Tool"):
        Broken().tools()


def test_a_toolkit_that_forgets_super_init_still_works() -> None:
    class Forgetful(Toolkit):
        def __init__(self, n: int) -> None:
            self.n = n

        def provide(self) -> list[Tool]:
            return [EchoTool()]

    assert names(Forgetful(1).exclude(["x"])) == ["echo"]


# -- the registry ------------------------------------------------------------------------------------

def test_collect_tools_flattens_everything() -> None:
    def plain(y: str) -> str:
        """Plain function."""
        return y

    found = collect_tools([NetKit(), extra, plain, [DivideTool()], CalculatorToolkit().only(["mean"])])
    assert list(found) == ["ping", "echo", "extra", "plain", "divide", "mean"]
    assert all(isinstance(t, Tool) for t in found.values())


def test_collect_tools_instantiates_argument_free_classes() -> None:
    assert list(collect_tools([PingTool, CalculatorToolkit]))[:3] == ["ping", "sum", "subtract"]

    class NeedsArgs(Toolkit):
        def __init__(self, root: str) -> None:
            super().__init__()

    with pytest.raises(ToolDefinitionError, match="needs constructor arguments"):
        collect_tools([NeedsArgs])


def test_duplicate_names_are_refused_naming_both() -> None:
    @tool(name="sum")
    def my_sum(numbers: list[float]) -> float:
        """My sum."""
        return sum(numbers)

    with pytest.raises(DuplicateToolError) as info:
        collect_tools([CalculatorToolkit(), my_sum])
    message = str(info.value)
    assert "Two tools are named 'sum'" in message
    assert "class toolfork.toolkits.calculator.SumTool" in message
    assert "from toolkit calculator" in message
    assert "test_tools_toolkit" in message and "my_sum" in message
    assert info.value.name == "sum"


def test_duplicates_between_two_classes_and_the_same_object_twice() -> None:
    with pytest.raises(DuplicateToolError, match=r"PingTool.*PingTool"):
        collect_tools([PingTool(), PingTool()])
    ping = PingTool()
    assert list(collect_tools([ping, ping])) == ["ping"]
    # Excluding one of the clashing tools resolves the clash.
    @tool(name="sum")
    def own_sum(numbers: list[int]) -> int:
        """Sum integers."""
        return sum(numbers)

    assert collect_tools([CalculatorToolkit().exclude([SumTool]), own_sum])["sum"] is own_sum


def test_collect_tools_refuses_non_tools() -> None:
    with pytest.raises(ToolDefinitionError, match="cannot use 42 as a tool"):
        collect_tools([42])  # type: ignore[list-item]


def test_registry_of_built_in_toolkits() -> None:
    assert TOOLKITS["calculator"] is CalculatorToolkit
