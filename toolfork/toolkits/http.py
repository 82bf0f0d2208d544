"""The one small HTTP client every web toolkit (Tavily, Jina, Supadata, Zep) goes through.

Why one client: timeouts, retries, key handling and error wording are where integrations usually go
wrong, and a model can only act on an error it can read. Keeping them in one place means every web
tool times out, retries and fails the same way, and a credential never reaches an output or a log.

Rules it enforces:

- The API key is resolved at call time (argument first, then the environment variable), so a toolkit
  can be built and listed without a key; a missing key is a ``MissingKeyError`` naming the variable.
- Only what cannot do a thing twice is retried. A 5xx is retried for an idempotent request: GET,
  HEAD, PUT, DELETE, OPTIONS, or a request the toolkit marks ``idempotent=True`` (a search sent as a
  POST); a 5xx to any other POST may come after the server acted (stored a memory), so it is an
  error at once. 429 (the server refused the request without acting on it) and connection failures
  (nothing was sent) are retried for every request; read timeouts for none, because the server may
  still be acting on the request and a retry would multiply the wait.
- Retries back off exponentially with jitter (``RetryPolicy.jitter``: by default a wait is drawn
  between half and all of ``backoff * 2**n``, from the OS's random source), so forked workers that
  failed together do not retry in lockstep. A ``Retry-After`` header wins over the computed delay,
  and one longer than ``RetryPolicy.max_delay`` ends the retries at once rather than blocking a
  worker for minutes.
- Redirects are not followed: a custom key header (``x-api-key``) would be forwarded to whatever host
  the redirect names.
- Every failure becomes a ``ServiceError`` whose message names the service, the HTTP status and the
  server's own explanation, with the key scrubbed out. It is raised ``from None`` so no httpx request
  object (which holds the key in its headers) hangs off the exception chain.
- Requests go through one pooled ``httpx.Client`` per process (``_client.shared_client``), built
  after fork in the worker that uses it and never inherited across ``fork()``: a new client per call
  cost ~20 ms (its SSL context) and a new connection; timeout and headers are per request, so every
  toolkit instance shares the process's pool.
- httpx (the ``web`` extra) is imported on the first request, so ``toolfork.toolkits`` imports and
  lists every toolkit without it; a call without it is an error output saying what to install.
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ._client import shared_client

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger("toolfork.toolkits.http")

__all__ = [
    "IDEMPOTENT_METHODS",
    "HttpClient",
    "MissingKeyError",
    "RetryPolicy",
    "Secret",
    "ServiceError",
    "clip",
    "is_http_url",
]

_USER_AGENT = "toolfork (+https://github.com/toolfork/toolfork)"
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
# Not the ``random`` module's generator: forked workers inherit its state unless the fork reseeds it,
# and identical draws would put them back in lockstep.
_JITTER = random.SystemRandom()
_SNIPPET = 300  # characters of a server's error body worth showing to a model


class Secret:
    """A credential that does not show itself in ``repr``/``str``, so printing a toolkit is safe."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __getstate__(self) -> str:
        return self._value

    def __setstate__(self, state: str) -> None:
        self._value = state


