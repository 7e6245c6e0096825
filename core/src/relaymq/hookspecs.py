"""Hook specifications: the ways a plugin composes with the RelayMQ kernel.

Names read ``relaymq_<area>_<event>``. An implementation may take any subset of
a spec's arguments, so specs grow without breaking plugins. Implementations are
validated at start-up: a misspelt hook name in a plugin stops the broker.

Hooks here are for build-time composition and cheap, rare events. The
per-message path never fans out through pluggy: `relaymq_interceptors` returns
async filters once, and the kernel folds them into one chain.

Plugins register an object with ``@hookimpl`` methods through the entry point
group ``relaymq.hooks`` (always loaded: hooks observe, they do not enable
features) or as the object the configured plugin element constructs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from relaymq.broker.chain import SendFilter
    from relaymq.broker.connection import ClientConnection
    from relaymq.broker.security import ConnectRequest, Principal
    from relaymq.config.model import BrokerConfig
    from relaymq.dispatch.consumer import Consumer
    from relaymq.model.destination import Destination
    from relaymq.model.message import Message
    from relaymq.spi.broker import BrokerHandle

hookspec = pluggy.HookspecMarker("relaymq")
hookimpl = pluggy.HookimplMarker("relaymq")


# ---------------------------------------------------------------------------
# Initialization
# ---------------------------------------------------------------------------


@hookspec(historic=True)
def relaymq_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Called at plugin registration so a plugin can add its own hook specs.

    :param pluginmanager: the broker's pluggy plugin manager; call
        ``pluginmanager.add_hookspecs(module)``.

    This hook is historic: plugins registered later are called too.
    """


@hookspec
def relaymq_configure(broker: BrokerHandle, config: BrokerConfig) -> None:
    """Called once after the configuration is loaded, before anything starts.

    :param broker: the broker being assembled.
    :param config: the typed configuration.
    """


# ---------------------------------------------------------------------------
# Persistence
# ---------------------------------------------------------------------------


@hookspec
def relaymq_persistence_started(broker: BrokerHandle, adapter: Any) -> None:
    """Called when the persistence adapter has started and recovered its state.

    :param broker: the broker.
    :param adapter: the started ``PersistenceAdapter``.
    """


@hookspec
def relaymq_persistence_recovered(broker: BrokerHandle, destination: Destination, count: int) -> None:
    """Called after a destination's stored messages were recovered at start-up.

    :param broker: the broker.
    :param destination: the recovered destination.
    :param count: how many stored messages it holds.
    """


# ---------------------------------------------------------------------------
# Transports
# ---------------------------------------------------------------------------


@hookspec
def relaymq_transport_started(broker: BrokerHandle, scheme: str, address: str) -> None:
    """Called when a transport connector listens.

    :param broker: the broker.
    :param scheme: the URI scheme (``amqp``, ``stomp``, ...).
    :param address: what it listens on, ``host:port`` or a vm name.
    """


# ---------------------------------------------------------------------------
# Interceptors
# ---------------------------------------------------------------------------


@hookspec
def relaymq_interceptors(broker: BrokerHandle) -> list[SendFilter] | None:
    """Return async send filters to fold into the broker's interceptor chain.

    Called once at start-up, after configured destination interceptors are
    built. Filters returned here come after the configured ones, in plugin
    registration order. A filter is ``async def f(ctx, message, next)`` and
    calls ``await next(ctx, message)`` zero or more times.

    :param broker: the broker being assembled.
    """


# ---------------------------------------------------------------------------
# Connection operations
# ---------------------------------------------------------------------------


@hookspec
def relaymq_broker_connection_started(broker: BrokerHandle, name: str, uri: str) -> None:
    """Called each time an outgoing connection of ``broker.outgoing`` opens.

    That is every ``<amqp-connection>`` and every connection a plugin (mirror,
    federation, bridge) opened through the broker's registry, again after each
    reconnection (docs/outgoing-connections.md).

    :param broker: the broker.
    :param name: the connection's name (``<amqp-connection name>``, or the one its plugin gave).
    :param uri: the host that answered (for a failover list, the one it connected to).
    """


# ---------------------------------------------------------------------------
# Security
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def relaymq_authenticate(broker: BrokerHandle, request: ConnectRequest) -> Principal | None:
    """Return the principal for a connecting client, or raise ``SecurityError``.

    :param broker: the broker.
    :param request: who connects: user name, password, client id, transport, address.

    Stops at first non-None result. With no implementation every client is
    allowed as an anonymous principal (or the user name it gave). The result may
    be an awaitable of the principal (a password check that runs a KDF in a
    thread); the broker awaits it, and it may raise ``SecurityError`` too.
    """


