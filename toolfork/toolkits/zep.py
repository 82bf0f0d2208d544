"""Long-term memory for one user in Zep Cloud's knowledge graph (https://help.getzep.com).

Endpoints (Zep Cloud API, ``/api/v2``): ``GET/POST /users`` to make sure the user exists,
``POST /graph`` to add data to the user's graph, ``POST /graph/search`` to find facts (edges) or
entities (nodes); the key goes in ``Authorization: Api-Key <key>``.

The user id is fixed at construction, not a tool argument: a model must not be able to read or write
another user's memory by naming them.

Options: ``{"zep_search_memory": {"reranker": "mmr", "mmr_lambda": 0.5, ...}, "zep_add_memory":
{"source_description": "support chat"}}``, Zep's request fields under their own names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import quote

from pydantic import Field

from toolfork.tools import Tool, Toolkit, ToolOutput

from ._options import OptionError, WebOptions, integer, number, one_of, string
from .http import HttpClient, RetryPolicy, ServiceError

__all__ = ["ZepMemoryToolkit"]

DEFAULT_BASE_URL = "https://api.getzep.com/api/v2"
ENV_VAR = "ZEP_API_KEY"
MAX_DATA_CHARS = 10_000  # Zep's limit for one graph.add call


class ZepMemoryToolkit(WebOptions, Toolkit):
    """Tools: ``zep_add_memory``, ``zep_search_memory``, both scoped to ``user_id``.

    The user is created in Zep on the first write if it does not exist yet. The key comes from
    ``api_key`` or ``ZEP_API_KEY`` at call time; a missing key or user id is an error output.

    ``options``: ``zep_search_memory`` takes ``scope`` and ``limit`` (its parameters: fixed, or
    with ``Default(value)`` their defaults),
    ``reranker``, ``mmr_lambda`` (with the "mmr" reranker), ``center_node_uuid`` (needed by the
    "node_distance" reranker), ``min_score`` and ``min_fact_rating``; ``zep_add_memory`` takes
    ``kind`` (its parameter) and ``source_description``. Checked here: a bad one raises
    ``OptionError`` naming it.
    """

    name = "zep"
    OPTIONS = {
        "zep_search_memory": {
            "scope": one_of("facts", "entities"),
            "limit": integer(1, 50),
            "reranker": one_of("rrf", "mmr", "node_distance", "episode_mentions", "cross_encoder"),
            "mmr_lambda": number(0, 1),
            "center_node_uuid": string,
            "min_score": number(0, 1),
            "min_fact_rating": number(0, 1),
        },
        "zep_add_memory": {
            "kind": one_of("text", "json", "message"),
            "source_description": string,
        },
    }
    PARAMETERS = {"zep_search_memory": ("scope", "limit"), "zep_add_memory": ("kind",)}

    def __init__(
        self,
        user_id: str | None = None,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self._init_options(options)
        if user_id is not None and (not isinstance(user_id, str) or not user_id.strip()):
            raise ValueError(f"user_id must be a non-empty string, got {user_id!r}")
        self.user_id = user_id
        self.http = HttpClient(
            "Zep",
            base_url,
            api_key=api_key,
            env_var=ENV_VAR,
            auth_scheme="Api-Key",
            timeout=timeout,
            retry=retry,
            owner="ZepMemoryToolkit",
        )
        self._known_users: set[str] = set()

    def guidelines(self) -> str | None:
        return (
            "You have long-term memory about this user. Before answering questions that depend on "
            "their preferences, history or circumstances, call zep_search_memory. When the user tells "
            "you something worth remembering (a preference, a fact about them, a decision), store it "
            "with zep_add_memory as one short, self-contained statement."
        )

    def check_options(self, options: Mapping[str, Mapping[str, Any]]) -> None:
        search = options.get("zep_search_memory", {})
        reranker = search.get("reranker")
        if "mmr_lambda" in search and reranker != "mmr":
            raise self.option_error("zep_search_memory", "mmr_lambda", search["mmr_lambda"],
                                    f"only applies with reranker='mmr' (reranker is {reranker!r})")
        if reranker == "node_distance" and "center_node_uuid" not in search:
            raise OptionError("ZepMemoryToolkit: option 'reranker' of zep_search_memory is 'node_distance', "
                              "which needs the option 'center_node_uuid' (the node to measure from)")

    def ensure_user(self) -> None:
        """Create the user in Zep unless it exists; remembered per process so it runs once."""
        user_id = self.user_id
        assert user_id is not None
        if user_id in self._known_users:
            return
        try:
            self.http.request("GET", f"users/{quote(user_id, safe='')}")
        except ServiceError as exc:
            if exc.status != 404:
                raise
            try:
                # A second create of the same user is refused as existing (handled below): safe to retry.
                self.http.request("POST", "users", json={"user_id": user_id}, idempotent=True)
            except ServiceError as create_exc:
                # Another worker may have created it between our GET and POST.
                if not (create_exc.status in (400, 409) and "exist" in str(create_exc).lower()):
                    raise
        self._known_users.add(user_id)

    def provide(self) -> list[Tool]:
        toolkit = self
        http = self.http
        search_extra = self.request_options("zep_search_memory")
        add_extra = self.request_options("zep_add_memory")

        def no_user() -> ToolOutput | None:
            if toolkit.user_id is None:
                return ToolOutput.error("ZepMemoryToolkit has no user: pass user_id=... when creating it")
            return None

        @self.option_tool("zep_add_memory")
        def zep_add_memory(content: str, kind: Literal["text", "json", "message"] = "text") -> ToolOutput:
            """Store information about the user in long-term memory, for later conversations.

            Args:
                content: what to remember, e.g. "Prefers aisle seats on flights"; at most 10000
                    characters
                kind: "text" for a statement, "json" for a JSON document, "message" for a chat line
                    such as "Alice (user): I moved to Lisbon"
            """
            missing = no_user()
            if missing is not None:
                return missing
            if not content.strip():
                return ToolOutput.error("content must not be empty")
            if len(content) > MAX_DATA_CHARS:
                return ToolOutput.error(
                    f"content is {len(content)} characters; Zep accepts at most {MAX_DATA_CHARS} per call, "
                    "so store it in smaller pieces"
                )
            if kind == "json":
                try:
                    json.loads(content)
                except ValueError as exc:
                    return ToolOutput.error(f"kind is 'json' but content is not valid JSON: {exc}")
            try:
                toolkit.ensure_user()
                episode = http.request(
                    "POST", "graph", json={**add_extra, "user_id": toolkit.user_id, "type": kind, "data": content}
                )
            except ServiceError as exc:
                return ToolOutput.error(str(exc))
            episode_id = episode.get("uuid") if isinstance(episode, dict) else None
            return ToolOutput.from_value({"stored": True, "episode_uuid": episode_id})

        @self.option_tool("zep_search_memory")
        def zep_search_memory(
            query: str,
            scope: Literal["facts", "entities"] = "facts",
            limit: Annotated[int, Field(ge=1, le=50)] = 5,
        ) -> ToolOutput:
            """Search the user's long-term memory for facts or entities relevant to a question.

            Args:
                query: what you want to know about the user, in plain language
                scope: "facts" for statements with the time they became true or stopped being true,
                    "entities" for people, places and things with a summary
                limit: the most results to return, 1 to 50
            """
            missing = no_user()
            if missing is not None:
                return missing
            if not query.strip():
                return ToolOutput.error("query must not be empty")
            body = {
                **search_extra,
                "user_id": toolkit.user_id,
                "query": query,
                "scope": "edges" if scope == "facts" else "nodes",
                "limit": limit,
            }
            try:
                data = http.request("POST", "graph/search", json=body, idempotent=True)  # only reads
            except ServiceError as exc:
                if exc.status == 404:  # no such user yet: nothing has been remembered
                    return ToolOutput.from_value({scope: []})
                return ToolOutput.error(str(exc))
            if not isinstance(data, dict):
                return ToolOutput.error(f"Zep search returned {type(data).__name__} instead of a JSON object")
            if scope == "facts":
                return ToolOutput.from_value(
                    {"facts": [_fact(e) for e in data.get("edges") or [] if isinstance(e, dict)]}
                )
            return ToolOutput.from_value(
                {
                    "entities": [
                        {"name": n.get("name"), "summary": n.get("summary")}
                        for n in data.get("nodes") or []
                        if isinstance(n, dict)
                    ]
                }
            )

        return [zep_add_memory, zep_search_memory]


def _fact(edge: dict[str, Any]) -> dict[str, Any]:
    return {
        "fact": edge.get("fact"),
        "valid_at": edge.get("valid_at"),
        "invalid_at": edge.get("invalid_at"),
        "created_at": edge.get("created_at"),
    }
