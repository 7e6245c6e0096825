"""What one incoming connection's federation holds, shared by the handlers of
its links (`target`, `events`)."""

from __future__ import annotations

import asyncio
from typing import Any

from relaymq_federation.config import AddressPolicy, QueuePolicy
from relaymq_federation.kernel import network_connection, principal_of

CONTROL_CREDIT = 10
PRECONDITION = "amqp:precondition-failed"


class PeerState:
    """What one incoming connection's federation holds: its control link, the
    policies it sent, and the network kernel connection its links consume with."""

    def __init__(self) -> None:
        self.control: Any = None  # the `target.ControlLink`
        self.configuration: dict[str, Any] = {}
        self.address_policies: list[AddressPolicy] = []
        self.queue_policies: list[QueuePolicy] = []
        self.kconn: Any = None
        self.links: set[Any] = set()
        self.key = 0
        #: the link the peer receives events on, and what it asked for and was refused
        self.events: Any = None
        self.missing: set[tuple[str, str | None]] = set()
        self.watch: asyncio.Task[None] | None = None

    async def kernel(self, link: Any) -> Any:
        """The kernel connection the peer's receivers consume with (as the
        peer's user, see `kernel`)."""
        if self.kconn is None or self.kconn.closed:
            self.kconn = network_connection(link.broker, principal_of(link), link.name,
                                            link.remote_container)
        return self.kconn

    def release(self) -> None:
        """Forget this connection's federation once its last link is gone."""
        if self.control is None and not self.links:
            if _PEERS.get(self.key) is self:
                del _PEERS[self.key]
            if self.kconn is not None:
                kconn, self.kconn = self.kconn, None
                asyncio.get_running_loop().create_task(kconn.close())
            if self.watch is not None:
                self.watch.cancel()
                self.watch = None


#: by the AMQP connection's id (a compiled connection takes no weak reference);
#: an entry lives as long as one of its links (the connection detaches them all
#: when it goes away)
_PEERS: dict[int, PeerState] = {}


def peer_state(conn: Any) -> PeerState:
    state = _PEERS.get(id(conn))
    if state is None:
        state = _PEERS[id(conn)] = PeerState()
        state.key = id(conn)
    return state
