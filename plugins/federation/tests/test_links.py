"""<sender>, <receiver> and <peer> between two `relaymq run` brokers."""

from __future__ import annotations

from fedtools import Brokers, before_marker, client, connection_xml, receive_all, send


def test_sender_and_receiver_between_two_brokers(brokers: Brokers) -> None:
    brokers.start("b")
    brokers.start("a", connection_xml("b", brokers.port("b"),
                                      '<sender address-match="outbound.#"/><receiver queue-name="inbound"/>'),
                  queues=("inbound",))
    # sender: a queue created on A after the connection started is forwarded to B
    send(brokers.url("a"), "queue://outbound.orders", [f"o{i}" for i in range(20)], durable=True)
    with client(brokers.url("b")) as c:
        r = c.create_receiver("queue://outbound.orders", credit=50)
        assert receive_all(r, 20) == [f"o{i}" for i in range(20)]
        send(brokers.url("a"), "queue://outbound.orders", ["end"], durable=True)
        assert before_marker(r, "end") == []  # forwarded behind them: nothing twice
    # receiver: what B holds for "inbound" is pulled into A's queue
    send(brokers.url("b"), "queue://inbound", [f"i{i}" for i in range(10)], durable=True)
    with client(brokers.url("a")) as c:
        r = c.create_receiver("queue://inbound", credit=50)
        assert receive_all(r, 10) == [f"i{i}" for i in range(10)]
