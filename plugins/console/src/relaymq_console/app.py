"""The console's ASGI application (Starlette): pages, /api/v1, /metrics, ActiveMQ's
monitoring endpoints and static assets, with security headers on every response;
requests a browser makes for another site are refused first (`request_guard`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relaymq_console import compat, metrics
from relaymq_console.access import Access, Denied
from relaymq_console.api import Api
from relaymq_console.bridges_api import BridgesApi
from relaymq_console.config import ConsoleConfig
from relaymq_console.link_pages import LinkPages
from relaymq_console.pages import Pages
from relaymq_console.request_guard import RequestGuard

SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + SECURITY_HEADERS
            await send(message)

        await self.app(scope, receive, with_headers)


def build_app(broker: Any, config: ConsoleConfig) -> tuple[ASGIApp, Access]:
    started = time.monotonic()
    access = Access(broker, config)
    api = Api(broker, access, started)
    bridges = BridgesApi(broker, access, api)
    pages = Pages(broker, access, started, secure=bool(config.tls_cert_file), totals=api.totals)
    queue_lines = metrics.QueueLines()

    async def metrics_endpoint(request: Request) -> Response:
        try:
            await access.check(request, admin=False)
        except Denied as exc:
            return PlainTextResponse(exc.message, status_code=exc.status,
                                     headers={"www-authenticate": 'Basic realm="relaymq"',
                                              **exc.headers})
        return PlainTextResponse(await metrics.render(broker, started, queue_lines),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    async def queues_jsp(request: Request) -> Response:
        try:
            user = await access.check(request, admin=False)
        except Denied as exc:
            return PlainTextResponse(exc.message, status_code=exc.status, headers=exc.headers)
        return Response(await compat.queues_xml(broker, access.visible(user)),
                        media_type="application/xml")

    async def jolokia(request: Request) -> Response:
        try:
            user = await access.check(request, admin=False)
        except Denied as exc:
            return JSONResponse({"status": exc.status, "error": exc.message},
                                status_code=exc.status, headers=exc.headers)
        mbean, _, attribute = request.path_params["path"].rpartition("/")
        return JSONResponse(await compat.jolokia_read(broker, mbean, attribute,
                                                      config.jmx_domain_name or compat.DOMAIN,
                                                      access.visible(user)))

    routes = [
        Route("/metrics", metrics_endpoint),
        Route("/admin/xml/queues.jsp", queues_jsp),
        Route("/api/jolokia/read/{path:path}", jolokia),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static")),
        *api.routes(),
        *bridges.routes(),
        *LinkPages(broker, pages).routes(),
        *pages.routes(),
    ]
    async def http_error(request: Request, exc: Exception) -> Response:
        """Unmatched paths and methods: JSON under /api/, text elsewhere."""
        assert isinstance(exc, HTTPException)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code,
                                headers=exc.headers)
        return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error})
    return SecurityHeaders(RequestGuard(app, access, config)), access
