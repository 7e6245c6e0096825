"""The broker: assembles plugins, store, destinations and connectors, and runs them.

```python
broker = Broker(load_config("activemq.xml"))
await broker.start()
conn = await broker.connect(ConnectRequest(client_id="app"))
...
await broker.stop()
```
Assembly happens in `start()` in a fixed order: store, broker plugins and
destination interceptors (config order), hook-provided filters, the interceptor
chain, recovery, declared destinations, connectors, broker connections registered
(so that management lists them all from the start), services (the console), then
the broker connections started.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING, Any

from relaymq.advisory import AdvisoryService
from relaymq.broker.chain import Next, SendChain, SendFilter, fold
from relaymq.broker.connection import ClientConnection
from relaymq.broker.events import BrokerEvents
from relaymq.broker.queue_types import configured_queue_types, resolve_queue_type
from relaymq.broker.region import Region
from relaymq.broker.router import Router
from relaymq.broker.scheduler import Scheduler
from relaymq.broker.security import ANONYMOUS, ConnectRequest, Principal
from relaymq.broker.startup import listen_failure
from relaymq.broker.usage import SystemUsage
from relaymq.config.model import BrokerConfig, PluginElement
from relaymq.dispatch.policy import PolicyMap
from relaymq.dispatch.redelivery import RedeliveryPolicyMap
from relaymq.dispatch.topic import SubscriptionQueue
from relaymq.errors import (
    ClientIdInUse,
    ConfigError,
    DestinationError,
    SecurityError,
    StartupError,
)
from relaymq.feed.events import SubscriptionCreated
from relaymq.feed.feed import ChangeFeed
from relaymq.management import Management
from relaymq.model.destination import Destination
from relaymq.model.message import MessageIdGenerator
from relaymq.outgoing.registry import OutgoingConnections
from relaymq.selector import Selector
from relaymq.spi.persistence import (
    EncodedRecord,
    LockState,
    PersistenceAdapter,
    StoredMessage,
    SubscriptionRecord,
)
from relaymq.spi.transport import ConnectorContext, TransportUri

if TYPE_CHECKING:
    from relaymq.plugins import PluginRegistry

log = logging.getLogger("relaymq.broker")


class Broker:
    def __init__(self, config: BrokerConfig | None = None, *,
                 registry: PluginRegistry | None = None, strict: bool = False) -> None:
        if registry is None:
            from relaymq.plugins import PluginRegistry

            registry = PluginRegistry(strict=strict)
        self.config = config or BrokerConfig(persistent=False)
        self.plugins = registry
        self.strict = strict or getattr(registry, "strict", False)
        self.name = self.config.broker_name
        self.events = BrokerEvents(registry.pm.hook, self)
        #: what the broker committed, in order (docs/change-feed.md); subscribe from
        #: a plugin's install() to also see the destinations recovered at start-up
        self.change_feed = ChangeFeed()
        self.policies = PolicyMap(self.config.policy_entries, self.config.default_policy)
        self.usage = SystemUsage(self.config.system_usage)
        self.message_ids = MessageIdGenerator()
        self.scheduler = Scheduler() if self.config.scheduler_support else None
        self.store: PersistenceAdapter | None = None
        self.region: Region = None  # type: ignore[assignment]  # set in start()
        self.router: Router = None  # type: ignore[assignment]
        #: the interceptor chain connections send through (`chain` is its callable)
        self.send_chain = SendChain(self._unassembled)
        self._filters: list[SendFilter] = []
        #: filters left out of the chain while they have nothing to do
        self._idle_filters: list[SendFilter] = []
        self.connectors: list[Any] = []
        self.services: list[Any] = []
        #: outgoing connections to other brokers (docs/outgoing-connections.md)
        self.outgoing = OutgoingConnections(registry, on_open=self._outgoing_opened)
        #: Objects plugins offer each other by name, so neither imports the other
        #: (e.g. "selector-cache": the selector provider selector-aware virtual topics ask).
        self.extensions: dict[str, object] = {}
        self.connections: set[ClientConnection] = set()
        self._client_ids: dict[str, ClientConnection] = {}
        self._temporary: dict[Destination, ClientConnection] = {}
        #: temporary queues kept for their disconnected client: dest -> (client id, timer)
        #: temporary destination -> (client id, user, removal timer) while it waits
        self._orphans: dict[Destination, tuple[str, str, asyncio.TimerHandle]] = {}
        self._internal: ClientConnection | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._lock_task: asyncio.Task[None] | None = None  # stopping after a lost store lock
        #: why the broker stopped by itself (its store lock was lost); None otherwise
        self.stop_reason: str | None = None
        self._redelivery: RedeliveryPolicyMap | None = None
        self.started = False
        self._stopped = asyncio.Event() if _has_loop() else None
        #: the management API: what plugins, the console and the CLI use (docs/management.md)
        self.management = Management(self)
        self.advisories: AdvisoryService | None = None

    # -- assembly ------------------------------------------------------------------------
    @property
    def redelivery(self) -> RedeliveryPolicyMap | None:
        return self._redelivery

    @redelivery.setter
    def redelivery(self, value: RedeliveryPolicyMap | None) -> None:
        self._redelivery = value
        if self.region is not None:
            self.region.redelivery = value

    def add_filter(self, f: SendFilter) -> None:
        """Add a send filter to the interceptor chain (call from `install`)."""
        if self.started:
            raise RuntimeError("filters are added while the broker is assembled, not later")
        self._filters.append(f)

    @property
    def chain(self) -> Next:
        """The interceptor chain (filters in configuration order, then the router)."""
        return self.send_chain.call

    def set_filter_idle(self, f: SendFilter, idle: bool) -> None:
        """Leave the send filter `f` out of the chain while it has nothing to do
        (`idle`), or put it back in its configured place. A filter that is idle
        most of the time then costs no call per message. Sends routed from now on
        see the change; may be called before or after start."""
        known = any(g == f for g in self._idle_filters)
        if idle == known:
            return
        if idle:
            self._idle_filters.append(f)
        else:
            self._idle_filters = [g for g in self._idle_filters if g != f]
        if self.router is not None and self.send_chain.call is not self._unassembled:
            self._fold_chain()

    def _fold_chain(self) -> None:
        idle = self._idle_filters
        active = [f for f in self._filters if not any(g == f for g in idle)]
        self.send_chain.call = fold(active, self.router.route)

    @staticmethod
    def _unassembled(ctx: Any, message: Any) -> Any:
        raise RuntimeError("the broker is not started")

    def _build_store(self) -> PersistenceAdapter:
        el = self.config.persistence_adapter
        if el is None or not self.config.persistent:
            from relaymq.store.memory import MemoryPersistenceAdapter

            if el is not None:
                log.info("persistent=\"false\": using the memory store instead of <%s>", el.tag)
            return MemoryPersistenceAdapter()
        store = self.plugins.build("relaymq.persistence", el, self)
        if not isinstance(store, PersistenceAdapter):
            raise ConfigError(f"<{el.tag}> at {el.origin} did not build a PersistenceAdapter")
        return store

    def _implied_plugins(self) -> list[PluginElement]:
        """Broker plugins other products' settings imply (ActiveMQ's jetty.xml and
        `<managementContext createConnector="true">` imply the web console; see
        `relaymq.config.web_console`): enabled when the plugin is installed and the
        file does not configure it itself."""
        out: list[PluginElement] = []
        configured = {el.tag for el in self.config.plugins}
        for el in self.config.extra.get("implied_plugins", []):
            why = el.attributes.get("impliedBy", el.origin)
            if el.tag in configured:
                log.info("<%s> is configured: the settings %s implies are not used", el.tag, why)
            elif el.tag not in self.plugins.names("relaymq.broker_plugins"):
                log.warning("%s asks for a web console; install relaymq-%s for <%s> (the "
                            "settings are not used until then)", why, el.tag, el.tag)
            else:
                log.info("enabling <%s> as %s asks", el.tag, why)
                out.append(el)
        return out

    def _install_plugins(self) -> None:
        for group, elements in (
            ("relaymq.broker_plugins", [*self.config.plugins, *self._implied_plugins()]),
            ("relaymq.destination_interceptors", self.config.destination_interceptors),
        ):
            for el in elements:
                plugin = self.plugins.build(group, el, self)
                install = getattr(plugin, "install", None)
                if install is None:
                    raise ConfigError(f"<{el.tag}> at {el.origin} built {plugin!r}, which has no install()")
                install(self)
                self.services.append(plugin)
                log.info("enabled <%s> (%s)", el.tag, type(plugin).__module__)

    async def start(self) -> None:
        if self.started:
            return
        if self._stopped is None:
            self._stopped = asyncio.Event()
        pm = self.plugins.pm
        self.store = self._build_store()
        self.region = Region(self.events, self.store, self.policies, self.usage, self.change_feed)
        self.region.redelivery = self._redelivery
        self.region.queue_types.update(configured_queue_types(self.plugins, self.config))
        for decl in self.config.destinations:
            if decl.kind == "queue" and decl.queue_type:
                self.region.declared_types[Destination.queue(decl.physical_name)] = decl.queue_type
        self.router = Router(self.region)
        self.region.route = self.router.route
        self._install_plugins()
        check = getattr(self.plugins, "check", None)
        if check is not None:
            check()
        pm.hook.relaymq_configure(broker=self, config=self.config)
        if self.config.advisory_support:  # ActiveMQ.Advisory.* topics (docs/advisories.md)
            self.advisories = AdvisoryService(self)
            self.advisories.install()
        for extra in pm.hook.relaymq_interceptors(broker=self):
            self._filters.extend(extra or [])
        self._fold_chain()
        await self.store.start()
        self.store.watch_lock(self._store_lock_changed)
        log.info("store: %s", self.store.describe())
        pm.hook.relaymq_persistence_started(broker=self, adapter=self.store)
        await self.router.duplicates.recover(self.store)
        await self.change_feed.attach(self.store, self.region.writer)
        await self._load_declarations()
        await self.region.recover()
        await self._recover_subscriptions()
        if self.scheduler is not None:
            await self.scheduler.recover(self)
        for decl in self.config.destinations:
            dest = Destination.queue(decl.physical_name) if decl.kind == "queue" \
                else Destination.topic(decl.physical_name)
            await (self.region.queue(dest) if dest.is_queue else self.region.topic(dest))
        self.started = True
        try:
            await self._start_connectors()
            # every configured broker connection is known to management before a
            # service (the console) answers, and started after the services
            starting = self._register_broker_connections()
            for svc in self.services:
                start = getattr(svc, "start", None)
                if start is not None and asyncio.iscoroutinefunction(start):
                    await start()
            for name in starting:
                await self.management.start_broker_connection(name)
        except BaseException:
            await self.stop()
            raise
        self._tasks.append(asyncio.get_running_loop().create_task(self._expiry_loop()))
        pm.hook.relaymq_broker_started(broker=self)
        log.info("broker %s started", self.name)

    async def _load_declarations(self) -> None:
        """Queue types declared through management (kept in the store); a type no
        installed distribution provides any more is logged and left out."""
        region = self.region
        for dest, name in (await region.declarations.load()).items():
            configured = region.declared_types.get(dest)
            if configured is not None:
                if configured != name:
                    log.warning("%s: the configuration declares queue type %r; the %r "
                                "declared through management is not used", dest, configured, name)
                continue
            if name not in region.queue_types:
                try:
                    region.queue_types[name] = resolve_queue_type(self.plugins, name)
                except Exception as exc:  # noqa: BLE001 - one stale declaration must not stop the broker
                    log.error("%s was declared with queue type %r through management, which "
                              "is not available (%s); it is made from its policy instead",
                              dest, name, exc)
                    continue
            region.declared_types[dest] = name

    async def _recover_subscriptions(self) -> None:
        assert self.store is not None
        for record in await self.store.subscriptions():
            selector = Selector.compile(record.selector) if record.selector else None
            sub = self.make_durable(record, selector)
            self.region.add_subscription(sub)
            await sub.recover()
            self.region.writer.note(SubscriptionCreated(
                record.key, record.client_id, record.name, Destination.parse(record.topic),
                record.selector, record.no_local, True))

    def make_durable(self, record: SubscriptionRecord, selector: Selector | None) -> SubscriptionQueue:
        topic = Destination.parse(record.topic)
        return SubscriptionQueue(self.region, topic, record.key, self.policies.entry_for(topic),
                                 selector, record=record)

    async def _start_connectors(self) -> None:
        for tc in self.config.transport_connectors:
            uri = TransportUri.parse(tc.uri)
            factory = self.plugins.transport_factory(uri.scheme)
            if factory is None:
                advice = getattr(self.plugins, "advice", None)
                hint = f" ({advice('relaymq.transports', uri.scheme)})" if advice else ""
                msg = (f"<transportConnector uri=\"{tc.uri}\"> at {tc.origin}: no installed "
                       f"transport serves '{uri.scheme}://'; skipped{hint}")
                if self.strict:
                    raise ConfigError(msg + " (--strict)")
                log.warning(msg)
                continue
            ctx = ConnectorContext(self, uri, tc.name or uri.scheme)
            try:
                connector = factory(ctx)  # TLS files are read here
                await connector.start()
            except OSError as exc:  # ssl.SSLError and socket.gaierror included
                raise StartupError(listen_failure(tc, uri.host, uri.port, exc)) from exc
            unused = set(uri.options) - ctx.used_options
            if unused:
                log.warning("transport option(s) %s on %s have no effect in RelayMQ",
                            ", ".join(sorted(unused)), tc.uri)
            self.connectors.append(connector)
            log.info("%s transport listening on %s", uri.scheme, connector.address)
            self.plugins.pm.hook.relaymq_transport_started(
                broker=self, scheme=uri.scheme, address=connector.address)

    def _register_broker_connections(self) -> list[str]:
        """Make and register every configured broker connection and bridge; return
        the names to start (those without auto-start="false"), in configuration order."""
        starting: list[str] = []
        slots = [("relaymq.broker_connections", el) for el in self.config.broker_connections]
        slots += [("relaymq.bridges", el)
                  for el in (*self.config.bridges, *self.config.jms_bridge_connectors)]
        for i, (group, el) in enumerate(slots):
            conn = self.plugins.build(group, el, self)
            name = el.attributes.get("name") or f"{el.tag}-{i + 1}"
            uri = el.attributes.get("uri") or el.attributes.get("target-uri") \
                or el.attributes.get("targetUri") or el.attributes.get("outboundUri")
            self.management.register_broker_connection(name, conn, kind=el.tag, uri=uri)
            if getattr(conn, "auto_start", True) is False:
                log.info("broker connection %s: auto-start=false; start it with "
                         "startBrokerConnection(%r)", name, name)
                continue
            starting.append(name)
        return starting

    def _outgoing_opened(self, conn: Any) -> None:
        self.plugins.pm.hook.relaymq_broker_connection_started(
            broker=self, name=conn.name, uri=conn.peer or conn.uri)

    async def _expiry_loop(self) -> None:
        periods = [e.expire_messages_period for e in self.config.policy_entries if e.expire_messages_period]
        default = self.policies.default.expire_messages_period
        period = min(periods + ([default] if default else [])) / 1000.0 if (periods or default) else 0
        if period <= 0:
            return
        while True:
            await asyncio.sleep(period)
            try:
                self.region.expire_scan()
            except Exception:  # noqa: BLE001
                log.exception("periodic expiry check failed")

    @property
    def connector_addresses(self) -> list[str]:
        return [c.address for c in self.connectors]

    def connector_address(self, scheme: str) -> str:
        """`host:port` of the first connector for `scheme` (tests, tools)."""
        for c in self.connectors:
            if getattr(c, "scheme", None) == scheme or c.address.startswith(scheme):
                return c.address
        for c in self.connectors:
            uri = getattr(getattr(c, "context", None), "uri", None)
            if uri is not None and uri.scheme == scheme:
                return c.address
        raise KeyError(f"no {scheme} connector")

    def _store_lock_changed(self, state: str, why: str) -> None:
        """A broker whose store lock is lost stops serving at once: another broker may
        own the store now, and two writers would corrupt it (ActiveMQ stops too)."""
        if state != LockState.LOST or not self.started:
            return
        log.error("broker %s lost its store lock (%s): it stops serving now, closing its "
                  "connectors and client connections and writing nothing more to the store",
                  self.name, why)
        self.stop_reason = f"lost its store lock ({why})"
        self._lock_task = asyncio.get_running_loop().create_task(self.stop(abandon_store=True))

    async def stop(self, *, abandon_store: bool = False) -> None:
        """Stop serving and close the store (`abandon_store`: let go of it without
        writing, when its lock was lost)."""
        if not self.started:
            return
        self.started = False
        self.plugins.pm.hook.relaymq_broker_stopping(broker=self)
        for t in self._tasks:
            t.cancel()
        for _, _, timer in self._orphans.values():
            timer.cancel()
        self._orphans.clear()
        await self.management.stop_broker_connections()
        if self.advisories is not None:
            self.advisories.uninstall()
            self.advisories = None
        for svc in reversed(self.services):
            stop = getattr(svc, "stop", None)
            if stop is not None and asyncio.iscoroutinefunction(stop):
                try:
                    await stop()
                except Exception:  # noqa: BLE001
                    log.exception("stopping %r failed", svc)
        await self.outgoing.close_all()
        for c in reversed(self.connectors):
            try:
                await c.stop()
            except Exception:  # noqa: BLE001
                log.exception("stopping connector %s failed", c.address)
        self.connectors.clear()
        for conn in list(self.connections):
            await conn.close()
        if self.scheduler is not None:
            self.scheduler.stop()
        await asyncio.sleep(0)  # let pending ack batches reach the store
        if self.store is not None:
            if abandon_store:
                await self.store.abandon()
            else:
                await self.store.stop()
        if self._stopped is not None:
            self._stopped.set()
        log.info("broker %s stopped", self.name)

    async def wait_stopped(self) -> None:
        assert self._stopped is not None
        await self._stopped.wait()

    # -- connections -----------------------------------------------------------------------
    async def connect(self, request: ConnectRequest | None = None, *, network: bool = False,
                      origin: str | None = None) -> ClientConnection:
        """Authenticate and open a kernel connection for a transport's client.

        `network`: a broker connection (mirror, federation, bridge); `origin`: the
        broker id of the peer it speaks for. Messages sent on the connection carry
        `origin` (unless they already name one) and so do their change-feed events,
        which lets broker-to-broker plugins skip what came from a peer."""
        if not self.started:
            raise RuntimeError("the broker is not started")
        request = request or ConnectRequest()
        principal = self.plugins.pm.hook.relaymq_authenticate(broker=self, request=request)
        if inspect.isawaitable(principal):  # a password check that runs a KDF off the loop
            principal = await principal
        if principal is None:
            principal = Principal(request.username) if request.username else ANONYMOUS
        cid = request.client_id
        if cid:
            holder = self._client_ids.get(cid)
            if holder is not None and not holder.closed:
                raise ClientIdInUse(f"client id {cid!r} is already in use by another connection")
        conn = ClientConnection(self, principal, cid or None, request.transport,
                                request.remote_address, network, origin)
        if cid:
            self._client_ids[cid] = conn
        self.connections.add(conn)
        self.events.connection_opened(conn)
        return conn

    def claim_client_id(self, conn: ClientConnection, client_id: str) -> None:
        """Give an open connection its client id (AMQP learns it after SASL, at open);
        raises `ClientIdInUse` when another open connection holds it."""
        holder = self._client_ids.get(client_id)
        if holder is not None and holder is not conn and not holder.closed:
            raise ClientIdInUse(f"client id {client_id!r} is already in use by another connection")
        if conn.client_id and self._client_ids.get(conn.client_id) is conn:
            del self._client_ids[conn.client_id]
        conn.client_id = client_id
        self._client_ids[client_id] = conn

    def authorize(self, principal: Principal, action: str, destination: Destination,
                  connection: ClientConnection | None = None) -> bool:
        verdict = self.plugins.pm.hook.relaymq_authorize(
            broker=self, principal=principal, action=action, destination=destination,
            connection=connection)
        return verdict is not False

    def security_changed(self) -> None:
        """Forget every connection's cached authorization decisions (an
        authorization plugin calls this when users, groups or entries change)."""
        for conn in self.connections:
            conn.forget_authorizations()

    def connection_closed(self, conn: ClientConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.events.connection_closed(conn)
        if conn.client_id and self._client_ids.get(conn.client_id) is conn:
            del self._client_ids[conn.client_id]

    def internal_connection(self) -> ClientConnection:
        """A connection the broker itself sends with (scheduler, management)."""
        if self._internal is None or self._internal.closed:
            self._internal = ClientConnection(self, Principal("relaymq", system=True), None,
                                              "internal")
        return self._internal

    def operation_connection(self) -> ClientConnection:
        """A new connection the broker itself sends with for one management operation
        (a copy, move or retry counts the duplicates its own sends met)."""
        return ClientConnection(self, Principal("relaymq", system=True), None, "internal")

    # -- temporary destinations ----------------------------------------------------------------
    def register_temporary(self, dest: Destination, owner: ClientConnection) -> None:
        self._temporary[dest] = owner

    def temporary_owner(self, dest: Destination) -> ClientConnection | None:
        return self._temporary.get(dest)

    async def delete_temporary(self, dest: Destination, *, now: bool = False) -> None:
        """A temporary destination's connection closed (or `now`: remove it at once).

        A temporary queue whose queue type sets `reconnect_grace` (seconds; the
        `anonymous` type of relaymq-queue-types, Solace's anonymous queues) and whose
        connection had a client id is kept that long instead: a connection with the
        same client id that consumes from it within the grace takes it over
        (`reclaim_temporary`), messages and all; otherwise it is removed then."""
        owner = self._temporary.get(dest)
        queue = self.region.queues.get(dest) if dest.is_queue else None
        grace = float(getattr(queue, "reconnect_grace", 0.0) or 0.0) if queue is not None else 0.0
        if (not now and grace > 0 and owner is not None and owner.closed and owner.client_id
                and self.started):
            loop = asyncio.get_running_loop()
            old = self._orphans.pop(dest, None)
            if old is not None:
                old[2].cancel()
            timer = loop.call_later(grace, self._orphan_expired, dest)
            self._orphans[dest] = (owner.client_id, owner.principal.name, timer)
            log.info("%s: its client %s disconnected; kept %.0f s for it to come back",
                     dest, owner.client_id, grace)
            return
        old = self._orphans.pop(dest, None)
        if old is not None:
            old[2].cancel()
        self._temporary.pop(dest, None)
        await self.region.delete(dest)

    def _orphan_expired(self, dest: Destination) -> None:
        entry = self._orphans.pop(dest, None)
        if entry is None:
            return
        log.info("%s: its client %s did not come back; removed", dest, entry[0])
        self._tasks.append(asyncio.get_running_loop().create_task(
            self.delete_temporary(dest, now=True)))

    def reclaim_temporary(self, dest: Destination, conn: ClientConnection) -> None:
        """`conn` consumes from temporary `dest`, whose connection is closed: allowed
        while `dest` waits for its client to come back and `conn` has that client id
        and is the same user (another user with that client id is refused as any
        other connection is); `conn` owns it from now on."""
        entry = self._orphans.get(dest)
        if (entry is None or not conn.client_id or conn.client_id != entry[0]
                or conn.principal.name != entry[1]):
            raise DestinationError(f"temporary destination {dest} belongs to a connection "
                                   "that is closed")
        del self._orphans[dest]
        entry[2].cancel()
        self._temporary[dest] = conn
        if dest not in conn.temporary:
            conn.temporary.append(dest)
        log.info("%s: its client %s came back and took it over", dest, conn.client_id)

    # -- management (console, CLI, tests) -------------------------------------------------------
    def destination_stats(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for d, q in self.region.queues.items():
            out[d.key] = q.stats.snapshot()
        for d, t in self.region.topics.items():
            s = t.stats.snapshot()
            subs = self.region.subscriptions_for(d)
            s["consumers"] = sum(len(x.consumers) for x in subs)
            s["pending"] = sum(x.stats.pending for x in subs)
            out[d.key] = s
        for key, sub in self.region.subscriptions.items():
            out[key] = sub.stats.snapshot()
        return out

    async def read_messages(self, destination: Destination | str, after: int = 0,
                            until: int | None = None, limit: int | None = 1000) -> list[StoredMessage]:
        """The messages of `destination` (a `Destination`, or a store key such as a
        durable subscription's) with `after < seq <= until`, in sequence order, at
        most `limit`, without consuming them. Page with `after = last seq read`.

        Read from the store (`PersistenceAdapter.read`): what a persistent broker
        stored, also beyond what a queue holds in memory. A broker without a
        persistent store has only what its queues hold in memory, read from there."""
        key = destination if isinstance(destination, str) else destination.key
        if limit is not None and limit <= 0:
            return []
        region = self.region
        if region.store_persistent:
            out = await region.store.read(key, after, limit)
        else:
            queue = next((q for q in region.queues.values() if q.key == key), None) \
                or region.subscriptions.get(key)
            held = [] if queue is None else queue.memory_entries()
            out = [StoredMessage(e.seq, e.message) for e in held if e.seq > after]
            out = out[:limit] if limit is not None else out
        if until is not None:
            out = [r for r in out if r.seq <= until]
        return out

    async def read_encoded(self, destination: Destination | str, after: int = 0,
                           until: int | None = None, limit: int | None = 1000,
                           encoding: str = "amqp") -> list[EncodedRecord]:
        """`read_messages` for a reader that sends the messages on in a transport's
        encoding (`PersistenceAdapter.read_encoded`): ``(seq, timestamp, bytes)``
        for a message stored with its bytes of `encoding`, as they are, else
        ``(seq, timestamp, Message)``."""
        key = destination if isinstance(destination, str) else destination.key
        if limit is not None and limit <= 0:
            return []
        region = self.region
        if region.store_persistent:
            out = await region.store.read_encoded(key, after, limit, encoding)
        else:
            out = []
            for r in await self.read_messages(key, after, None, limit):
                m = r.message
                data = m.encoded
                out.append((r.seq, m.timestamp,
                            data if data is not None and m.encoding == encoding else m))
        if until is not None and out and out[-1][0] > until:
            out = [r for r in out if r[0] <= until]
        return out

    def queue_size(self, name: str) -> int:
        q = self.region.queues.get(Destination.queue(name))
        return q.size() if q is not None else 0

    async def delete_destination(self, dest: Destination) -> bool:
        if dest.is_temporary:
            raise DestinationError("temporary destinations go away with their connection")
        return await self.region.delete(dest)


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


__all__ = ["Broker", "SecurityError"]
