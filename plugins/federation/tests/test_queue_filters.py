"""Queue federation per consumer filter: one receiver per distinct (queue,
selector) of the local demand, carrying the selector to the remote so only
matching messages are pulled; each goes when the last consumer with its
filter leaves."""

from __future__ import annotations

from typing import Any

from fedtools import Advisories, Brokers, client, connection_xml, receive_all, until_markers
from proton import Message
from proton.reactor import Selector

QUEUE_POLICY = ('<federation><local-queue-policy name="work"><include queue-match="work.*"/>'
                '</local-queue-policy><property key="queueReceiverIdleTimeout" value="300"/>'
                '</federation>')


def _send_colours(url: str, colours: list[str]) -> None:
    with client(url) as c:
        s = c.create_sender("queue://work.1")
        for i, colour in enumerate(colours):
            s.send(Message(body=f"{colour}{i}", properties={"colour": colour}))


def _selecting(conn: Any, colour: str, name: str) -> Any:
    return conn.create_receiver("queue://work.1", credit=20, name=name,
                                options=Selector(f"colour = '{colour}'"))


def test_only_matching_messages_are_pulled_and_receivers_follow_the_filters(
        brokers: Brokers) -> None:
    brokers.start("a", queues=("work.1",))
    brokers.start("b", connection_xml("a", brokers.port("a"), QUEUE_POLICY))
    watch_a = Advisories(brokers.url("a"), "Queue", "work.1")
    try:
        _send_colours(brokers.url("a"), ["red", "blue", "red", "green", "blue", "red"])
        with client(brokers.url("b")) as cb:
            red = _selecting(cb, "red", "red")
            assert receive_all(red, 3) == ["red0", "red2", "red5"]
            assert watch_a.wait(lambda n: n == 1) == 1  # one receiver on A, for red
            blue = _selecting(cb, "blue", "blue")
            assert watch_a.wait(lambda n: n == 2) == 2  # a second one, for blue
            assert receive_all(blue, 2) == ["blue1", "blue4"]
            # a second red consumer shares the red receiver
            red_too = _selecting(cb, "red", "red-too")
            red.close()
            _send_colours(brokers.url("a"), ["red"])
            assert receive_all(red_too, 1) == ["red0"]
            # the last blue consumer leaves: its receiver goes after the idle timeout
            blue.close()
            assert watch_a.wait(lambda n: n == 1) == 1
            red_too.close()
            assert watch_a.wait(lambda n: n == 0) == 0
        # green matched no consumer: it never left A, and nothing else stayed there
        with client(brokers.url("a")) as ca:
            rest = ca.create_receiver("queue://work.1", credit=10)
            _send_colours(brokers.url("a"), ["end"])
            assert until_markers(rest, ["end0"]) == ["green3", "end0"]
    finally:
        watch_a.close()
