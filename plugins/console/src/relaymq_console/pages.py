"""Server-rendered pages: login, dashboard, destinations, a queue, connections."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from relaymq.errors import DestinationError, RelayMQError
from relaymq.management.info import BrowsePage
from relaymq.model.destination import Destination
from relaymq.model.message import Message
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from relaymq_console import relocation
from relaymq_console.access import OPERATION_ACTIONS, Access, Denied, User
from relaymq_console.api import broker_summary
from relaymq_console.listing import BrokerTotals, queue_page
from relaymq_console.sessions import COOKIE
from relaymq_console.views import (
    connections_seen,
    message_view,
    page_of,
    plain,
    visible_only,
)

TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                        autoescape=select_autoescape(["html"]))
COLUMNS = [("name", "Name"), ("depth", "Depth"), ("consumers", "Consumers"),
           ("enqueued", "Enqueued"), ("dequeued", "Dequeued"), ("expired", "Expired"),
           ("dead_lettered", "DLQ"), ("in_flight", "In flight")]


class Pages:
    def __init__(self, broker: Any, access: Access, started: float, secure: bool,
                 totals: BrokerTotals | None = None) -> None:
        self.broker = broker
        self.totals = totals or BrokerTotals()
        self.m = broker.management
        self.access = access
        self.started = started
        self.secure = secure

    def routes(self) -> list[Route]:
        r = Route
        return [
            r("/", self.dashboard), r("/login", self.login, methods=["GET", "POST"]),
            r("/logout", self.logout, methods=["POST"]),
            r("/queues", self.queues), r("/topics", self.topics),
            r("/queues/create", self.create_queue, methods=["POST"]),
            r("/queues/{name:path}/{action}", self.queue_action, methods=["POST"]),
            r("/queues/{name:path}", self.queue),
            r("/connections", self.connections),
            r("/connections/{cid:path}/close", self.close_connection, methods=["POST"]),
            r("/subscriptions", self.subscriptions),
        ]

    def render(self, template: str, user: User | None, **values: Any) -> HTMLResponse:
        html = TEMPLATES.get_template(template).render(
            broker_name=self.broker.name, user=user, csrf=user.csrf if user else "", **values)
        return HTMLResponse(html)

    async def user(self, request: Request, admin: bool = False) -> User | Response:
        try:
            csrf = None
            if request.method == "POST":
                csrf = (await request.form()).get("csrf")
            return await self.access.check(request, admin=admin,
                                           csrf=csrf if isinstance(csrf, str) else None)
        except Denied as exc:
            if exc.status == 401:
                return RedirectResponse("/login", status_code=303)
            return HTMLResponse(f"<p>{_esc(exc.message)}</p>", status_code=exc.status,
                                headers=exc.headers)

    # -- login ----------------------------------------------------------------------
    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return self.render("login.html", None, error=None)
        form = await request.form()
        address = request.client.host if request.client else "?"
        try:
            token, _ = await self.access.login(str(form.get("username", "")),
                                               str(form.get("password", "")), address)
        except Denied as exc:
            refused = self.render("login.html", None, error=exc.message)
            refused.status_code = exc.status
            refused.headers.update(exc.headers)
            return refused
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=self.secure,
                            path="/")
        return response

    async def logout(self, request: Request) -> Response:
        user = await self.user(request)
        if isinstance(user, Response):
            return user
        self.access.sessions.drop(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    # -- pages ----------------------------------------------------------------------
    async def dashboard(self, request: Request) -> Response:
        user = await self.user(request)
        if isinstance(user, Response):
            return user
        return self.render("dashboard.html", user,
                           info=broker_summary(self.broker, self.started, self.totals),
                           refresh=max(1000, self.access.config.refresh_interval))

    async def _listing(self, request: Request, kind: str) -> Response:
        user = await self.user(request)
        if isinstance(user, Response):
            return user
        q = request.query_params
        sort, filter_text = q.get("sort"), q.get("filter")
        try:
            number = int(q.get("page", "1") or 1)
            visible = self.access.visible(user)
            if kind == "queue":
                page = await queue_page(self.m, filter_text=filter_text, sort=sort or None,
                                        page=number, size=100, visible=visible)
            else:
                page = page_of(visible_only(await self.m.destinations(kind), visible),
                               filter_text=filter_text, sort=sort, page=number, size=100)
        except ValueError as exc:
            return HTMLResponse(f"<p>{_esc(str(exc))}</p>", status_code=400)
        return self.render("destinations.html", user, kind=kind, page=page, sort=sort,
                           filter=filter_text, columns=COLUMNS, flash=q.get("flash"))

    async def queues(self, request: Request) -> Response:
        return await self._listing(request, "queue")

    async def topics(self, request: Request) -> Response:
        return await self._listing(request, "topic")

    async def queue(self, request: Request) -> Response:
        user = await self.user(request)
        if isinstance(user, Response):
            return user
        dest = Destination.queue(request.path_params["name"])
        refused: str | None = None  # the statistics show; the messages need `read`
        try:
            self.access.check_view(user, dest, request)
        except Denied as exc:  # a viewer the map does not let read it: nothing to show
            return HTMLResponse(f"<p>{_esc(exc.message)}</p>", status_code=exc.status)
        try:
            info = await self.m.destination(dest)
            after = int(request.query_params.get("after", "0") or 0)
            try:
                self.access.authorize(user, "browse", dest, request)
            except Denied as exc:
                refused = exc.message
            page = BrowsePage([], after, True) if refused else \
                await self.m.browse(dest, after=after, limit=100)
        except (DestinationError, ValueError) as exc:
            return HTMLResponse(f"<p>{_esc(str(exc))}</p>", status_code=404)
        owners = getattr(self.m.queue(dest), "owners", None)
        partitions = ([str(c.id) if c is not None else None for c in owners]
                      if owners is not None else None)
        return self.render("queue.html", user, q=info, consumers=self.m.consumers(dest),
                           messages=[message_view(m) for m in page.messages],
                           next_after=page.next_after, done=page.done, partitions=partitions,
                           flash=request.query_params.get("flash"), refused=refused)

    async def create_queue(self, request: Request) -> Response:
        user = await self.user(request, admin=True)
        if isinstance(user, Response):
            return user
        name = str((await request.form()).get("name", "")).strip()
        if not name:
            return RedirectResponse("/queues?flash=give+a+name", status_code=303)
        try:
            self.access.authorize(user, "create", Destination.queue(name), request)
            await self.m.create_queue(name)
        except Denied as exc:
            return RedirectResponse(f"/queues?flash={quote(f'create refused: {exc.message}')}",
                                    status_code=303)
        except (RelayMQError, ValueError) as exc:  # a wildcard, several queues, a bad name
            return RedirectResponse(f"/queues?flash={quote(f'create failed: {exc}')}",
                                    status_code=303)
        self.access.audit(user, "create", Destination.queue(name), request)
        return RedirectResponse(f"/queues/{quote(name)}", status_code=303)

    async def queue_action(self, request: Request) -> Response:
        user = await self.user(request, admin=True)
        if isinstance(user, Response):
            return user
        name, action = request.path_params["name"], request.path_params["action"]
        dest = Destination.queue(name)
        form = await request.form()
        selector = str(form.get("selector") or "") or None
        try:
            to = str(form.get("to", "")).strip() if action in ("move", "copy") else ""
            if action in OPERATION_ACTIONS:  # another is refused by `_act`
                self.access.authorize(user, action, dest, request,
                                      to=Destination.queue(to) if to else None)
        except Denied as exc:  # the map refuses it: said on the page, audited, nothing done
            return RedirectResponse(f"/queues/{quote(name)}?flash="
                                    f"{quote(f'{action} refused: {exc.message}')}",
                                    status_code=303)
        except ValueError as exc:
            return RedirectResponse(f"/queues/{quote(name)}?flash={quote(f'{action} failed: {exc}')}",
                                    status_code=303)
        try:
            flash = await self._act(dest, action, form, selector, user, request)
        except (RelayMQError, ValueError) as exc:
            flash = f"{action} failed: {exc}"
        self.access.audit(user, action, dest, request)
        if action == "delete":
            return RedirectResponse(f"/queues?flash={quote(flash)}", status_code=303)
        return RedirectResponse(f"/queues/{quote(name)}?flash={quote(flash)}", status_code=303)

    async def _act(self, dest: Destination, action: str, form: Any, selector: str | None,
                   user: User, request: Request) -> str:
        m = self.m
        if action == "purge":
            return f"purged {await m.purge(dest)} messages"
        if action == "pause":
            m.pause(dest)
            return "paused"
        if action == "resume":
            m.resume(dest)
            return "resumed"
        if action == "delete":
            await m.delete_destination(dest)
            return f"deleted {dest.name}"
        if action == "send":
            if dest.is_wildcard or dest.is_composite:
                raise ValueError(f"send to one queue, not {dest.name!r}")
            body = str(form.get("body", ""))
            await self.broker.internal_connection().send(Message(body.encode(), destination=dest))
            return "sent 1 message"
        if action == "retry":  # back only where the map lets `user` send
            return relocation.summary(await relocation.retry(
                self.access, user, m, dest, request,
                {"selector": selector or "JMSMessageID IS NOT NULL"}))
        if action in ("move", "copy", "remove"):
            # the messages ticked in the browse table, else those the selector picks
            ids = [str(v) for v in form.getlist("message_id") if str(v)]
            if form.get("ticked") and not ids:
                return "no message ticked"
            which: dict[str, Any] = ({"message_ids": ids} if ids else
                                     {"selector": selector or "JMSMessageID IS NOT NULL"})
            if action == "remove":
                return f"deleted {await m.remove_messages(dest, **which)} messages"
            to = str(form.get("to", "")).strip()
            if not to:
                return f"{action} needs a target queue"
            act = relocation.copy if action == "copy" else relocation.move
            return relocation.summary(await act(m, dest, Destination.queue(to), which), to)
        raise ValueError(f"unknown action {action!r}")

    async def connections(self, request: Request) -> Response:
        user = await self.user(request)
        if isinstance(user, Response):
            return user
        items = connections_seen(self.m.connections(), user.name, self.access.visible(user))
        return self.render("connections.html", user, items=plain(items),
                           flash=request.query_params.get("flash"))

    async def close_connection(self, request: Request) -> Response:
        user = await self.user(request, admin=True)
        if isinstance(user, Response):
            return user
        cid = request.path_params["cid"]
        closed = await self.m.close_connection(cid, "closed by the console")
        self.access.audit(user, "close-connection", cid, request)
        flash = f"closed {cid}" if closed else f"no connection {cid}"
        return RedirectResponse(f"/connections?flash={quote(flash)}", status_code=303)

    async def subscriptions(self, request: Request) -> Response:
        user = await self.user(request)
        if isinstance(user, Response):
            return user
        return self.render("table.html", user, title="Durable subscriptions",
                           columns=["client_id", "name", "topic", "selector", "active", "depth"],
                           items=plain(visible_only(self.m.durable_subscriptions(),
                                                    self.access.visible(user), "topic")))


def _esc(text: str) -> str:
    from html import escape

    return escape(text)