class ServiceError(Exception):
    """An expected failure talking to a web service; ``str()`` is safe to show to a model."""

    def __init__(self, message: str, *, service: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.service = service
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments need help to cross a process boundary intact.
        return (_rebuild_error, (type(self), self.message, self.service, self.status))


def _rebuild_error(cls: type[ServiceError], message: str, service: str, status: int | None) -> ServiceError:
    return cls(message, service=service, status=status)


class MissingKeyError(ServiceError):
    """No API key was given and its environment variable is unset."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to retry a 429/5xx or a refused connection.

    ``retries`` is the number of extra attempts (so 2 means up to 3 requests); the n-th retry waits
    ``d = backoff * 2**n`` seconds (capped at ``max_delay``) less a random part of up to
    ``jitter * d`` (``jitter=0``: exactly ``d``), unless the server sent ``Retry-After``.
    """

    retries: int = 2
    backoff: float = 0.5
    max_delay: float = 30.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"RetryPolicy.retries must be >= 0, got {self.retries}")
        if self.backoff < 0 or not math.isfinite(self.backoff):
            raise ValueError(f"RetryPolicy.backoff must be a finite number >= 0, got {self.backoff}")
        if self.max_delay < 0:
            raise ValueError(f"RetryPolicy.max_delay must be >= 0, got {self.max_delay}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"RetryPolicy.jitter must be between 0 and 1, got {self.jitter}")

    def delay(self, retry_index: int, retry_after: float | None) -> float | None:
        """Seconds to wait before retry number ``retry_index`` (0-based); None means give up now."""
        if retry_after is not None:
            return retry_after if retry_after <= self.max_delay else None
        full = min(self.backoff * (2**retry_index), self.max_delay)
        return full - full * self.jitter * _JITTER.random() if self.jitter else full


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP-date); None when absent or junk."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when is None:  # pragma: no cover - older Pythons returned None instead of raising
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def clip(text: str, limit: int | None) -> str:
    """Cut ``text`` to ``limit`` characters with a visible marker, so a model knows it saw a part."""
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f"\n[... truncated {len(text) - limit} characters]"


def is_http_url(value: str) -> bool:
    """True for an absolute http(s) URL with a host: the only thing worth sending to a reader."""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc) and " " not in value.strip()


def _redact(text: str, key: str | None) -> str:
    if key and len(key) >= 4:
        return text.replace(key, "[redacted]")
    return text


def _server_message(response: httpx.Response) -> str:
    """The service's own explanation from an error body, whatever its JSON shape."""
    try:
        body: Any = response.json()
    except ValueError:
        text = response.text.strip()
        return " ".join(text.split())[:_SNIPPET] if text else response.reason_phrase
    message = next(
        (c.strip() for c in _message_candidates(body) if isinstance(c, str) and c.strip()),
        str(body) if body not in (None, "", {}) else response.reason_phrase,
    )
    details = body.get("details") if isinstance(body, dict) else None
    if isinstance(details, str) and details.strip() and details.strip() not in message:
        message = f"{message}: {details.strip()}"  # Supadata: a short title plus the specifics
    return message[:_SNIPPET]


def _message_candidates(body: Any) -> list[Any]:
    # Shapes seen in the wild: Tavily {"detail": {"error": ...}}, FastAPI {"detail": "..."} or
    # {"detail": [{"msg": ...}]}, Jina {"readableMessage", "message"}, Supadata {"error", "message",
    # "details"}, Zep {"message"}.
    if isinstance(body, str):
        return [body]
    if not isinstance(body, dict):
        return []
    out: list[Any] = []
    detail = body.get("detail")
    if isinstance(detail, dict):
        out += [detail.get("error"), detail.get("message")]
    elif isinstance(detail, list) and detail and isinstance(detail[0], dict):
        out.append("; ".join(str(d.get("msg", d)) for d in detail))
    else:
        out.append(detail)
    out += [body.get("readableMessage"), body.get("message")]
    error = body.get("error")
    if isinstance(error, dict):
        out += [error.get("message")]
    out += [error, body.get("title")]
    return out


