"""The shared HTTP client of the web toolkits, against a real local HTTP server."""

from __future__ import annotations

import logging
import pickle
import socket
from datetime import datetime, timezone
from email.utils import format_datetime

import pytest

from tests.toolkits.fakeservers import FakeServer, Recorded, Reply
from toolfork.toolkits.http import (
    HttpClient,
    MissingKeyError,
    RetryPolicy,
    Secret,
    ServiceError,
    clip,
    is_http_url,
    parse_retry_after,
)

KEY = "sk-live-THISISTHESECRETKEY-0123456789"
ENV = "TOOLFORK_TEST_FAKE_API_KEY"


class Echo(FakeServer):
    """Answers every request with what it received (after any scripted replies)."""

    def handle(self, req: Recorded) -> Reply:
        return Reply(200, {"ok": True, "path": req.path, "query": req.query, "json": req.json})


@pytest.fixture
def server():
    with Echo() as s:
        yield s


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make(server: FakeServer, *, sleep=None, retry=None, timeout: float = 5.0, **kw) -> HttpClient:
    kw.setdefault("api_key", KEY)
    return HttpClient(
        "Fake",
        server.url,
        env_var=ENV,
        timeout=timeout,
        retry=retry or RetryPolicy(retries=2, backoff=0.01, max_delay=5),
        sleep=sleep if sleep is not None else Sleeps(),
        **kw,
    )


def test_sends_json_query_and_bearer_key(server):
    client = make(server)
    out = client.request("POST", "/v1/things", json={"a": 1}, params={"q": "x y", "flag": True, "none": None})
    assert out == {"ok": True, "path": "/v1/things", "query": {"q": "x y", "flag": "true"}, "json": {"a": 1}}
    req = server.last()
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.headers["accept"] == "application/json"
    assert "none" not in req.query


def test_custom_auth_header_without_scheme(server):
    make(server, auth_header="x-api-key", auth_scheme=None).request("GET", "x")
    assert server.last().headers["x-api-key"] == KEY
    assert "authorization" not in server.last().headers


def test_429_then_200_honours_retry_after(server):
    sleeps = Sleeps()
    server.script(Reply(429, {"message": "slow down"}, headers={"Retry-After": "2"}))
    out = make(server, sleep=sleeps).request("GET", "x")
    assert out["ok"] is True
    assert len(server.requests) == 2
    assert sleeps == [2.0]  # the server's Retry-After, not the 0.01 s backoff


