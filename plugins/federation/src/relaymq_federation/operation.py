"""``<federation>`` inside ``<amqp-connection>``: the source side.

On each connection it opens the control link (Artemis' shape: a sender to a
dynamic target, link properties ``federation_version``,
``federation-configuration`` and ``federationName``), sends the remote
policies over it, and runs the local policies (`policies.PolicyRunner`):
demand on a matching local address (a topic consumer) opens an address
receiver on the peer, demand on a matching local queue opens a queue receiver
(consumer priority adjusted by ``priority-adjustment``). Receivers go away
after the idle timeout when the demand does.

The connection also serves the peer's federation links (its
``relaymq.amqp_link_handlers``): a peer that applies this broker's remote
policies attaches its address and queue receivers back over it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, NoReturn

from relaymq.config.model import PluginElement
from relaymq.config.report import Report
from relaymq.errors import ConfigError
from relaymq.outgoing.node import node_id
from relaymq_amqp import engine as pn
from relaymq_amqp.encode import section
from relaymq_amqp.engine import Terminus
from relaymq_amqp.outgoing.common import LinkRefused
from relaymq_amqp.types import Symbol

from relaymq_federation import wire
from relaymq_federation.config import FederationConfig, federation_config
from relaymq_federation.policies import PolicyRunner
from relaymq_federation.publisher import LocalPublisher
from relaymq_federation.source_events import DELETE_ON_CLOSE, SourceEvents
from relaymq_federation.state import peer_state

log = logging.getLogger("relaymq.federation")

__all__ = ["DELETE_ON_CLOSE", "Federation", "policy_command"]
#: seconds between checks that every wanted receiver is attached
RECONCILE_EVERY = 1.0


def policy_command(op: str, policy_map: dict[str, Any]) -> bytes:
    """A control-link command: the op-type annotation and the policy map."""
    return section(0x72, {Symbol(wire.OP_TYPE): op}) + section(0x77, policy_map)


class Federation:
    """One ``<federation>`` element (a `ConnectionOperation`)."""

    def __init__(self, element: PluginElement, broker: Any) -> None:
        self.element = element
        self.broker = broker
        self.config: FederationConfig = federation_config(element, "")
        self.conn: Any = None
        self.node_id = node_id(broker)  # the container id of its broker connection too
        self.remote_id: str | None = None
        self.control: Any = None
        self.publisher: LocalPublisher | None = None
        self.policies: PolicyRunner | None = None
        self.peer_links: Any = None
        self.events: SourceEvents | None = None
        #: why the peer's answer to the control link was refused (None: it was not)
        self.control_refused: str | None = None
        self._task: asyncio.Task[None] | None = None
        #: set by `stop`: the run loop ends even if a call it awaits turned the
        #: cancellation into an ordinary error (it would otherwise retry for ever)
        self._stopping = False
        #: the last reason the control link could not be attached (each logged once)
        self._attach_error: str | None = None

    @classmethod
    def from_element(cls, element: PluginElement, broker: Any) -> Federation:
        return cls(element, broker)

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False) -> list[str]:
        """`relaymq config check` (and `run`, before anything starts): every policy
        converted; returns the warnings (attributes not understood, a policy
        without includes), errors under --strict."""
        report = Report(strict=strict, quiet=True)  # returned: the caller reports them
        try:
            federation_config(element, "", report)
        except ConfigError as exc:
            report.absorb(exc)
        report.raise_if_errors()
        return report.warnings

    @property
    def addresses(self) -> Any:
        return self.policies.addresses if self.policies is not None else None

    @property
    def queues(self) -> Any:
        return self.policies.queues if self.policies is not None else None

    # -- lifecycle --------------------------------------------------------------------
    async def start(self, connection: Any) -> None:
        if not hasattr(connection, "attach_receiver"):
            raise TypeError(f"<federation> needs an AMQP connection, not {type(connection).__name__}")
        self.conn = connection
        self._stopping = False  # started again after management's stop
        self.control = None
        cfg = self.config
        if not cfg.name:
            cfg.name = connection.name
        serve = getattr(connection, "serve_peer_links", None)
        if serve is not None:
            self.peer_links = serve(self.broker)
        # Demand is tracked from the start: consumers that come while the peer is
        # still unreachable are served once the control link is up.
        self.publisher = LocalPublisher(self.broker, f"federation {cfg.name}", None)
        runner = self.policies = PolicyRunner(
            self.broker, connection, name=cfg.name, node_id=self.node_id, setting=cfg.setting,
            publisher=self.publisher, is_open=lambda: bool(connection.state.value == "open"))
        # as Artemis: the peer must offer AMQ_FEDERATION_ADDRESS/QUEUE_RECEIVER on its answer
        runner.require_offered = True
        self.events = SourceEvents(connection, cfg.name, self.node_id, runner)
        for policy in cfg.local_address_policies:
            runner.add_address_policy(policy)
        for qpolicy in cfg.local_queue_policies:
            runner.add_queue_policy(qpolicy)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"federation {cfg.name}")

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self.peer_links is not None:
            state = peer_state(self.peer_links)
            if state.control is self:
                state.control = None
                state.release()
        if self.events is not None:
            try:
                await self.events.close()
            except Exception:  # noqa: BLE001 - the connection is going anyway
                pass
        if self.policies is not None:
            await self.policies.stop()
        if self.publisher is not None:
            await self.publisher.close()

    async def _run(self) -> None:
        conn = self.conn
        cfg = self.config
        while not self._stopping:
            try:
                await conn.wait_open()
                self.remote_id = conn.remote_container
                await self._open_control_link()
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried: the peer may come later
                if self._stopping:
                    return
                # a refusal is logged once, where it is found; anything else once per
                # reason (a connection that gave up says so at every try)
                if self.control_refused is None and str(exc) != self._attach_error:
                    log.warning("federation %s: control link not attached: %s", cfg.name, exc)
                    self._attach_error = str(exc)
                pause = max(conn.options.retry_interval, 0.5)
                log.debug("federation %s: control link tried again in %.1f s", cfg.name, pause)
                await asyncio.sleep(pause)
        if self._stopping:
            return
        assert self.publisher is not None and self.policies is not None
        self.publisher.origin = self.remote_id
        self.publisher.reset()
        self.policies.remote_id = self.remote_id
        conn.add_listener(self._reconnected)
        self.policies.enable()
        while not self._stopping:
            await asyncio.sleep(RECONCILE_EVERY)
            if self._control_lost():
                await self._attach_again()
            if self.events is not None:
                self.events.check()
            self.policies.reconcile()

    def _control_lost(self) -> bool:
        """The connection is open and the control link is gone: the peer closed it
        (a broker that stops gracefully closes its links before its connections, and
        the connection opened again has none)."""
        control = self.control
        return self.conn.state.value == "open" and (control is None or bool(control.closed))

    async def _attach_again(self) -> None:
        """Attach the control and events links again and send the remote policies
        again, as Artemis does on each new connection."""
        name = self.config.name
        try:
            if self.events is not None:
                await self.events.close()
            await self._open_control_link()
        except Exception as exc:  # noqa: BLE001 - tried again on the next round
            if str(exc) != self._attach_error:  # once per reason, not every round
                log.info("federation %s: control link not attached again yet: %s", name, exc)
                self._attach_error = str(exc)
            return
        self._attach_error = None
        log.info("federation %s: control link attached again", name)
        if self.policies is not None:
            for receivers in self.policies.all_receivers():
                receivers.reset_refusal()

    def _reconnected(self, conn: Any, state: Any) -> None:
        if getattr(state, "value", state) != "open":
            return
        if self.policies is not None:
            for receivers in self.policies.all_receivers():
                receivers.reset_refusal()  # a new connection asks the peer again
        if self.config.remote_address_policies or self.config.remote_queue_policies:
            # the control link is attached again on the new connection: the peer
            # there has none of our remote policies yet
            asyncio.get_running_loop().create_task(self._resend_policies())
        remote = getattr(conn, "remote_container", None)
        if remote and remote != self.remote_id:
            # a failover host is another broker: what came from it carries its id
            log.info("federation %s: now connected to node %s (was %s)", self.config.name, remote,
                     self.remote_id)
            self.remote_id = remote
            if self.publisher is not None:
                self.publisher.origin = remote
                self.publisher.reset()
            if self.policies is not None:
                self.policies.remote_id = remote
                self.policies.reevaluate()

    async def _resend_policies(self) -> None:
        try:
            control = self.control
            if control is not None:
                await control.attached
            await self._send_policies()
        except Exception as exc:  # noqa: BLE001 - the connection went again: sent on the next one
            log.info("federation %s: remote policies not sent again: %s", self.config.name, exc)

    # -- control link -----------------------------------------------------------------
    async def _open_control_link(self) -> None:
        cfg = self.config
        name = f"{wire.CONTROL_LINK_PREFIX}{cfg.name}:{self.node_id}:{_uuid()}"
        target = Terminus(kind=2, dynamic=True, capabilities=["temporary-topic"],
                          expiry_policy=pn.EXPIRE_WITH_LINK,
                          dynamic_node_properties={Symbol("lifetime-policy"): DELETE_ON_CLOSE})
        try:
            # on a session of its own: a peer without federation may end the session
            # to refuse the link (RabbitMQ: dynamic targets not supported), which
            # then leaves the connection and its other links (<sender>, other
            # federations) alone instead of taking the connection down at each try
            self.control = await self.conn.attach_sender(
                name, Terminus(kind=1), target,
                properties={wire.VERSION: 2, wire.CONFIGURATION: cfg.to_configuration_map(),
                            wire.FEDERATION_NAME: cfg.name},
                desired_capabilities=[wire.CONTROL_LINK], session=f"federation {cfg.name}")
        except LinkRefused as exc:
            self.control = None
            cond = getattr(exc, "amqp_condition", None)
            self._refused(f"the peer refused the control link ({cond or 'no reason given'})")
        offered = getattr(self.control, "remote_offered_capabilities", None) or []
        if wire.CONTROL_LINK not in offered:
            # as Artemis: no federation without the capability on the answer
            await self.control.close()
            self.control = None
            self._refused(f"the peer does not offer {wire.CONTROL_LINK} on the control link")
        self.control_refused = None
        if self.peer_links is not None:
            # a federation connection now: the peer may attach its receivers over it
            # (it does on the remote policies sent next)
            peer_state(self.peer_links).control = self
        events = self.events
        if events is not None:
            # as Artemis: the events links' outcome is known before policies are at work
            if (cfg.remote_address_policies or cfg.remote_queue_policies) and \
                    self.peer_links is not None:
                await events.open_sender(peer_state(self.peer_links))
            if cfg.local_address_policies or cfg.local_queue_policies:
                await events.open_receiver()
        await self._send_policies()

    def _refused(self, reason: str) -> NoReturn:
        """The peer will not have the control link: logged once per reason, shown by
        management (`control`), tried again every retry-interval."""
        if self.control_refused != reason:
            log.warning("federation %s: refused: %s; tried again every %.1f s", self.config.name,
                        reason, max(self.conn.options.retry_interval, 0.5))
        self.control_refused = reason
        raise RuntimeError(reason)

    async def _send_policies(self) -> None:
        for policy in self.config.remote_address_policies:
            await self._command(wire.ADD_ADDRESS_POLICY, policy.to_map())
        for qpolicy in self.config.remote_queue_policies:
            await self._command(wire.ADD_QUEUE_POLICY, qpolicy.to_map())

    async def _command(self, op: str, policy_map: dict[str, Any]) -> None:
        outcome = await self.control.send(policy_command(op, policy_map))
        if not outcome.accepted:
            raise RuntimeError(f"the peer did not accept {op} {policy_map.get('policy-name')!r}: "
                               f"{outcome.state} {outcome.condition or ''}")

    def resource_added(self, address: str, queue: str | None) -> None:
        """An event on a link the peer attached: what a receiver was refused for exists."""
        if self.policies is not None:
            self.policies.resource_added(address, queue)

    # -- management -------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        p = self.policies
        return {
            "federation": self.config.name, "remote": self.remote_id,
            "control": "refused: " + self.control_refused if self.control_refused else
            ("attached" if self.control is not None and not self.control.closed else "detached"),
            "address_receivers": p.addresses.open_keys() if p and p.addresses else [],
            "queue_receivers": p.queues.open_keys() if p and p.queues else [],
            "received": sum(r.received for r in p.all_receivers()) if p else 0,
            #: demand without its receiver now, and attaches under way
            "address_waiting": p.addresses.waiting() if p and p.addresses else [],
            "queue_waiting": p.queues.waiting() if p and p.queues else [],
            "attaching": sum(r.attaching for r in p.all_receivers()) if p else 0,
            #: kind ("address"/"queue") -> why the peer's receivers are refused
            "refused": p.refused() if p else {},
            "events": self.events.status() if self.events is not None else {},
        }


def _uuid() -> str:
    import uuid

    return str(uuid.uuid4())
