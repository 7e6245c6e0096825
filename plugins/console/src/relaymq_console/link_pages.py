"""The broker-connections page: broker connections (mirror, federation, bridges'
connectors ...) and relaymq-bridge's bridges, with start/stop (and pause/resume
for bridges) for admins, and the broker connections other brokers opened to this
one (a mirror's sources: `management.incoming_broker_connections()`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from relaymq.errors import RelayMQError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from relaymq_console.bridges_api import ACTIONS
from relaymq_console.links import link_figures
from relaymq_console.pages import Pages
from relaymq_console.views import plain


class LinkPages:
    def __init__(self, broker: Any, pages: Pages) -> None:
        self.broker = broker
        self.m = broker.management
        self.pages = pages

    def routes(self) -> list[Route]:
        return [
            Route("/broker-connections", self.show),
            Route("/broker-connections/{name}/{action}", self.connection_action,
                  methods=["POST"]),
            Route("/bridges/{name}/{action}", self.bridge_action, methods=["POST"]),
        ]

    async def show(self, request: Request) -> Response:
        user = await self.pages.user(request)
        if isinstance(user, Response):
            return user
        manager = self.broker.extensions.get("bridges")
        items = []
        for info in self.m.broker_connections():
            row = plain(info)
            fig = link_figures(info)
            row["lag_seconds"] = fig.lag_seconds
            row["lag"] = _lag_text(fig.lag_seconds)
            row["pending"] = fig.pending
            items.append(row)
        incoming = [_incoming_row(info) for info in self.m.incoming_broker_connections()]
        return self.pages.render("broker_connections.html", user, items=items,
                                 bridges=plain(manager.list()) if manager is not None else [],
                                 incoming=incoming, flash=request.query_params.get("flash"))

    def _back(self, flash: str) -> Response:
        return RedirectResponse(f"/broker-connections?flash={quote(flash)}", status_code=303)

    async def connection_action(self, request: Request) -> Response:
        user = await self.pages.user(request, admin=True)
        if isinstance(user, Response):
            return user
        name, action = request.path_params["name"], request.path_params["action"]
        try:
            if action == "start":
                await self.m.start_broker_connection(name)
            elif action == "stop":
                await self.m.stop_broker_connection(name)
            else:
                return self._back(f"unknown action {action!r} (start, stop)")
        except (RelayMQError, ValueError) as exc:
            return self._back(f"{action} {name} failed: {exc}")
        self.pages.access.audit(user, action, name, request)
        return self._back(f"{action}: {name}")

    async def bridge_action(self, request: Request) -> Response:
        user = await self.pages.user(request, admin=True)
        if isinstance(user, Response):
            return user
        name, action = request.path_params["name"], request.path_params["action"]
        manager = self.broker.extensions.get("bridges")
        if action not in ACTIONS:
            return self._back(f"unknown action {action!r} ({', '.join(ACTIONS)})")
        try:
            if manager is None:
                raise KeyError(f"no bridge named {name!r}")
            bridge = manager.get(name)
        except KeyError as exc:
            return self._back(str(exc.args[0]) if exc.args else f"no bridge {name!r}")
        result = getattr(bridge, action)()
        if result is not None:
            await result
        self.pages.access.audit(user, f"bridge-{action}", name, request)
        return self._back(f"bridge {name}: {bridge.info()['state']}")


def _lag_text(seconds: float | None) -> str:
    """A lag as people read it: `12 ms`, `1.53 s`; empty when none was measured."""
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


#: the counts and times of an incoming broker connection's `detail` the page shows,
#: in its columns' order (a plugin that reports fewer leaves those cells empty)
INCOMING_FIGURES = ("applied", "duplicates", "rejected", "acks_pending", "acks_not_found",
                    "last_event", "last_error", "since")


def _incoming_row(info: Any) -> dict[str, Any]:
    """One row of the incoming table: who (the source's node id, its connection's
    name), from where, whether connected, and the figures of its `detail`."""
    detail = plain(info.detail) or {}
    row = {"name": info.name, "kind": info.kind, "node": info.remote_node or info.name,
           "connection": detail.get("connection_name") or "",
           "remote_address": info.remote_address or "",
           "connected": "yes" if info.connected else "no"}
    for key in INCOMING_FIGURES:
        value = detail.get(key)
        row[key] = "" if value is None else value
    return row
