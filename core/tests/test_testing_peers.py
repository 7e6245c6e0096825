"""`relaymq.testing.peers`: a peer killed with kill -9 and started again is the same
node, with what it stored, and serves clients once `start` returns -- what the
crash tests against RabbitMQ count on."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from proton import Message, Terminus
from proton.reactor import LinkOption
from proton.utils import BlockingConnection
from relaymq.testing.net import is_listening
from relaymq.testing.peers import Peer


class _Durable(LinkOption):
    """A durable node: RabbitMQ declares the queue durable."""

    def apply(self, link: Any) -> None:
        (link.target if link.is_sender else link.source).durability = Terminus.CONFIGURATION


@pytest.mark.timeout(300)  # a restart may take up to 180 s on a loaded machine
def test_rabbitmq_killed_and_started_again_serves_its_stored_messages_at_once(rabbitmq: Peer) -> None:
    url = f"amqp://guest:guest@127.0.0.1:{rabbitmq.amqp_port}"
    queue = f"peers.restart.{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(url, timeout=20, allowed_mechs="PLAIN")
    try:  # a blocking send returns once RabbitMQ has accepted: the message is stored
        conn.create_sender(queue, options=_Durable()).send(Message(body="kept", durable=True))
    finally:
        conn.close()
    rabbitmq.stop(kill=True)
    # the Erlang VM is gone, not only the rabbitmq-server script: nothing answers
    assert not is_listening(rabbitmq.amqp_port) and not is_listening(rabbitmq.stomp_port)
    rabbitmq.start()
    # no retry: the node has booted (same node name and data directory) when start returns;
    # a node that recovers on a loaded machine may still take a while to deliver
    conn = BlockingConnection(url, timeout=20, allowed_mechs="PLAIN")
    try:
        receiver = conn.create_receiver(queue, options=_Durable())
        assert receiver.receive(timeout=60).body == "kept"
        receiver.accept()
    finally:
        conn.close()
