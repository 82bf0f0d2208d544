#!/usr/bin/env python
"""Per-call cost of a web toolkit request against a local server: a new httpx.Client per call (the
old HttpClient) against the per-process pooled client (toolkits/_client.py).

python bench/web_client.py                 # prints the table and writes bench/results/web_client.md
python bench/web_client.py --calls 2000

The server is a local HTTP/1.1 keep-alive server on 127.0.0.1 answering a Tavily-shaped search
result, so the figures are the client side's cost plus a small, constant server cost.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx

from toolfork.toolkits.http import HttpClient, RetryPolicy
from toolfork.toolkits.tavily import TavilyToolkit

KEY = "tvly-bench-key-0123456789"
BODY = json.dumps(
    {
        "query": "q",
        "answer": "An answer.",
        "images": [],
        "results": [
            {"title": f"t{i}", "url": f"https://example.com/{i}", "content": "c" * 200, "score": 0.5}
            for i in range(5)
        ],
    }
).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stall

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _time(fn: Callable[[], Any], calls: int) -> tuple[list[float], float]:
    """Wall time of each call, and this process's CPU time per call (the server runs elsewhere)."""
    for _ in range(min(20, calls)):  # warm-up: imports, first connection
        fn()
    out = []
    cpu = time.process_time()
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out, (time.process_time() - cpu) / calls


def _serve_in_child() -> tuple[int, int]:
    """Start the server in a forked process (so it takes no GIL or CPU time from the client's
    figures); returns (pid, port)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the server process
        try:
            httpd.serve_forever()
        finally:
            os._exit(0)
    port = int(httpd.server_address[1])
    httpd.server_close()  # the child keeps its copy of the listening socket
    return pid, port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args(argv)

    server_pid, port = _serve_in_child()
    url = f"http://127.0.0.1:{port}"
    body = {"query": "q", "topic": "general", "max_results": 5}
    headers = {"Authorization": f"Bearer {KEY}", "Accept": "application/json"}

    def fresh_client_per_call() -> Any:  # what HttpClient.request did before
        with httpx.Client(timeout=60.0, follow_redirects=False) as client:
            return client.request("POST", url + "/search", json=body, headers=headers).json()

    reused = httpx.Client(timeout=60.0, follow_redirects=False)

    def raw_reused_client() -> Any:  # the floor: one httpx.Client kept by the caller
        return reused.request("POST", url + "/search", json=body, headers=headers).json()

    http = HttpClient("Tavily", url, api_key=KEY, timeout=60.0, retry=RetryPolicy(retries=0))

    def pooled_http_client() -> Any:  # HttpClient.request now (per-process pooled client)
        return http.request("POST", "search", json=body, idempotent=True)

    search = {t.name: t for t in TavilyToolkit(KEY, base_url=url).tools()}["tavily_search"]

    def tool_call() -> Any:  # tavily_search.invoke: validation, request, result mapping
        out = search.invoke({"query": "q"})
        assert not out.is_error, out.as_text()
        return out

    rows = [
        ("new httpx.Client per call (before)", fresh_client_per_call),
        ("HttpClient.request, pooled client (after)", pooled_http_client),
        ("tavily_search.invoke, pooled client (after)", tool_call),
        ("one httpx.Client reused by the caller (floor)", raw_reused_client),
    ]
    results = []
    try:
        for label, fn in rows:
            times, cpu = _time(fn, args.calls)
            results.append((label, statistics.median(times) * 1e3, statistics.mean(times) * 1e3, cpu * 1e3))
    finally:
        reused.close()
        os.kill(server_pid, signal.SIGKILL)
        os.waitpid(server_pid, 0)

    before = results[0][1]
    lines = [
        "# Web toolkit per-call cost (local server)",
        "",
        f"One run, {args.calls} calls per row after 20 warm-up calls, against a local HTTP/1.1 keep-alive "
        f"server on 127.0.0.1 in another process (Python http.server; its response time is in the wall "
        f"figures, not in the client CPU column). Python {platform.python_version()}, httpx "
        f"{httpx.__version__}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end, "
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC. Produced by `python bench/web_client.py`.",
        "",
        "| path | median ms/call | mean ms/call | client CPU ms/call | median vs before |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, median, mean, cpu in results:
        ratio = "1x" if label == rows[0][0] else f"{before / median:.0f}x faster"
        lines.append(f"| {label} | {median:.3f} | {mean:.3f} | {cpu:.3f} | {ratio} |")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "web_client.md"), "w") as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