@hookspec(firstresult=True)
def relaymq_authorize(
    broker: BrokerHandle, principal: Principal, action: str, destination: Destination,
    connection: ClientConnection | None,
) -> bool | None:
    """Return False to refuse ``action`` on ``destination``; None to abstain.

    :param broker: the broker.
    :param principal: the authenticated principal.
    :param action: ``read`` (consume, browse), ``write`` (send) or ``admin``
        (create, including the creation a first send or subscribe causes).
    :param destination: the destination acted on (a composite one as named).
    :param connection: the connection asking (``remote_address``, ``transport``),
        or None when the broker or management asks on a principal's behalf.

    Stops at first non-None result. Called when a producer first sends to a
    destination on a connection and when a consumer is created, not per message;
    connections remember the answers until ``broker.security_changed()``.
    The default allows everything.
    """


# ---------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------


@hookspec
def relaymq_broker_started(broker: BrokerHandle) -> None:
    """Called when the broker has started and its connectors listen.

    :param broker: the broker.
    """


@hookspec
def relaymq_broker_stopping(broker: BrokerHandle) -> None:
    """Called when the broker begins to stop, before connectors close.

    :param broker: the broker.
    """


@hookspec
def relaymq_config_reloaded(broker: BrokerHandle, config: BrokerConfig) -> None:
    """Called after ``relaymq run`` re-read its configuration on SIGHUP and the kernel
    applied the destination policies; a plugin applies what it can change safely
    (relaymq-auth: users, groups and permissions) and leaves the rest for a restart.

    :param broker: the broker.
    :param config: the configuration as re-read (already validated).
    """


@hookspec
def relaymq_destination_added(broker: BrokerHandle, destination: Destination,
                              recovered: bool) -> None:
    """Called when a destination is created, or restored from the store at start-up.

    :param broker: the broker.
    :param destination: the new destination.
    :param recovered: True when the destination was restored from the store at
        start-up (it existed before the restart), False when it was created now.
    """


@hookspec
def relaymq_destination_removed(broker: BrokerHandle, destination: Destination) -> None:
    """Called when a destination is deleted.

    :param broker: the broker.
    :param destination: the removed destination.
    """


@hookspec
def relaymq_consumer_added(broker: BrokerHandle, consumer: Consumer) -> None:
    """Called when a consumer (or browser) attaches to a destination.

    :param broker: the broker.
    :param consumer: the new consumer; ``consumer.destination``, ``consumer.selector``.
    """


@hookspec
def relaymq_consumer_removed(broker: BrokerHandle, consumer: Consumer) -> None:
    """Called when a consumer detaches.

    :param broker: the broker.
    :param consumer: the consumer that went away.
    """


@hookspec
def relaymq_connection_opened(broker: BrokerHandle, connection: Any) -> None:
    """Called when a client connection is opened (after authentication).

    :param broker: the broker.
    :param connection: the kernel connection (``id``, ``client_id``, ``transport``,
        ``remote_address``); the client id of an AMQP connection may be set later.
    """


@hookspec
def relaymq_connection_closed(broker: BrokerHandle, connection: Any) -> None:
    """Called when a client connection has closed (its consumers are gone).

    :param broker: the broker.
    :param connection: the kernel connection that closed.
    """


@hookspec
def relaymq_producer_added(broker: BrokerHandle, connection: Any, destination: Destination) -> None:
    """Called when a producer attaches to a destination (an AMQP sender link with a
    target; anonymous producers and single STOMP SENDs are not producers).

    :param broker: the broker.
    :param connection: the kernel connection the producer belongs to.
    :param destination: where it sends.
    """


@hookspec
def relaymq_producer_removed(broker: BrokerHandle, connection: Any, destination: Destination) -> None:
    """Called when a producer detaches (its link closed, or its connection).

    :param broker: the broker.
    :param connection: the kernel connection the producer belonged to.
    :param destination: where it sent.
    """


@hookspec
def relaymq_message_dead_lettered(
    broker: BrokerHandle, message: Message, destination: Destination, reason: str
) -> None:
    """Called when a message is moved to a dead-letter queue (or discarded).

    :param broker: the broker.
    :param message: the dead-lettered copy.
    :param destination: where it was before.
    :param reason: why (``expired``, ``max redeliveries exceeded``, ``rejected``).
    """


@hookspec
def relaymq_message_expired(broker: BrokerHandle, message: Message, destination: Destination) -> None:
    """Called when a message's expiration passed before it was consumed.

    :param broker: the broker.
    :param message: the expired message.
    :param destination: where it was.
    """
