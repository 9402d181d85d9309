"""A small HTTP server on 127.0.0.1 that answers like Jaeger's query API (``/api/services``,
``/api/traces``), from traces in Jaeger's JSON format. It records the queries it got."""

from __future__ import annotations

import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.loopback_http import LoopbackServer, send_json


class FakeJaeger(LoopbackServer):
    def __init__(self, traces: list[dict[str, Any]]) -> None:
        super().__init__()
        self.traces = traces
        self.queries: list[tuple[str, dict[str, str]]] = []
        #: "ok", "http_error" (500 with Jaeger's error body), "not_json"
        self.mode = "ok"

    def handle(self, method: str, request: BaseHTTPRequestHandler) -> None:
        url = urllib.parse.urlsplit(request.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        self.queries.append((url.path, query))
        status, body = self.answer(url.path, query)
        send_json(request, status, body)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeJaeger:
        super().__enter__()
        return self

    def services(self) -> list[str]:
        names = {p["serviceName"] for trace in self.traces for p in trace["processes"].values()}
        return sorted(names | {"jaeger-all-in-one"})

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, Any]:
        if self.mode == "not_json":
            return 200, b"<html>not jaeger</html>"
        if self.mode == "http_error":
            return 500, {"data": None, "total": 0, "errors": [{"code": 500, "msg": "storage unavailable"}]}
        if path == "/api/services":
            names = self.services()
            return 200, {"data": names, "total": len(names), "limit": 0, "offset": 0, "errors": None}
        if path == "/api/traces":
            if not query.get("service"):
                return 400, {
                    "data": None,
                    "errors": [{"code": 400, "msg": "parameter 'service' is required"}],
                }
            start, end = int(query["start"]), int(query["end"])
            found = [
                trace
                for trace in self.traces
                if any(p["serviceName"] == query["service"] for p in trace["processes"].values())
                and any(start <= span["startTime"] <= end for span in trace["spans"])
            ][: int(query.get("limit", "100"))]
            return 200, {"data": found, "total": len(found), "limit": 0, "offset": 0, "errors": None}
        return 404, b"404 page not found\n"
