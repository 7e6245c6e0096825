"""The REST API under /api/v1: everything the web UI does, as JSON."""

from __future__ import annotations

import math
import time
from typing import Any

from relaymq import __version__
from relaymq.errors import DestinationError, DestinationNameError, RelayMQError, StateConflict
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from relaymq.plugins import QUEUE_TYPES
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from relaymq_console import relocation
from relaymq_console.access import Access, Denied
from relaymq_console.journal import journal_of
from relaymq_console.journal import summary as journal_summary
from relaymq_console.links import link_figures
from relaymq_console.listing import BrokerTotals, queue_page
from relaymq_console.openapi import openapi_document
from relaymq_console.views import (
    connections_seen,
    message_view,
    page_of,
    plain,
    visible_only,
)


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


#: a queue's sub-resources and the methods they take: `DELETE /queues/q/purge` is a
#: wrong method on `purge`, not the queue named "q/purge"
SUB_RESOURCES = {"messages": "GET, POST", "purge": "POST", "pause": "POST", "resume": "POST",
                 "move": "POST", "copy": "POST", "remove": "POST", "retry": "POST"}


async def _body(request: Request, required: bool = False) -> dict[str, Any]:
    if not request.headers.get("content-type", "").startswith("application/json"):
        if required:
            raise ApiError(400, "send a JSON object (Content-Type: application/json)")
        return {}
    try:
        data = await request.json()
    except ValueError:
        raise ApiError(400, "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


def _int(request: Request, name: str, default: int, low: int = 0, high: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"query parameter '{name}' must be an integer, not {raw!r}") from None
    if value < low or (high is not None and value > high):
        limits = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ApiError(400, f"query parameter '{name}' must be {limits}, not {value}")
    return value


def _listing_args(request: Request) -> dict[str, Any]:
    q = request.query_params
    if q.get("sort") == "":
        raise ApiError(400, "query parameter 'sort' is empty (give a field, '-field' descending)")
    return {"filter_text": q.get("filter"), "sort": q.get("sort"),
            "page": _int(request, "page", 1, 1), "size": _int(request, "size", 100, 1, 1000)}


def _ids_or_selector(data: dict[str, Any]) -> dict[str, Any]:
    ids, selector = data.get("message_ids"), data.get("selector")
    if ids is None and selector is None:
        raise ApiError(400, "give message_ids (a list) or a selector")
    if "message_ids" in data and not (isinstance(ids, list)
                                      and all(isinstance(i, str) for i in ids)):
        raise ApiError(400, "message_ids must be a list of strings")
    if "selector" in data and not isinstance(selector, str):
        raise ApiError(400, "selector must be a string")
    return {"message_ids": ids, "selector": selector}


def _queue_named(name: str) -> Destination:
    """A queue as management names it: a bare name, or a `queue://` key."""
    return Destination.parse(name) if "://" in name else Destination.queue(name)


class Api:
    """Route handlers; each checks access, calls the management API, answers JSON."""

    def __init__(self, broker: Any, access: Access, started: float,
                 totals: BrokerTotals | None = None) -> None:
        self.broker = broker
        self.m = broker.management
        self.access = access
        self.started = started
        self.totals = totals or BrokerTotals()

    def routes(self) -> list[Route]:
        r = Route
        return [
            r("/api/v1/openapi.json", self.openapi),
            r("/api/v1/broker", self.broker_info),
            r("/api/v1/queues", self.queues, methods=["GET", "POST"]),
            r("/api/v1/topics", self.topics),
            r("/api/v1/topics/{name:path}", self.delete_topic, methods=["DELETE"]),
            r("/api/v1/queues/{name:path}/messages", self.messages, methods=["GET", "POST"]),
            r("/api/v1/queues/{name:path}/purge", self.purge, methods=["POST"]),
            r("/api/v1/queues/{name:path}/pause", self.pause, methods=["POST"]),
            r("/api/v1/queues/{name:path}/resume", self.resume, methods=["POST"]),
            r("/api/v1/queues/{name:path}/move", self.move, methods=["POST"]),
            r("/api/v1/queues/{name:path}/copy", self.copy, methods=["POST"]),
            r("/api/v1/queues/{name:path}/remove", self.remove, methods=["POST"]),
            r("/api/v1/queues/{name:path}/retry", self.retry, methods=["POST"]),
            r("/api/v1/queues/{name:path}", self.queue, methods=["GET", "DELETE"]),
            r("/api/v1/connections", self.connections),
            r("/api/v1/connections/{cid:path}", self.close_connection, methods=["DELETE"]),
            r("/api/v1/subscriptions", self.subscriptions),
            r("/api/v1/subscriptions/{client_id}/{name:path}", self.delete_subscription,
              methods=["DELETE"]),
            r("/api/v1/broker-connections", self.broker_connections),
            r("/api/v1/incoming-broker-connections", self.incoming_broker_connections),
            r("/api/v1/broker-connections/{name}/{action}", self.broker_connection_action,
              methods=["POST"]),
        ]

    async def call(self, request: Request, handler: Any) -> JSONResponse:
        try:
            return JSONResponse(await handler(request))
        except Denied as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.status,
                                headers=exc.headers)
        except ApiError as exc:
            return JSONResponse({"error": exc.message}, status_code=exc.status,
                                headers=exc.headers)
        except DestinationNameError as exc:  # a name the broker cannot create: bad input
            return JSONResponse({"error": str(exc)}, status_code=400)
        except DestinationError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except StateConflict as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        except (RelayMQError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

    # -- reading --------------------------------------------------------------------
    async def openapi(self, request: Request) -> JSONResponse:
        return JSONResponse(openapi_document(self.broker.plugins.names(QUEUE_TYPES)))

    async def broker_info(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            await self.access.check(req, admin=False)
            return broker_summary(self.broker, self.started, self.totals)
        return await self.call(request, go)

    async def queues(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            if req.method == "POST":
                user = await self.access.check(req, admin=True)
                data = await _body(req, required=True)
                name = data.get("name")
                if not isinstance(name, str) or not name:
                    raise ApiError(400, "give the queue's name")
                queue_type = data.get("queue_type")
                if queue_type is not None and not isinstance(queue_type, str):
                    raise ApiError(400, "queue_type must be a string")
                self.access.authorize(user, "create", _queue_named(name), req)
                # a bad name or type is a ValueError (400), another type a StateConflict (409)
                info = await self.m.create_queue(name, queue_type)
                self.access.audit(user, "create", Destination.queue(name), req)
                return plain(info)
            user = await self.access.check(req, admin=False)
            return await queue_page(self.m, **_listing_args(req),
                                    visible=self.access.visible(user))
        return await self.call(request, go)

    async def topics(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            user = await self.access.check(req, admin=False)
            topics = visible_only(await self.m.destinations("topic"), self.access.visible(user))
            return page_of(topics, **_listing_args(req))
        return await self.call(request, go)

    async def delete_topic(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            user = await self.access.check(req, admin=True)
            dest = Destination.topic(req.path_params["name"])
            self.access.authorize(user, "delete", dest, req)
            if not await self.m.delete_destination(dest):
                raise ApiError(404, f"no topic named {dest.name!r}")
            self.access.audit(user, "delete", dest, req)
            return {"deleted": True}
        return await self.call(request, go)

    async def queue(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            name = req.path_params["name"]
            sub = name.rpartition("/")[2]
            if "/" in name and sub in SUB_RESOURCES:
                raise ApiError(405, f"{req.method} is not allowed on {sub} "
                                    f"(allowed: {SUB_RESOURCES[sub]})",
                               {"allow": SUB_RESOURCES[sub]})
            dest = Destination.queue(name)
            if req.method == "DELETE":
                user = await self.access.check(req, admin=True)
                self.access.authorize(user, "delete", dest, req)
                if not await self.m.delete_destination(dest):
                    raise ApiError(404, f"no queue named {dest.name!r}")
                self.access.audit(user, "delete", dest, req)
                return {"deleted": True}
            self.access.check_view(await self.access.check(req, admin=False), dest, req)
            info = await self.m.destination(dest)
            out = plain(info)
            out["consumer_list"] = plain(self.m.consumers(dest))
            partitions = getattr(self.m.queue(dest), "owners", None)
            if partitions is not None:
                out["partitions"] = [getattr(c, "name", None) or (str(c.id) if c else None)
                                     for c in partitions]
            return out
        return await self.call(request, go)

    async def messages(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            dest = Destination.queue(req.path_params["name"])
            if req.method == "POST":
                user = await self.access.check(req, admin=True)
                data = await _body(req, required=True)
                body = data.get("body", "")
                props = data.get("properties", {})
                persistent = data.get("persistent", False)
                if not isinstance(body, str) or not isinstance(props, dict) \
                        or not isinstance(persistent, bool):
                    raise ApiError(400, "body must be a string, properties an object and "
                                        "persistent true or false")
                if dest.is_wildcard or dest.is_composite:
                    raise ApiError(400, f"{dest.name!r}: send to one queue, not a wildcard or "
                                        "several")
                for key, value in props.items():
                    if not isinstance(value, (str, int, float, bool)):
                        raise ApiError(400, f"property {key!r} must be a string, number or "
                                            "boolean")
                    if isinstance(value, float) and not math.isfinite(value):
                        raise ApiError(400, f"property {key!r}: {value} is not a number a "
                                            "message can carry")
                    if isinstance(value, int) and not isinstance(value, bool) \
                            and not -2**63 <= value < 2**63:
                        raise ApiError(400, f"property {key!r}: {value} does not fit in 64 bits")
                self.access.authorize(user, "send", dest, req)
                msg = Message(body.encode(), destination=dest,
                              durable=persistent, properties=props)
                await self.broker.internal_connection().send(msg)
                self.access.audit(user, "send", dest, req)
                return {"sent": True}
            self.access.authorize(await self.access.check(req, admin=False), "browse", dest, req)
            page = await self.m.browse(dest, after=_int(req, "after", 0),
                                       limit=_int(req, "limit", 100, 1, 1000),
                                       selector=req.query_params.get("selector"))
            return {"messages": [message_view(m) for m in page.messages],
                    "next_after": page.next_after, "done": page.done}
        return await self.call(request, go)

    def _admin_action(self, operation: str, action: Any, body: bool = False) -> Any:
        async def handler(request: Request) -> JSONResponse:
            async def go(req: Request) -> Any:
                user = await self.access.check(req, admin=True)
                dest = Destination.queue(req.path_params["name"])
                data = await _body(req, required=body)
                self.access.authorize(user, operation, dest, req,
                                      to=self._to(data) if operation in ("move", "copy") else None)
                result = await action(dest, data)
                self.access.audit(user, operation, dest, req)
                return result
            return await self.call(request, go)
        return handler

    async def purge(self, request: Request) -> JSONResponse:
        async def act(dest: Destination, data: dict[str, Any]) -> Any:
            return {"removed": await self.m.purge(dest)}
        return await self._admin_action("purge", act)(request)

    async def pause(self, request: Request) -> JSONResponse:
        async def act(dest: Destination, data: dict[str, Any]) -> Any:
            self.m.pause(dest)
            return {"paused": True}
        return await self._admin_action("pause", act)(request)

    async def resume(self, request: Request) -> JSONResponse:
        async def act(dest: Destination, data: dict[str, Any]) -> Any:
            self.m.resume(dest)
            return {"paused": False}
        return await self._admin_action("resume", act)(request)

    def _to(self, data: dict[str, Any]) -> Destination:
        to = data.get("to")
        if not isinstance(to, str) or not to:
            raise ApiError(400, "give the target queue as 'to'")
        return Destination.parse(to) if "://" in to else Destination.queue(to)

    async def move(self, request: Request) -> JSONResponse:
        async def act(dest: Destination, data: dict[str, Any]) -> Any:
            return await relocation.move(self.m, dest, self._to(data), _ids_or_selector(data))
        return await self._admin_action("move", act, body=True)(request)

    async def copy(self, request: Request) -> JSONResponse:
        async def act(dest: Destination, data: dict[str, Any]) -> Any:
            return await relocation.copy(self.m, dest, self._to(data), _ids_or_selector(data))
        return await self._admin_action("copy", act, body=True)(request)

    async def remove(self, request: Request) -> JSONResponse:
        async def act(dest: Destination, data: dict[str, Any]) -> Any:
            return {"removed": await self.m.remove_messages(dest, **_ids_or_selector(data))}
        return await self._admin_action("remove", act, body=True)(request)

    async def retry(self, request: Request) -> JSONResponse:
        """Each message goes back only where the map lets the user send (the answer
        counts and explains the refused ones, which stay in the DLQ)."""
        async def go(req: Request) -> Any:
            user = await self.access.check(req, admin=True)
            dest = Destination.queue(req.path_params["name"])
            data = await _body(req, required=True)
            self.access.authorize(user, "retry", dest, req)
            result = await relocation.retry(self.access, user, self.m, dest, req,
                                            _ids_or_selector(data))
            self.access.audit(user, "retry", dest, req)
            return result
        return await self.call(request, go)

    async def connections(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            user = await self.access.check(req, admin=False)
            return {"items": plain(connections_seen(self.m.connections(), user.name,
                                                    self.access.visible(user)))}
        return await self.call(request, go)

    async def close_connection(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            user = await self.access.check(req, admin=True)
            cid = req.path_params["cid"]
            closed = await self.m.close_connection(cid, "closed by the console")
            if not closed:
                raise ApiError(404, f"no connection {cid}")
            self.access.audit(user, "close-connection", cid, req)
            return {"closed": True}
        return await self.call(request, go)

    async def subscriptions(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            user = await self.access.check(req, admin=False)
            return {"items": plain(visible_only(self.m.durable_subscriptions(),
                                                self.access.visible(user), "topic"))}
        return await self.call(request, go)

    async def delete_subscription(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            user = await self.access.check(req, admin=True)
            client_id, name = req.path_params["client_id"], req.path_params["name"]
            info = self.m.durable_subscription(client_id, name)
            if info is None:
                raise ApiError(404, f"no durable subscription {name!r} of {client_id!r}")
            self.access.authorize(user, "delete-subscription", Destination.parse(info.topic), req)
            try:
                deleted = await self.m.delete_durable_subscription(client_id, name)
            except DestinationError as exc:  # a consumer is attached
                raise ApiError(409, str(exc)) from None
            self.access.audit(user, "delete-subscription", f"{client_id}:{name}", req)
            return {"deleted": deleted}
        return await self.call(request, go)

    async def broker_connections(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            await self.access.check(req, admin=False)
            items = []
            for info in self.m.broker_connections():
                row, fig = plain(info), link_figures(info)
                row.update(up=fig.up, lag_seconds=fig.lag_seconds, pending=fig.pending)
                items.append(row)
            return {"items": items}
        return await self.call(request, go)

    async def incoming_broker_connections(self, request: Request) -> JSONResponse:
        """Broker connections other brokers opened to this one (a mirror's sources)."""
        async def go(req: Request) -> Any:
            await self.access.check(req, admin=False)
            return {"items": [plain(info) for info in self.m.incoming_broker_connections()]}
        return await self.call(request, go)

    async def broker_connection_action(self, request: Request) -> JSONResponse:
        async def go(req: Request) -> Any:
            user = await self.access.check(req, admin=True)
            name, action = req.path_params["name"], req.path_params["action"]
            result: Any = None
            if action == "start":
                await self.m.start_broker_connection(name)
            elif action == "stop":
                await self.m.stop_broker_connection(name)
            elif action == "sync":  # relaymq-mirror: copy the current state to the target
                result = await self.m.broker_connection_operation(name, "sync")
            else:
                raise ApiError(404, f"unknown action '{action}' (start, stop, sync)")
            self.access.audit(user, action, name, req)
            out: dict[str, Any] = {"name": name, "action": action}
            if result is not None:
                out["result"] = result
            return out
        return await self.call(request, go)


def broker_summary(broker: Any, started: float, totals: BrokerTotals) -> dict[str, Any]:
    """The dashboard's figures; polled every second by an open dashboard, so it reads
    the live counters (`BrokerTotals`) rather than every queue's full statistics."""
    m = broker.management
    t = totals.sample(m)
    usage = broker.usage
    return {
        "name": broker.name,
        "version": __version__,
        "uptime_seconds": round(time.monotonic() - started, 1),
        "connections": len(m.connections()),
        "queues": t.queues,
        "messages": t.messages,
        "enqueue_rate": t.enqueue_rate,
        "dequeue_rate": t.dequeue_rate,
        "memory_used": usage.memory.used,
        "memory_limit": usage.memory.limit,
        "store_used": m.store_size(),
        "store_limit": m.store_limit(),
        **journal_summary(journal_of(broker)),
        "plugins": sorted({type(s).__module__.split(".")[0] for s in broker.services}),
    }
