"""`/api/v1/bridges`: the broker's JMS-style bridges (relaymq-bridge), listed with
their state and counts, started, stopped, paused and resumed by name.

relaymq-bridge keeps its bridges in ``broker.extensions["bridges"]`` (a manager
with ``list()``, ``get(name)``, ``start``, ``stop``, ``pause``, ``resume``); without
that plugin the list is empty and a name is a 404."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from relaymq_console.access import Access
from relaymq_console.api import Api, ApiError
from relaymq_console.views import plain

ACTIONS = ("start", "stop", "pause", "resume")


class BridgesApi:
    def __init__(self, broker: Any, access: Access, api: Api) -> None:
        self.broker = broker
        self.access = access
        self.api = api

    def routes(self) -> list[Route]:
        return [
            Route("/api/v1/bridges", self.list),
            Route("/api/v1/bridges/{name}", self.status),
            Route("/api/v1/bridges/{name}/{action}", self.act, methods=["POST"]),
        ]

    @property
    def manager(self) -> Any:
        return self.broker.extensions.get("bridges")

    def _bridge(self, name: str) -> Any:
        manager = self.manager
        if manager is None:
            raise ApiError(404, f"no bridge named {name!r}; this broker has no bridges "
                                "(relaymq-bridge is not installed or none is configured)")
        try:
            return manager.get(name)
        except KeyError as exc:
            raise ApiError(404, str(exc.args[0]) if exc.args else f"no bridge {name!r}") from None

    async def list(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            await self.access.check(req, admin=False)
            manager = self.manager
            return {"items": plain(manager.list()) if manager is not None else []}
        return await self.api.call(request, go)

    async def status(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            await self.access.check(req, admin=False)
            return plain(self._bridge(req.path_params["name"]).info())
        return await self.api.call(request, go)

    async def act(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            user = await self.access.check(req, admin=True)
            name, action = req.path_params["name"], req.path_params["action"]
            if action not in ACTIONS:
                raise ApiError(404, f"unknown action '{action}' ({', '.join(ACTIONS)})")
            bridge = self._bridge(name)
            result = getattr(bridge, action)()
            if result is not None:  # start and stop are coroutines, pause and resume not
                await result
            self.access.audit(user, f"bridge-{action}", name, req)
            return plain(bridge.info())
        return await self.api.call(request, go)