def test_retry_after_as_http_date():
    now = datetime(2024, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    later = format_datetime(datetime(2024, 1, 1, 12, 0, 7, tzinfo=timezone.utc), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(7.0)
    assert parse_retry_after("3", now=0) == 3.0
    assert parse_retry_after("-5") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_5xx_backoff_is_exponential(server):
    sleeps = Sleeps()
    server.script(Reply(502, b"bad gateway", content_type="text/html"), Reply(503, {"message": "busy"}))
    out = make(server, sleep=sleeps, retry=RetryPolicy(retries=3, backoff=0.1, jitter=0)).request("GET", "x")
    assert out["ok"] is True
    assert sleeps == [pytest.approx(0.1), pytest.approx(0.2)]


def test_backoff_is_jittered_within_its_bounds():
    policy = RetryPolicy(retries=5, backoff=1.0, max_delay=3.0)  # default jitter: half of each delay
    first = [policy.delay(0, None) for _ in range(50)]
    third = [policy.delay(2, None) for _ in range(50)]  # 4 s capped at 3
    assert all(0.5 <= d <= 1.0 for d in first) and all(1.5 <= d <= 3.0 for d in third)
    assert len(set(first)) > 40  # drawn, not fixed
    assert policy.delay(0, 2.0) == 2.0  # the server's Retry-After is followed as it is
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=1.5)


def test_a_5xx_to_a_post_is_not_retried_unless_marked_idempotent(server):
    server.script(Reply(503, {"message": "hiccup"}))
    with pytest.raises(ServiceError) as info:
        make(server).request("POST", "write", json={"a": 1})
    assert len(server.requests) == 1  # the server may have stored it: never sent twice
    assert "not retried" in str(info.value) and "HTTP 503: hiccup" in str(info.value)
    server.script(Reply(503, {"message": "hiccup"}))
    assert make(server).request("POST", "search", json={"q": 1}, idempotent=True)["ok"] is True
    assert [r.path for r in server.requests[1:]] == ["/search", "/search"]
    server.script(Reply(429, {"message": "slow down"}, headers={"Retry-After": "0"}))
    assert make(server).request("POST", "write", json={"a": 2})["ok"] is True  # 429: it was not acted on
    assert len(server.requests) == 5
    server.script(Reply(502, {"message": "x"}))
    assert make(server).request("PUT", "thing", json={})["ok"] is True  # PUT is idempotent


def test_500_three_times_is_an_error_after_the_retries(server):
    server.script(*[Reply(500, {"message": "database exploded"})] * 3)
    with pytest.raises(ServiceError) as info:
        make(server).request("GET", "x")
    assert len(server.requests) == 3
    err = info.value
    assert err.status == 500
    assert "Fake server error (HTTP 500: database exploded) after 3 attempt(s)" in str(err)


def test_retry_after_beyond_max_delay_gives_up_at_once(server):
    sleeps = Sleeps()
    server.script(Reply(429, {"message": "quota"}, headers={"Retry-After": "3600"}))
    with pytest.raises(ServiceError) as info:
        make(server, sleep=sleeps).request("GET", "x")
    assert len(server.requests) == 1
    assert sleeps == []
    assert "rate limit reached (HTTP 429: quota) after 1 attempt(s)" in str(info.value)
    assert "wait 3600 s" in str(info.value)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            401,
            {"detail": {"error": "Unauthorized: missing or invalid API key."}},
            f"Fake refused the API key (HTTP 401: Unauthorized: missing or invalid API key.). Check the {ENV}",
        ),
        (403, {"message": "plan limit"}, "Fake refused access (HTTP 403: plan limit)"),
        (
            400,
            {"detail": [{"msg": "field required"}]},
            "Fake rejected the request (HTTP 400: field required)",
        ),
        (
            422,
            {"error": "invalid-request", "details": "url is malformed"},
            "HTTP 422: invalid-request: url is malformed",
        ),
        (404, "nothing here", "Fake found nothing there (HTTP 404: nothing here)"),
    ],
)
def test_client_errors_are_not_retried_and_carry_the_server_message(server, status, body, expected):
    server.script(Reply(status, body, content_type="application/json" if not isinstance(body, str) else "text/plain"))
    with pytest.raises(ServiceError) as info:
        make(server).request("POST", "x", json={})
    assert len(server.requests) == 1
    assert info.value.status == status
    assert expected in str(info.value)
    assert KEY not in str(info.value)


def test_key_echoed_by_the_server_is_redacted(server):
    server.script(Reply(401, {"message": f"bad key {KEY}"}))
    with pytest.raises(ServiceError) as info:
        make(server).request("GET", "x")
    assert KEY not in str(info.value)
    assert "[redacted]" in str(info.value)


def test_read_timeout_is_an_error_and_not_retried(server):
    server.script(Reply(200, {"late": True}, delay=10))
    with pytest.raises(ServiceError) as info:
        make(server, timeout=0.3).request("GET", "x")
    assert "Fake did not answer within 0.3 s (read timeout)" in str(info.value)
    assert len(server.requests) == 1


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    client = HttpClient(
        "Fake",
        f"http://127.0.0.1:{port}",
        api_key=KEY,
        sleep=sleeps,
        retry=RetryPolicy(retries=2, backoff=0.01),
    )
    with pytest.raises(ServiceError) as info:
        client.request("GET", "x")
    assert f"could not connect to Fake at 127.0.0.1:{port} after 3 attempt(s)" in str(info.value)
    assert len(sleeps) == 2


