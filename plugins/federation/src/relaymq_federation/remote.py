"""Remote policies a peer sent over its control link, applied here.

A ``<remote-address-policy>`` or ``<remote-queue-policy>`` of the peer's
``<federation>`` asks this broker to federate *from the peer*: consumers here
on a matching address or queue are demand, and this broker attaches the
federation receivers back over the connection the peer opened (on the control
link's session, as Artemis does), with the peer's settings
(``federation-configuration`` of the control link) and federation name. The
peer serves them like any federation receiver. Everything ends with the
control link (or the connection).

Like Artemis, this broker requires the peer to offer
``AMQ_FEDERATION_ADDRESS_RECEIVER`` (``AMQ_FEDERATION_QUEUE_RECEIVER``) on its
answer to each address (queue) receiver: there is no connection-level
federation capability, so the first answer is where it shows. Without it the
link is closed and that kind of remote policy is refused on this connection
(logged once; `refused()`), no further receiver is attached for it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from relaymq.outgoing.node import node_id
from relaymq_amqp.engine import Terminus
from relaymq_amqp.initiated import attach_receiver

from relaymq_federation import wire
from relaymq_federation.config import DEFAULTS, AddressPolicy, QueuePolicy
from relaymq_federation.kernel import principal_of
from relaymq_federation.policies import PolicyRunner
from relaymq_federation.publisher import LocalPublisher

log = logging.getLogger("relaymq.federation")

#: seconds between checks that every wanted receiver is attached
RECONCILE_EVERY = 1.0


class _PeerConnection:
    """Receivers on the connection the peer opened, beside its control link."""

    def __init__(self, link: Any, setting: Any) -> None:
        self.link = link  # the control link (`relaymq_amqp.link_handlers.IncomingLink`)
        self.setting = setting

    def is_open(self) -> bool:
        conn = self.link.conn
        return not self.link.closed and conn.engine is not None and not conn.closed

    async def attach_receiver(self, name: str, source: Terminus, target: Terminus, *,
                              on_message: Any, credit: int, properties: dict[str, Any],
                              desired_capabilities: list[str]) -> Any:
        timeout = float(self.setting("attach-timeout"))  # seconds, as Artemis
        return await attach_receiver(self.link.conn, self.link.pn, name, source, target,
                                     on_message=on_message, credit=credit, properties=properties,
                                     desired_capabilities=desired_capabilities, timeout=timeout)


class RemotePolicies:
    """The policies one control link brought, at work on this broker."""

    def __init__(self, link: Any, configuration: dict[str, Any]) -> None:
        broker = link.broker
        name = link.remote_properties.get(wire.FEDERATION_NAME)
        self.name = str(name) if name else link.name
        self.configuration = configuration
        self.remote_id: str | None = link.remote_container
        label = f"federation {self.name} (remote policies of {self.remote_id})"
        # what the peer's side sends in is routed with the rights of the user it
        # authenticated as (it chose the policies)
        self.publisher = LocalPublisher(broker, label, self.remote_id, principal_of(link))
        peer = _PeerConnection(link, self.setting)
        self.runner = PolicyRunner(broker, peer, name=self.name, node_id=node_id(broker),
                                   setting=self.setting, publisher=self.publisher,
                                   is_open=peer.is_open)
        self.runner.remote_id = self.remote_id
        self.runner.require_offered = True
        self.runner.enable()
        self._task = asyncio.get_running_loop().create_task(self._reconcile(), name=label)

    def setting(self, key: str) -> Any:
        value = self.configuration.get(key)
        default = DEFAULTS.get(key)
        if value is None:
            return default
        if isinstance(default, int) and not isinstance(default, bool):
            try:
                return int(value)
            except (TypeError, ValueError):
                return default
        return value

    def add(self, policy: AddressPolicy | QueuePolicy) -> None:
        if isinstance(policy, AddressPolicy):
            self.runner.add_address_policy(policy, scan=True)
        else:
            self.runner.add_queue_policy(policy, scan=True)
        self.runner.enable()
        log.info("federation %s: applying %s %r of node %s", self.name,
                 "address policy" if isinstance(policy, AddressPolicy) else "queue policy",
                 policy.name, self.remote_id)

    def refused(self) -> dict[str, str]:
        """Why the peer's address / queue receivers are refused (empty: none are)."""
        return self.runner.refused()

    async def _reconcile(self) -> None:
        while True:
            await asyncio.sleep(RECONCILE_EVERY)
            self.runner.reconcile()

    def stop(self) -> None:
        self._task.cancel()
        loop = asyncio.get_running_loop()

        async def stop() -> None:
            await self.runner.stop()
            await self.publisher.close()

        loop.create_task(stop())
