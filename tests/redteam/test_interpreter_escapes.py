"""The code interpreter's own escapes, as root and as nobody: what the sandbox's escape suite does not
cover because it is about the interpreter's crossing and its episodes (each attack in a fresh process,
``interpreter_scenarios``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.redteam.conftest import reported, shared_dir


def attack(name: str, user: str, work: Path) -> dict[str, Any]:
    return reported("tests.redteam.interpreter_scenarios", name, str(work), user=user, timeout=150)


@pytest.fixture
def work() -> Iterator[Path]:
    with shared_dir("toolfork-interpreter-", "these attacks") as path:
        yield path


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_pickled_final_answer_is_never_unpickled_in_the_host(user: str, work: Path) -> None:
    seen = attack("pickled_final_answer", user, work)
    assert seen == {"raised": "SerializationError", "marker": False}, seen


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_an_episode_cannot_read_list_or_change_another_episodes_files(user: str, work: Path) -> None:
    seen = attack("neighbour_files", user, work)
    assert seen == {"leaked": False, "refused": [True, True, True, True], "after": "'a-only'"}, seen


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_cell_that_kills_its_checkpoint_then_crashes_ends_the_episode_saying_so(user: str, work: Path) -> None:
    """The episode may end (lost, saying so) or go on from the state before the cell (rolled back, saying
    so); it never goes on from a fresh interpreter."""
    seen = attack("kill_the_checkpoint", user, work)
    assert seen["status"] == "crashed", seen
    assert "NameError" not in seen["after"], f"the next cell ran on a fresh interpreter: {seen}"
    if seen["said"]:  # lost, and said so: no later cell runs
        assert seen["after"] == "SessionLost at cell-2", seen
    else:  # its checkpoint took over after all: the next cell sees x, or its own fault says the state is lost
        assert "rolled back" in seen["message"], seen
        assert "'value': '1'" in seen["after"] or "the interpreter is lost" in seen["after"], seen


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_smolagents_executor_cannot_reach_the_next_agents_session_opened_ahead_nor_it_its(
        user: str, work: Path) -> None:
    seen = attack("next_agent_ahead", user, work)
    assert seen == {"ahead": 1, "handed": True, "by_a": ["refused", "refused"], "planted": False,
                    "by_b": ["refused", "refused", "refused"], "mine": "([], False)", "left": []}, seen


@pytest.mark.timeout(200)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_cell_rolled_back_twice_in_a_row_comes_back_to_the_state_before_it_and_leaves_no_copy(
        user: str, work: Path) -> None:
    """Its checkpoint's reserve (a copy forked while the cell ran) holds the state from before the cell,
    never the cell's; one the cell killed is replaced by a fork at the takeover. Afterwards the sandbox
    holds its keeper, the session process, its checkpoint and that one's reserve: no old copy, no zombie."""
    seen = attack("reserve_copies", user, work)
    assert seen["first"] == seen["second"] == "timeout" and seen["rolled"] == [True, True], seen
    assert seen["killed"] == "1" and seen["after"] == "1", seen
    assert "Z" not in seen["states"] and len(ast.literal_eval(seen["states"])) <= 4, seen
