"""Federation receivers on the remote broker, opened while there is demand.

`Receivers` keeps one AMQP receiver per wanted key (an address, or a queue
with a consumer filter and priority): `want(key)` opens it (at once, or again
after a refusal), `unwant(key)` closes it after the idle timeout (Artemis'
``addressReceiverIdleTimeout`` / ``queueReceiverIdleTimeout``) unless demand
comes back first. Each message is routed locally and accepted on the remote
only once the local broker has it.

A refused receiver is attached again after `retry_delay` seconds while it is
wanted, or at once when the peer announces on the events link that what it
asked for now exists (`retry`).

With `require_offered`, the peer's answer to each attach must offer the
capabilities the attach desired (``AMQ_FEDERATION_ADDRESS_RECEIVER`` /
``AMQ_FEDERATION_QUEUE_RECEIVER``), as Artemis checks: otherwise the link is
closed, the whole kind is refused (`refused` says why, logged once) and no
receiver of that kind is opened again on this connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from relaymq.model.destination import Destination
from relaymq_amqp.engine import Terminus
from relaymq_amqp.mapping import to_kernel

from relaymq_federation.hops import add_hop
from relaymq_federation.publisher import LocalPublisher

log = logging.getLogger("relaymq.federation")

#: hops after which a federated message is taken to be going round a loop (logged once
#: per destination): no sensible topology has paths this long
LOOP_HOPS = 16
#: seconds before a refused receiver is tried again while still wanted
RETRY_DELAY = 2.0
#: the same while the peer's events link is attached (it announces what appears)
RETRY_DELAY_WITH_EVENTS = 30.0


@dataclass
class ReceiverSpec:
    """How to attach one federation receiver."""

    name: str
    source: Terminus
    target: Terminus
    destination: Destination
    properties: dict[str, Any] = field(default_factory=dict)
    desired_capabilities: list[str] = field(default_factory=list)
    add_hops: bool = False


class Receivers:
    """The receivers of one policy kind (address or queue) of a federation."""

    def __init__(self, conn: Any, publisher: LocalPublisher, make: Callable[[Any], ReceiverSpec],
                 idle_timeout: float, credit: int, label: str,
                 is_open: Callable[[], bool] | None = None, require_offered: bool = False) -> None:
        self.conn = conn
        self.require_offered = require_offered
        #: why the peer's receivers of this kind are refused (None: they are not)
        self.refused: str | None = None
        self.is_open = is_open or (lambda: bool(conn.state.value == "open"))
        self.publisher = publisher
        self.make = make
        self.idle_timeout = idle_timeout
        self.credit = credit
        self.label = label
        self.links: dict[Hashable, Any] = {}
        self.wanted: set[Hashable] = set()
        #: destinations whose messages were seen going round a loop (warned once)
        self._looping: set[Destination] = set()
        self._idle: dict[Hashable, asyncio.TimerHandle] = {}
        self._opening: set[Hashable] = set()
        self._refused_at: dict[Hashable, float] = {}
        #: asked to retry while an attach was under way: retried at once if it fails
        self._retry_now: set[Hashable] = set()
        self.retry_delay = RETRY_DELAY
        #: receivers without credit, their demand gone (detached after the idle timeout)
        self._stopped: set[Hashable] = set()
        self.received = 0
        #: False until the control link is attached (the peer refuses receivers before)
        self.enabled = False

    # -- demand -------------------------------------------------------------------------
    def want(self, key: Hashable) -> None:
        self.wanted.add(key)
        timer = self._idle.pop(key, None)
        if timer is not None:
            timer.cancel()
        link = self.links.get(key)
        if link is not None and key in self._stopped:
            self._stopped.discard(key)
            if not link.closed:
                link.resume(self.credit)
        self.reconcile()

    def unwant(self, key: Hashable) -> None:
        self.wanted.discard(key)
        if key in self._idle or key not in self.links:
            return
        link = self.links[key]
        if not link.closed and hasattr(link, "stop"):
            # as Artemis: no more credit once the demand is gone (a drain), the link
            # stays idle until the timeout in case the demand comes back
            link.stop()
            self._stopped.add(key)
        loop = asyncio.get_running_loop()
        self._idle[key] = loop.call_later(self.idle_timeout, self._idle_expired, key)

    def _idle_expired(self, key: Hashable) -> None:
        self._idle.pop(key, None)
        if key in self.wanted:
            return
        self._stopped.discard(key)
        link = self.links.pop(key, None)
        if link is not None and not link.closed:
            log.info("%s: no more demand for %s; receiver detached", self.label, self.describe(key))
            asyncio.get_running_loop().create_task(link.close())

    def reconcile(self) -> None:
        """Open what is wanted and not open (a refused link is retried later)."""
        if not self.enabled or self.refused is not None or not self.is_open():
            return  # links are attached again on the next connection
        loop = asyncio.get_running_loop()
        now = loop.time()
        for key in list(self.wanted):
            link = self.links.get(key)
            if link is not None and not link.closed:
                continue
            refused_at = self._refused_at.get(key)
            if key in self._opening or (refused_at is not None and now - refused_at < self.retry_delay):
                continue
            self._opening.add(key)
            loop.create_task(self._open(key))

    def retry(self, selects: Callable[[Any], bool]) -> int:
        """Attach again at once the wanted receivers `selects` picks that were
        refused (the peer announced that what they ask for exists now)."""
        hits = 0
        for key in list(self.wanted):
            if not selects(key):
                continue
            link = self.links.get(key)
            if link is not None and not link.closed:
                continue
            hits += 1
            self._refused_at.pop(key, None)
            if key in self._opening:
                self._retry_now.add(key)
        if hits:
            self.reconcile()
        return hits

    async def _open(self, key: Hashable) -> None:
        try:
            spec = self.make(key)
            link = await self.conn.attach_receiver(
                spec.name, spec.source, spec.target, credit=self.credit,
                properties=spec.properties, desired_capabilities=spec.desired_capabilities,
                on_message=self._handler(spec))
        except Exception as exc:  # noqa: BLE001 - refused or timed out: retried while wanted
            log.info("%s: receiver for %s not attached: %s", self.label, self.describe(key), exc)
            self._opening.discard(key)
            if key in self._retry_now:  # what it needs appeared meanwhile
                self._retry_now.discard(key)
                asyncio.get_running_loop().call_soon(self.reconcile)
            else:
                self._refused_at[key] = asyncio.get_running_loop().time()
            return
        self._opening.discard(key)
        self._retry_now.discard(key)
        missing = self._missing_capabilities(spec, link)
        if missing:
            self._refuse(key, link, missing)
            return
        self.links[key] = link
        self._stopped.discard(key)
        self._refused_at.pop(key, None)
        log.info("%s: receiver attached for %s", self.label, self.describe(key))
        if key not in self.wanted and key not in self._idle:
            self.unwant(key)

    def _missing_capabilities(self, spec: ReceiverSpec, link: Any) -> list[str]:
        if not self.require_offered:
            return []
        offered = set(getattr(link, "remote_offered_capabilities", None) or ())
        return [c for c in spec.desired_capabilities if c not in offered]

    def _refuse(self, key: Hashable, link: Any, missing: list[str]) -> None:
        if self.refused is None:
            self.refused = f"the peer does not offer {', '.join(missing)}"
            log.warning("%s: refused: %s on its answer to the receiver for %s; no %s receivers "
                        "are opened on this connection", self.label, self.refused, self.describe(key),
                        missing[0])
        if not link.closed:
            asyncio.get_running_loop().create_task(link.close())

    def _handler(self, spec: ReceiverSpec) -> Callable[[Any], None]:
        destination = spec.destination
        add_hops = spec.add_hops
        publish = self.publisher.publish

        def on_message(incoming: Any) -> None:
            data = incoming.data
            try:
                if add_hops:
                    data, hops = add_hop(data)
                    if hops >= LOOP_HOPS and destination not in self._looping:
                        self._looping.add(destination)
                        log.warning("%s: a message on %s has been federated %d times: brokers pass "
                                    "it round in a loop (a ring or mesh whose address policies have "
                                    "no max-hops); set max-hops (a ring of n brokers: n - 1, a full "
                                    "mesh: 1)", self.label, destination, hops)
                message, _ = to_kernel(data, destination)
            except Exception as exc:  # noqa: BLE001 - not an AMQP message
                log.warning("%s: undecodable message rejected: %s", self.label, exc)
                incoming.reject()
                return
            self.received += 1

            def done(exc: BaseException | None) -> None:
                if exc is None:
                    incoming.accept()
                else:
                    incoming.modify(failed=True)

            publish(message, done)

        return on_message

    async def close(self) -> None:
        for timer in self._idle.values():
            timer.cancel()
        self._idle.clear()
        self.wanted.clear()
        self._stopped.clear()
        for link in list(self.links.values()):
            if not link.closed:
                await link.close()
        self.links.clear()

    @staticmethod
    def describe(key: Hashable) -> str:
        """`key` for logs and management: an address, or ``queue`` /
        ``queue [selector]`` (see `policies.QueueKey`)."""
        return str(key)

    def open_keys(self) -> list[str]:
        return sorted(self.describe(k) for k, link in self.links.items() if not link.closed)

    def waiting(self) -> list[str]:
        """Wanted receivers not attached now (refused, missing on the peer, or
        being attached)."""
        return sorted(self.describe(k) for k in self.wanted
                      if k not in self.links or self.links[k].closed)

    @property
    def attaching(self) -> int:
        return len(self._opening)

    def reset_refusal(self) -> None:
        """A new connection: the peer is asked again (it may have been upgraded);
        what is still wanted is attached on the next `reconcile`."""
        self.refused = None