class HttpClient:
    """JSON-over-HTTP calls to one service with its key, timeout and retry policy.

    ``auth_scheme`` is the word before the key in ``auth_header`` ("Bearer" for Tavily and Jina,
    "Api-Key" for Zep) or None to send the bare key (Supadata's ``x-api-key``).
    """

    def __init__(
        self,
        service: str,
        base_url: str,
        *,
        api_key: str | None = None,
        env_var: str | None = None,
        auth_header: str = "Authorization",
        auth_scheme: str | None = "Bearer",
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        owner: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not is_http_url(base_url):
            raise ValueError(f"{service}: base_url must be an absolute http(s) URL, got {base_url!r}")
        if not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"{service}: timeout must be a positive number of seconds, got {timeout!r}")
        self.service = service
        self.base_url = base_url.rstrip("/")
        self.env_var = env_var
        self.auth_header = auth_header
        self.auth_scheme = auth_scheme
        self.timeout = float(timeout)
        self.retry = retry if retry is not None else RetryPolicy()
        self.headers = dict(headers or {})
        self.owner = owner or service
        self._api_key = Secret(api_key) if api_key else None
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"HttpClient(service={self.service!r}, base_url={self.base_url!r}, timeout={self.timeout:g})"

    # -- key -----------------------------------------------------------------------------------------

    def api_key(self) -> str | None:
        """The key to use now: the constructor's, else the environment's (read at call time)."""
        if self._api_key is not None:
            return self._api_key.reveal()
        if self.env_var:
            value = os.environ.get(self.env_var, "").strip()
            return value or None
        return None

    def _missing_key(self) -> MissingKeyError:
        where = f"set the {self.env_var} environment variable or " if self.env_var else ""
        return MissingKeyError(
            f"{self.service} needs an API key: {where}pass api_key=... to {self.owner}.",
            service=self.service,
        )

    # -- request -------------------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return self.base_url + "/" + path.lstrip("/") if path else self.base_url + "/"

    def request(
        self,
        method: str,
        path: str = "",
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        require_key: bool = True,
        idempotent: bool | None = None,
    ) -> Any:
        """Send one request (with retries) and return the decoded JSON body.

        ``idempotent``: whether sending the request twice does no more than sending it once, which
        allows retrying it after a 5xx; by default true for GET, HEAD, PUT, DELETE and OPTIONS only.
        Raises ``ServiceError`` (or ``MissingKeyError``) for every expected failure.
        """
        method = method.upper()
        if idempotent is None:
            idempotent = method in IDEMPOTENT_METHODS
        key = self.api_key()
        if key is None and require_key:
            raise self._missing_key()
        send_headers = {"Accept": "application/json", "User-Agent": _USER_AGENT, **self.headers}
        send_headers.update(headers or {})
        if key is not None:
            send_headers[self.auth_header] = f"{self.auth_scheme} {key}" if self.auth_scheme else key
        query = {k: _query_value(v) for k, v in (params or {}).items() if v is not None}
        url = self.url(path)
        where = f"{method} {urlsplit(url).path or '/'}"
        attempts = self.retry.retries + 1

        try:
            import httpx
        except ImportError:
            raise ServiceError(
                f"{self.service} tools need httpx: pip install 'toolfork[web]'", service=self.service
            ) from None

        client = shared_client()
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = client.request(
                    method, url, json=json, params=query, headers=send_headers, timeout=self.timeout
                )
            except httpx.ConnectError as exc:
                # Nothing reached the server, so retrying cannot duplicate a write.
                if not last:
                    self._pause(attempt, None, where, f"connection failed ({type(exc).__name__})")
                    continue
                raise self._error(
                    f"could not connect to {self.service} at {urlsplit(url).netloc} "
                    f"after {attempt + 1} attempt(s): {exc}",
                    key,
                ) from None
            except httpx.TimeoutException as exc:
                phase = _timeout_phase(exc)
                if isinstance(exc, httpx.ConnectTimeout) and not last:
                    self._pause(attempt, None, where, "connect timeout")
                    continue
                raise self._error(
                    f"{self.service} did not answer within {self.timeout:g} s ({phase}); "
                    "the service may be overloaded, try again later or with a smaller request.",
                    key,
                ) from None
            except httpx.RemoteProtocolError as exc:
                # A pooled keep-alive connection the server had just closed: the request may
                # not have been read, but only a request that is safe to repeat is sent again.
                if idempotent and not last:
                    self._pause(attempt, 0.0, where, f"connection dropped ({exc})")
                    continue
                caveat = "" if idempotent else (
                    "; not retried, because the request may have taken effect (check before trying again)")
                raise self._error(
                    f"{self.service} closed the connection without an answer ({exc}){caveat}.", key
                ) from None
            except httpx.HTTPError as exc:
                raise self._error(f"{self.service} request failed ({type(exc).__name__}): {exc}", key) from None

            status = response.status_code
            logger.debug("%s %s -> HTTP %d (attempt %d)", self.service, where, status, attempt + 1)
            if status == 429 or 500 <= status <= 599:
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
                unsafe = status != 429 and not idempotent  # the server may have acted on it
                if not last and not unsafe:
                    wait = self.retry.delay(attempt, retry_after)
                    if wait is not None:
                        self._pause(attempt, wait, where, f"HTTP {status}")
                        continue
                raise self._status_error(response, key, attempt + 1, retry_after, not_retried=unsafe and not last)
            if status >= 300:
                raise self._status_error(response, key, attempt + 1, None)
            return self._decode(response, key)
        raise AssertionError("unreachable")  # pragma: no cover

    def _pause(self, attempt: int, wait: float | None, where: str, reason: str) -> None:
        if wait is None:
            wait = self.retry.delay(attempt, None) or 0.0
        logger.warning(
            "%s %s: %s; retry %d/%d in %.2f s",
            self.service,
            where,
            reason,
            attempt + 1,
            self.retry.retries,
            wait,
        )
        if wait > 0:
            self._sleep(wait)

    # -- results and errors --------------------------------------------------------------------------

    def _error(self, message: str, key: str | None, status: int | None = None) -> ServiceError:
        return ServiceError(_redact(message, key), service=self.service, status=status)

    def _decode(self, response: httpx.Response, key: str | None) -> Any:
        if not response.content.strip():
            return None
        try:
            return response.json()
        except ValueError:
            snippet = " ".join(response.text.split())[:120]
            ctype = response.headers.get("content-type", "no content-type")
            raise self._error(
                f"{self.service} returned a response that is not valid JSON "
                f"(HTTP {response.status_code}, {ctype}): {snippet!r}",
                key,
                response.status_code,
            ) from None

    def _status_error(
        self, response: httpx.Response, key: str | None, attempts: int, retry_after: float | None,
        *, not_retried: bool = False,
    ) -> ServiceError:
        status = response.status_code
        detail = _server_message(response)
        said = f"HTTP {status}: {detail}"
        if status == 401:
            where = f"the {self.env_var} environment variable or " if self.env_var else ""
            message = f"{self.service} refused the API key ({said}). Check {where}the api_key argument."
        elif status == 403:
            message = (
                f"{self.service} refused access ({said}); the API key may not be allowed to use this "
                "endpoint or its plan limit is used up."
            )
        elif status == 429:
            wait = f"; the service asks to wait {retry_after:g} s" if retry_after is not None else ""
            message = f"{self.service} rate limit reached ({said}) after {attempts} attempt(s){wait}. Try again later."
        elif status >= 500 and not_retried:
            message = (f"{self.service} server error ({said}); not retried, because the request may "
                       "have taken effect before the error (check before trying again).")
        elif status >= 500:
            message = f"{self.service} server error ({said}) after {attempts} attempt(s). Try again later."
        elif 300 <= status < 400:
            location = response.headers.get("location", "?")
            message = f"{self.service} answered with an unexpected redirect (HTTP {status} to {location})."
        elif status == 404:
            message = f"{self.service} found nothing there ({said})."
        else:
            message = f"{self.service} rejected the request ({said})."
        return self._error(message, key, status)


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _timeout_phase(exc: httpx.TimeoutException) -> str:
    import httpx

    if isinstance(exc, httpx.ConnectTimeout):
        return "connect timeout"
    if isinstance(exc, httpx.ReadTimeout):
        return "read timeout"
    if isinstance(exc, httpx.WriteTimeout):
        return "write timeout"
    return "timeout"