def test_malformed_json_is_an_error(server):
    server.script(Reply(200, b'{"results": [1, 2', content_type="application/json"))
    with pytest.raises(ServiceError) as info:
        make(server).request("GET", "x")
    assert "Fake returned a response that is not valid JSON (HTTP 200, application/json)" in str(info.value)


def test_redirect_is_not_followed(server):
    server.script(Reply(302, None, headers={"Location": "http://evil.example/steal"}))
    with pytest.raises(ServiceError) as info:
        make(server).request("GET", "x")
    assert "unexpected redirect (HTTP 302 to http://evil.example/steal)" in str(info.value)
    assert len(server.requests) == 1


def test_empty_body_is_none(server):
    server.script(Reply(204))
    assert make(server).request("DELETE", "x") is None


def test_missing_key_names_the_env_var_and_sends_nothing(server, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    client = make(server, api_key=None, owner="FakeToolkit")
    with pytest.raises(MissingKeyError) as info:
        client.request("GET", "x")
    assert (
        str(info.value)
        == f"Fake needs an API key: set the {ENV} environment variable or pass api_key=... to FakeToolkit."
    )
    assert server.requests == []
    # ... unless the endpoint works without one
    client.request("GET", "x", require_key=False)
    assert "authorization" not in server.last().headers


def test_key_is_read_from_the_environment_at_call_time(server, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    client = make(server, api_key=None)
    monkeypatch.setenv(ENV, "env-key-123456")
    client.request("GET", "x")
    assert server.last().headers["authorization"] == "Bearer env-key-123456"
    explicit = make(server, api_key="explicit-key-999")
    explicit.request("GET", "x")
    assert server.last().headers["authorization"] == "Bearer explicit-key-999"


def test_key_never_shows_in_repr_pickle_roundtrip_or_logs(server, caplog):
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log every request at DEBUG
    client = make(server)
    assert KEY not in repr(client) and KEY not in repr(vars(client))
    assert KEY not in repr(Secret(KEY)) and KEY not in str(Secret(KEY))
    clone = pickle.loads(pickle.dumps(client))  # toolkits cross into worker processes
    server.script(Reply(429, {"message": "wait"}, headers={"Retry-After": "0"}), Reply(500, {"message": "x"}))
    clone.request("POST", "x", json={"q": 1}, idempotent=True)
    with pytest.raises(ServiceError) as info:
        server.script(Reply(401, {"message": "nope"}))
        clone.request("GET", "y")
    err = pickle.loads(pickle.dumps(info.value))
    assert (type(err), err.status, str(err)) == (ServiceError, 401, str(info.value))
    assert caplog.records, "expected the client (and httpx) to log"
    assert any(r.name == "toolfork.toolkits.http" and r.levelno == logging.WARNING for r in caplog.records)
    for record in caplog.records:
        assert KEY not in record.getMessage()
    assert KEY not in caplog.text


def test_construction_validates_its_arguments():
    with pytest.raises(ValueError, match="base_url must be an absolute http"):
        HttpClient("Fake", "api.example.com")
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        HttpClient("Fake", "https://api.example.com", timeout=0)
    with pytest.raises(ValueError, match="retries must be >= 0"):
        RetryPolicy(retries=-1)
    with pytest.raises(ValueError, match="backoff must be a finite number"):
        RetryPolicy(backoff=float("nan"))


def test_clip_and_url_helpers():
    assert clip("abcdef", 4) == "abcd\n[... truncated 2 characters]"
    assert clip("abc", 4) == "abc"
    assert is_http_url("https://example.com/a?b=c")
    for bad in ("example.com", "ftp://example.com", "https://", "javascript:alert(1)", "http://a b.com"):
        assert not is_http_url(bad), bad


def test_without_httpx_a_call_says_what_to_install(server, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "httpx", None)  # as if the web extra were absent
    with pytest.raises(ServiceError, match=r"Fake tools need httpx: pip install 'toolfork\[web\]'"):
        make(server).request("GET", "x")
    assert server.requests == []
