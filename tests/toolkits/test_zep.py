"""ZepMemoryToolkit against a local server speaking Zep Cloud's (api/v2) wire format."""

from __future__ import annotations

import json

import pytest

from tests.toolkits.fakeservers import FakeZep, Reply
from tests.toolkits.helpers import FAST, call
from toolfork.toolkits.zep import ZepMemoryToolkit
from toolfork.tools import ToolInputError


@pytest.fixture
def server():
    with FakeZep() as s:
        yield s


def make(server: FakeZep, user_id: str | None = "user-42") -> ZepMemoryToolkit:
    return ZepMemoryToolkit(user_id, server.api_key, base_url=server.url + "/api/v2", retry=FAST)


def test_definitions():
    tk = ZepMemoryToolkit()
    assert [t.name for t in tk.tools()] == ["zep_add_memory", "zep_search_memory"]
    schema = tk.tools()[0].to_json_schema()
    assert "user_id" not in schema["properties"]  # the model cannot pick whose memory it touches
    assert "zep_search_memory" in (tk.guidelines() or "")


def test_first_add_creates_the_user_then_stores_the_fact(server):
    tk = make(server)
    out = call(tk, "zep_add_memory", content="Ana prefers aisle seats on long flights")
    assert not out.is_error, out.as_text()
    calls = [(r.method, r.path) for r in server.requests]
    assert calls == [
        ("GET", "/api/v2/users/user-42"),
        ("POST", "/api/v2/users"),
        ("POST", "/api/v2/graph"),
    ]
    assert server.requests[1].json == {"user_id": "user-42"}
    assert server.requests[2].json == {
        "user_id": "user-42",
        "type": "text",
        "data": "Ana prefers aisle seats on long flights",
    }
    assert all(r.headers["authorization"] == f"Api-Key {server.api_key}" for r in server.requests)
    assert out.data["stored"] is True
    assert out.data["episode_uuid"] == server.episodes["user-42"][0]["uuid"]

    # The user is known now: the next add goes straight to the graph.
    server.requests.clear()
    assert not call(tk, "zep_add_memory", content="Ana lives in Lisbon").is_error
    assert [(r.method, r.path) for r in server.requests] == [("POST", "/api/v2/graph")]


def test_existing_user_is_not_recreated(server):
    server.users["user-42"] = {"user_id": "user-42", "uuid": "u-1"}
    assert not call(make(server), "zep_add_memory", content="x y z").is_error
    assert [(r.method, r.path) for r in server.requests] == [
        ("GET", "/api/v2/users/user-42"),
        ("POST", "/api/v2/graph"),
    ]


def test_user_created_concurrently_elsewhere_is_fine(server):
    # GET says 404, but by the time we POST another worker has created the user.
    server.script(Reply(404, {"message": "not found"}), Reply(400, {"message": "user user-42 already exists"}))
    server.users["user-42"] = {"user_id": "user-42", "uuid": "u-1"}
    out = call(make(server), "zep_add_memory", content="fact")
    assert not out.is_error, out.as_text()


def test_user_id_with_slashes_is_escaped_in_the_path(server):
    assert not call(make(server, "team/a b"), "zep_add_memory", content="hello").is_error
    assert server.requests[0].path == "/api/v2/users/team/a b"  # the fake unquotes; the wire had %2F
    assert "team/a b" in server.users


def test_search_facts_and_entities(server):
    tk = make(server)
    for fact in ["Ana prefers aisle seats", "Ana lives in Lisbon", "The cat is named Miso"]:
        assert not call(tk, "zep_add_memory", content=fact).is_error
    out = call(tk, "zep_search_memory", query="where Ana lives", limit=2)
    assert not out.is_error, out.as_text()
    assert server.last().json == {
        "user_id": "user-42",
        "query": "where Ana lives",
        "scope": "edges",
        "limit": 2,
    }
    facts = out.data["facts"]
    assert [f["fact"] for f in facts] == ["Ana lives in Lisbon", "Ana prefers aisle seats"]
    assert set(facts[0]) == {"fact", "valid_at", "invalid_at", "created_at"}

    out = call(tk, "zep_search_memory", query="who is Miso", scope="entities")
    assert server.last().json["scope"] == "nodes"
    assert out.data == {"entities": [{"name": "Miso", "summary": "Mentioned in: The cat is named Miso"}]}


def test_search_before_anything_was_stored_is_empty_not_an_error(server):
    out = call(make(server, "nobody"), "zep_search_memory", query="anything")
    assert not out.is_error
    assert out.data == {"facts": []}
    assert "nobody" not in server.users  # reading does not create users


def test_add_input_checks(server):
    tk = make(server)
    out = call(tk, "zep_add_memory", content=" ")
    assert out.is_error and "content must not be empty" in out.as_text()
    out = call(tk, "zep_add_memory", content="x" * 10_001)
    assert out.is_error and "10001 characters; Zep accepts at most 10000" in out.as_text()
    out = call(tk, "zep_add_memory", content="{not json", kind="json")
    assert out.is_error and "not valid JSON" in out.as_text()
    with pytest.raises(ToolInputError, match="kind"):
        call(tk, "zep_add_memory", content="x", kind="yaml")
    with pytest.raises(ToolInputError, match="limit"):
        call(tk, "zep_search_memory", query="x", limit=51)
    assert server.requests == []


def test_json_and_message_kinds_are_sent_as_such(server):
    tk = make(server)
    doc = json.dumps({"plan": "pro", "seats": 3})
    assert not call(tk, "zep_add_memory", content=doc, kind="json").is_error
    assert server.last().json["type"] == "json"
    assert not call(tk, "zep_add_memory", content="Ana (user): I moved", kind="message").is_error
    assert server.last().json["type"] == "message"


def test_missing_user_or_key(server, monkeypatch):
    out = call(make(server, None), "zep_add_memory", content="x")
    assert out.is_error and "pass user_id=" in out.as_text()
    monkeypatch.delenv("ZEP_API_KEY", raising=False)
    tk = ZepMemoryToolkit("u1", base_url=server.url + "/api/v2")
    out = call(tk, "zep_search_memory", query="x")
    assert out.is_error and "ZEP_API_KEY" in out.as_text()
    assert server.requests == []
    with pytest.raises(ValueError, match="user_id must be a non-empty string"):
        ZepMemoryToolkit("  ")


def test_server_errors_other_than_404_on_user_lookup_are_reported(server):
    server.script(Reply(403, {"message": "project is read-only"}))
    out = call(make(server), "zep_add_memory", content="x")
    assert out.is_error
    assert out.as_text().startswith("Zep refused access (HTTP 403: project is read-only)")
    assert len(server.requests) == 1
