"""Per-instance toolkit options (issue 12): validated at construction, per instance, on the wire.

Every wire check runs against the local server that speaks the service's format; the fakes refuse a
field the service does not document, so a misspelt option would fail here.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.toolkits.fakeservers import FakeJinaReader, FakeJinaSearch, FakeSupadata, FakeTavily, FakeZep
from tests.toolkits.helpers import FAST, call
from toolfork.toolkits import (
    Default,
    JinaToolkit,
    OptionError,
    SESTool,
    SupadataYouTubeToolkit,
    TavilyToolkit,
    ZepMemoryToolkit,
)
from toolfork.tools import ToolInputError, Toolkit


@pytest.fixture
def tavily() -> Iterator[FakeTavily]:
    with FakeTavily() as server:
        yield server


def _tavily(server: FakeTavily, **kw: Any) -> TavilyToolkit:
    return TavilyToolkit(server.api_key, base_url=server.url, retry=FAST, **kw)


def _schema(toolkit: Toolkit, tool: str) -> dict[str, Any]:
    return {t.name: t for t in toolkit.tools()}[tool].to_json_schema()


def _default(toolkit: Toolkit, tool: str, param: str) -> Any:
    return _schema(toolkit, tool)["properties"][param].get("default")


SEARCH_OPTIONS: dict[str, Any] = {
    "search_depth": "advanced",  # a tool parameter: fixed, out of the model's reach
    "max_results": Default(2),  # a tool parameter: only its default
    "chunks_per_source": 2,
    "include_domains": ["arxiv.org", "nature.com"],
    "exclude_domains": ["pinterest.com"],
    "include_answer": "advanced",
    "include_raw_content": "markdown",
    "include_images": True,
    "include_favicon": True,
    "country": "united states",
    "start_date": "2024-01-01",
    "end_date": "2024-12-31",
}


def test_tavily_options_reach_the_wire_and_the_output(tavily):
    toolkit = _tavily(
        tavily,
        max_page_chars=500,
        options={
            "tavily_search": SEARCH_OPTIONS,
            "tavily_extract": {"extract_depth": "advanced", "format": "text", "timeout": 30, "include_images": False},
            "tavily_crawl": {"limit": 3, "max_breadth": 10, "select_paths": ["/docs/.*"], "allow_external": False},
        },
    )
    out = call(toolkit, "tavily_search", query="protein folding")
    assert not out.is_error, out.as_text()
    assert tavily.last().json == {**SEARCH_OPTIONS, "max_results": 2, "query": "protein folding", "topic": "general"}
    assert [r["url"].split("/")[2] for r in out.data["results"]] == ["arxiv.org", "nature.com"]
    first = out.data["results"][0]
    assert first["favicon"] == "https://arxiv.org/favicon.ico"
    assert first["raw_content"] == "Full page 1 about protein folding."
    assert out.data["images"] == ["https://img.example.com/protein-folding.png"]

    # A fixed parameter leaves the schema (and the description's Args); a Default one shows its default.
    search = {t.name: t for t in toolkit.tools()}["tavily_search"]
    schema = search.to_json_schema()
    assert sorted(schema["properties"]) == ["max_results", "query", "time_range", "topic"]
    assert schema["properties"]["max_results"]["default"] == 2 and schema["required"] == ["query"]
    assert "search_depth" not in search.to_string() and "advanced" not in search.description
    assert not call(toolkit, "tavily_search", query="x", max_results=4).is_error
    assert (tavily.last().json["max_results"], tavily.last().json["search_depth"]) == (4, "advanced")
    assert tavily.last().json["include_domains"] == ["arxiv.org", "nature.com"]  # the fixed ones stay
    sent = len(tavily.requests)
    with pytest.raises(ToolInputError, match="search_depth"):
        call(toolkit, "tavily_search", query="x", search_depth="basic")
    assert len(tavily.requests) == sent

    assert not call(toolkit, "tavily_extract", urls=["https://a.example.com/"]).is_error
    assert tavily.last().json == {
        "urls": ["https://a.example.com/"], "extract_depth": "advanced", "format": "text", "timeout": 30,
        "include_images": False,
    }
    out = call(toolkit, "tavily_crawl", url="https://site.example.com")
    assert tavily.last().json == {
        "url": "https://site.example.com", "max_depth": 1, "limit": 3, "max_breadth": 10,
        "select_paths": ["/docs/.*"], "allow_external": False,
    }
    assert len(out.data["pages"]) == 3


def test_instances_never_share_options(tavily):
    given = {"tavily_search": {"search_depth": "advanced", "include_domains": ["arxiv.org"]}}
    advanced = _tavily(tavily, options=given)
    plain = _tavily(tavily)
    handed_out = {t.name: t for t in advanced.tools()}  # tools given to an agent before the change
    wider = advanced.with_options("tavily_search", max_results=Default(7), include_domains=["nature.com"])
    given["tavily_search"]["search_depth"] = "basic"  # the caller's dicts and lists are copied
    given["tavily_search"]["include_domains"].append("evil.example")

    assert type(wider) is TavilyToolkit and wider is not advanced
    assert advanced.options == {"tavily_search": {"search_depth": "advanced", "include_domains": ("arxiv.org",)}}
    assert wider.options["tavily_search"] == {
        "search_depth": "advanced", "include_domains": ("nature.com",), "max_results": Default(7),
    }
    assert plain.options == {}
    with pytest.raises(TypeError):
        advanced.options["tavily_search"]["search_depth"] = "basic"  # type: ignore[index]
    copied = pickle.loads(pickle.dumps(wider))  # toolkits cross process boundaries as before
    assert copied.options == wider.options and copied.options is not wider.options

    sent = {}
    for label, tool in [
        ("plain", plain.tools()[0]),
        ("advanced", advanced.tools()[0]),
        ("handed_out", handed_out["tavily_search"]),
        ("wider", wider.tools()[0]),
    ]:
        assert not tool.invoke({"query": "q"}).is_error
        body = tavily.last().json
        sent[label] = (body["search_depth"], body["max_results"], body.get("include_domains"))
    assert sent == {
        "plain": ("basic", 5, None),
        "advanced": ("advanced", 5, ["arxiv.org"]),
        "handed_out": ("advanced", 5, ["arxiv.org"]),
        "wider": ("advanced", 7, ["nature.com"]),
    }
    # Schema defaults belong to each instance; a fresh toolkit has the class defaults.
    assert [_default(t, "tavily_search", "max_results") for t in (plain, advanced, wider)] == [5, 5, 7]
    assert [("search_depth" in _schema(t, "tavily_search")["properties"]) for t in (plain, advanced, wider)] == [
        True, False, False,
    ]
    assert _default(TavilyToolkit(), "tavily_search", "search_depth") == "basic"


def test_with_options_keeps_filters_and_leaves_the_original_alone(tavily):
    narrowed = _tavily(tavily).only(["tavily_search", "tavily_extract"]).exclude(["tavily_extract"])
    before = narrowed.tools()
    clone = narrowed.with_options("tavily_extract", format="text").with_options("tavily_search", topic="news")
    assert [t.name for t in clone.tools()] == ["tavily_search"]
    assert narrowed.tools() == before and narrowed.options == {}
    assert "topic" not in _schema(clone, "tavily_search")["properties"]
    assert "topic" in _schema(narrowed, "tavily_search")["properties"]
    emptied = clone.exclude(["tavily_search"])  # filters return a new toolkit: neither source changes
    assert emptied.tools() == [] and emptied.options == clone.options
    assert [t.name for t in clone.tools()] == ["tavily_search"]
    assert [t.name for t in narrowed.tools()] == ["tavily_search"]
    assert clone.http is narrowed.http  # settings are shared read-only; the HTTP pool is per process


def test_jina_options_travel_as_headers_and_body():
    with FakeJinaSearch() as search, FakeJinaReader() as reader:
        toolkit = JinaToolkit(
            search.api_key, search_url=search.url, reader_url=reader.url, retry=FAST,
            options={
                "jina_search": {"num": 3, "site": "docs.python.org", "gl": "us", "hl": "en", "no_cache": True},
                "jina_read_url": {
                    "return_format": "text", "target_selector": "main article", "with_links_summary": True,
                    "with_images_summary": False, "engine": "direct", "token_budget": 5000, "timeout": 20,
                    "locale": "en-US", "retain_images": "none",
                },
            },
        )
        out = call(toolkit, "jina_search", query="asyncio")
        assert not out.is_error, out.as_text()
        req = search.last()
        assert req.json == {"q": "asyncio", "num": 3, "gl": "us", "hl": "en"}
        assert (req.headers["x-site"], req.headers["x-no-cache"]) == ("docs.python.org", "true")
        assert [r["url"] for r in out.data["results"]] == [f"https://docs.python.org/search/{i}" for i in (1, 2, 3)]

        out = call(toolkit, "jina_read_url", url="https://docs.python.org/3/")
        assert not out.is_error, out.as_text()
        headers = reader.last().headers
        assert {k: v for k, v in headers.items() if k.startswith("x-")} == {
            "x-return-format": "text", "x-target-selector": "main article", "x-with-links-summary": "true",
            "x-engine": "direct", "x-token-budget": "5000", "x-timeout": "20", "x-locale": "en-US",
            "x-retain-images": "none",
        }  # with_images_summary=False sends nothing
        assert out.data["content"].startswith("[main article] Page at")
        assert out.data["links"] == {"Home": "https://docs.python.org/"}
        assert "images" not in out.data


def test_supadata_transcript_options():
    with FakeSupadata() as server:
        toolkit = SupadataYouTubeToolkit(
            server.api_key, base_url=server.url + "/v1", retry=FAST,
            options={"youtube_transcript": {"lang": "es", "timestamps": True, "chunk_size": 300}},
        )
        out = call(toolkit, "youtube_transcript", video=FakeSupadata.VIDEO_ID)
        assert not out.is_error, out.as_text()
        assert server.last().query == {
            "videoId": FakeSupadata.VIDEO_ID, "lang": "es", "text": "false", "chunkSize": "300",
        }
        assert out.data["transcript"] == "[00:18] Nunca te voy a abandonar"
        assert sorted(_schema(toolkit, "youtube_transcript")["properties"]) == ["video"]
        relaxed = toolkit.with_options("youtube_transcript", lang=Default("en"), timestamps=Default(False))
        assert _default(relaxed, "youtube_transcript", "lang") == "en"
        out = call(relaxed, "youtube_transcript", video=FakeSupadata.VIDEO_ID, lang="es")
        assert out.data["transcript"] == "Nunca te voy a abandonar"  # timestamps default False: plain text


def test_zep_options():
    with FakeZep() as server:
        toolkit = ZepMemoryToolkit(
            "ana", server.api_key, base_url=server.url + "/api/v2", retry=FAST,
            options={
                "zep_add_memory": {"source_description": "support chat", "kind": "message"},
                "zep_search_memory": {"reranker": "mmr", "mmr_lambda": 0.3, "min_score": 0.2, "limit": 2},
            },
        )
        assert not call(toolkit, "zep_add_memory", content="Ana (user): I moved to Lisbon").is_error
        assert server.last().json == {
            "user_id": "ana", "type": "message", "data": "Ana (user): I moved to Lisbon",
            "source_description": "support chat",
        }
        assert server.episodes["ana"][0]["source_description"] == "support chat"
        out = call(toolkit, "zep_search_memory", query="where does Ana live")
        assert not out.is_error, out.as_text()
        assert server.last().json == {
            "user_id": "ana", "query": "where does Ana live", "scope": "edges", "limit": 2,
            "reranker": "mmr", "mmr_lambda": 0.3, "min_score": 0.2,
        }


def test_ses_options_reach_the_request(monkeypatch, tmp_path):
    for var, value in {
        "AWS_ACCESS_KEY_ID": "AKIAMOTOTESTKEY00000", "AWS_SECRET_ACCESS_KEY": "moto-secret",
        "AWS_DEFAULT_REGION": "eu-west-1", "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(var, value)
    with mock_aws():
        client = boto3.client("sesv2", region_name="eu-west-1")
        client.create_email_identity(EmailIdentity="bot@example.com")
        sent: list[dict[str, Any]] = []

        def capture(params: dict[str, Any], **_: Any) -> None:
            sent.append(json.loads(params["body"]))  # the serialized request body, as it goes out

        client.meta.events.register("before-call.sesv2.SendEmail", capture)
        toolkit = SESTool("bot@example.com", client=client, options={"send_email": {
            "reply_to": ["help@example.com"], "tags": {"campaign": "q3-report"},
            "feedback_forwarding_address": "bounces@example.com",
        }})
        out = call(toolkit, "send_email", to=["ana@example.org"], subject="Hi", body="Text")
        assert not out.is_error, out.as_text()
    assert sent[0]["ReplyToAddresses"] == ["help@example.com"]
    assert sent[0]["EmailTags"] == [{"Name": "campaign", "Value": "q3-report"}]
    with pytest.raises(TypeError):
        toolkit.options["send_email"]["tags"]["campaign"] = "other"  # type: ignore[index]
    assert sent[0]["FeedbackForwardingEmailAddress"] == "bounces@example.com"


BAD: list[tuple[Callable[[Any], Toolkit], Any, str]] = [
    (lambda o: TavilyToolkit(options=o), {"tavily_serch": {}}, "options for unknown tool 'tavily_serch' "
     "(did you mean 'tavily_search'?)"),
    (lambda o: TavilyToolkit(options=o), {"tavily_search": {"max_result": 3}}, "unknown option 'max_result' "
     "for tavily_search (did you mean 'max_results'?)"),
    (lambda o: TavilyToolkit(options=o), {"tavily_search": {"search_depth": "deep"}},
     "option 'search_depth' of tavily_search must be one of 'basic', 'advanced', 'fast', 'ultra-fast', got 'deep'"),
    (lambda o: TavilyToolkit(options=o), {"tavily_search": {"max_results": 50}},
     "option 'max_results' of tavily_search must be an integer from 1 to 20, got 50"),
    (lambda o: TavilyToolkit(options=o), {"tavily_search": {"include_images": 1}},
     "option 'include_images' of tavily_search must be True or False, got 1"),
    (lambda o: TavilyToolkit(options=o), {"tavily_search": {"include_domains": "arxiv.org"}},
     "option 'include_domains' of tavily_search must be a non-empty list of domains"),
    (lambda o: TavilyToolkit(options=o), {"tavily_search": {"start_date": "2024-13-01"}},
     "option 'start_date' of tavily_search must be a date as YYYY-MM-DD"),
    (lambda o: TavilyToolkit(options=o), {"tavily_crawl": {"select_paths": ["/docs/(unclosed"]}},
     "option 'select_paths' of tavily_crawl item 0 ('/docs/(unclosed') is not a valid regular expression"),
    (lambda o: TavilyToolkit(options=o), {"tavily_search": "advanced"}, "the options of tavily_search must be a dict"),
    (lambda o: TavilyToolkit(options=o), ["tavily_search"], "options must map tool names to option dicts"),
    (lambda o: JinaToolkit(options=o), {"jina_search": {"gl": "USA"}},
     "option 'gl' of jina_search must be a two-letter lower-case country code"),
    (lambda o: JinaToolkit(options=o), {"jina_read_url": {"target_selector": "main\r\nX-Evil: 1"}},
     "option 'target_selector' of jina_read_url must be a single line"),
    (lambda o: SupadataYouTubeToolkit(options=o), {"youtube_video_metadata": {"lang": "en"}},
     "options for unknown tool 'youtube_video_metadata' (tools with options: youtube_transcript)"),
    (lambda o: SupadataYouTubeToolkit(options=o), {"youtube_transcript": {"lang": "English"}},
     "option 'lang' of youtube_transcript must be a language code"),
    (lambda o: ZepMemoryToolkit("u", options=o), {"zep_search_memory": {"mmr_lambda": 0.5}},
     "option 'mmr_lambda' of zep_search_memory only applies with reranker='mmr'"),
    (lambda o: ZepMemoryToolkit("u", options=o), {"zep_search_memory": {"reranker": "node_distance"}},
     "needs the option 'center_node_uuid'"),
    (lambda o: SESTool(options=o), {"send_email": {"reply_to": ["Ana <ana@example.org>"]}},
     "option 'reply_to' of send_email item 0 ('Ana <ana@example.org>') must be a plain email address"),
    (lambda o: TavilyToolkit(options=o), {"tavily_search": {"country": Default("france")}},
     "option 'country' of tavily_search is not a parameter of the tool, so it cannot be a Default"),
    (lambda o: TavilyToolkit(options=o), {"tavily_search": {"max_results": Default(0)}},
     "option 'max_results' of tavily_search must be an integer from 1 to 20, got 0"),
    (lambda o: SESTool(options=o), {"send_email": {"tags": {"campaign": "q3 report"}}},
     "option 'tags' of send_email entry 'campaign': 'q3 report' must be ASCII letters"),
]


@pytest.mark.parametrize(("make", "options", "message"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_options_fail_at_construction_naming_the_option(make, options, message):
    with pytest.raises(OptionError) as info:
        make(options)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_with_options_validates_and_leaves_the_original_alone():
    toolkit = TavilyToolkit(options={"tavily_search": {"max_results": 3}})
    with pytest.raises(OptionError, match=r"option 'topic' of tavily_search must be one of .*got 'sports'"):
        toolkit.with_options("tavily_search", topic="sports")
    with pytest.raises(OptionError, match="unknown option 'depth' for tavily_extract"):
        toolkit.with_options("tavily_extract", depth="advanced")
    assert toolkit.options == {"tavily_search": {"max_results": 3}}
