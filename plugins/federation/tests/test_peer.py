"""<peer>: the broker as a waypoint of Qpid Dispatch Router. A proton
container plays the router: it sees both links with the capability
``qd.waypoint``, sends a message into the broker's queue and gets it back
from the broker's sender (the waypoint round trip)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fedtools import Brokers, connection_xml
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
from relaymq.testing.peers import free_port
from relaymq.testing.waits import wait_until


def _caps(terminus: Any) -> list[str]:
    data = terminus.capabilities
    data.rewind()
    if data.next() is None:
        return []
    value = data.get_object()
    value = getattr(value, "elements", value)  # a symbol array
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)] if value is not None else []


class FakeRouter(MessagingHandler):  # type: ignore[misc]
    def __init__(self, port: int) -> None:
        super().__init__(auto_accept=True)
        self.port = port
        self.received: list[str] = []
        self.sender_caps: list[str] | None = None  # caps of the broker's sender's target
        self.receiver_caps: list[str] | None = None  # caps of the broker's receiver's source
        self.sent = False
        self.container: Container | None = None

    def on_start(self, event: Any) -> None:
        self.acceptor = event.container.listen(f"127.0.0.1:{self.port}")

    def on_link_opening(self, event: Any) -> None:
        link = event.link
        if link.is_receiver:  # the broker sends to us
            self.sender_caps = _caps(link.remote_target)
            link.target.address = link.remote_target.address
            link.source.address = link.remote_source.address
        else:  # the broker receives from us
            self.receiver_caps = _caps(link.remote_source)
            link.source.address = link.remote_source.address
            link.target.address = link.remote_target.address

    def on_sendable(self, event: Any) -> None:
        if not self.sent:
            event.sender.send(Message(body="through-the-waypoint", durable=True))
            self.sent = True

    def on_message(self, event: Any) -> None:
        self.received.append(event.message.body)

    def stop(self) -> None:
        self.acceptor.close()
        for c in list(getattr(self, "_conns", [])):
            c.close()

    def on_connection_opened(self, event: Any) -> None:
        self._conns = [*getattr(self, "_conns", []), event.connection]


def test_peer_links_are_waypoints(tmp_path: Path) -> None:
    port = free_port()
    router = FakeRouter(port)
    container = Container(router)
    container.container_id = "fake-router"
    thread = threading.Thread(target=container.run, daemon=True)
    thread.start()
    brokers = Brokers(tmp_path)
    try:
        brokers.start("a", connection_xml("router", port, '<peer address-match="shared.#"/>'),
                      queues=("shared.x",))
        try:
            wait_until(lambda: router.received, "a message back through the waypoint", 30)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {brokers.logs()}") from None
        assert router.received == ["through-the-waypoint"]
        assert router.sender_caps == ["qd.waypoint"]
        assert router.receiver_caps == ["qd.waypoint"]
    finally:
        brokers.close()
        container.stop()
        thread.join(10)
