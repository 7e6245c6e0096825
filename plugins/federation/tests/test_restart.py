"""Federation keeps working across what operators do: the peer restarted
gracefully (it closes its links before its connections), and the connection
stopped and started through management (with a `<sender>` on it too)."""

from __future__ import annotations

import json
import socket
import urllib.request

from fedtools import Brokers, client, connection_xml, receive_all, send
from relaymq.testing import free_port, wait_until
from relaymq.testing.processes import RelaymqProcess

QUEUE_FEDERATION = ('<federation><local-queue-policy name="work"><include queue-match="work.*"/>'
                    '</local-queue-policy><property key="queueReceiverIdleTimeout" value="500"/>'
                    '</federation>')


def test_federation_attaches_again_after_the_peer_restarts_gracefully(brokers: Brokers) -> None:
    brokers.start("b", queues=("work.1", "work.2"))
    brokers.start("a", connection_xml("b", brokers.port("b"), QUEUE_FEDERATION))
    with client(brokers.url("a")) as ca:
        r1 = ca.create_receiver("queue://work.1", credit=10)
        send(brokers.url("b"), "queue://work.1", ["before-1", "before-2"])
        assert receive_all(r1, 2, timeout=30) == ["before-1", "before-2"]
    peer = brokers.procs["b"]
    peer.stop()  # SIGTERM: its links are closed first, then its connections
    peer.start()
    with client(brokers.url("a")) as ca:
        r2 = ca.create_receiver("queue://work.2", credit=10)
        send(brokers.url("b"), "queue://work.2", ["after-1", "after-2", "after-3"])
        assert receive_all(r2, 3, timeout=40) == ["after-1", "after-2", "after-3"], brokers.logs()
    assert "federation to-b: control link attached again" in brokers.procs["a"].output()


def _post(port: int, path: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/{path}", data=b"",
                                 method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_stop_and_start_through_management_brings_the_operations_back(brokers: Brokers) -> None:
    http = free_port()
    brokers.start("b", queues=("work.1", "outbound.x"))
    body = QUEUE_FEDERATION + '<sender address-match="outbound.#"/>'
    brokers.start("a", connection_xml("b", brokers.port("b"), body), queues=("outbound.x",),
                  plugins=f'<console host="127.0.0.1" port="{http}"/>')

    def console_up() -> bool:
        try:
            socket.create_connection(("127.0.0.1", http), timeout=1).close()
            return True
        except OSError:
            return False

    wait_until(console_up, "the console listening", 30)
    _post(http, "broker-connections/to-b/stop")
    _post(http, "broker-connections/to-b/start")
    with client(brokers.url("a")) as ca, client(brokers.url("b")) as cb:
        fed = ca.create_receiver("queue://work.1", credit=10)
        send(brokers.url("b"), "queue://work.1", ["federated-1", "federated-2"])
        assert receive_all(fed, 2, timeout=40) == ["federated-1", "federated-2"], brokers.logs()
        out = cb.create_receiver("queue://outbound.x", credit=10)
        send(brokers.url("a"), "queue://outbound.x", ["sent-1", "sent-2"])
        assert receive_all(out, 2, timeout=40) == ["sent-1", "sent-2"], brokers.logs()


def test_a_connection_that_gave_up_is_not_logged_at_every_retry(brokers: Brokers) -> None:
    """reconnect-attempts used up: the federation says why once, not every
    retry-interval for as long as the broker runs (its debug log shows each try)."""
    gone = free_port()
    cfg = brokers.configure("a", f'<amqp-connection uri="tcp://127.0.0.1:{gone}" name="to-nowhere" '
                                 f'retry-interval="200" reconnect-attempts="2">{QUEUE_FEDERATION}'
                                 '</amqp-connection>')
    a = RelaymqProcess(cfg, cfg.with_suffix(".log"), [brokers.port("a")],
                       args=["--log-level", "debug"])
    brokers.procs["a"] = a
    a.start()

    def tries() -> int:
        return a.output().count("federation to-nowhere: control link tried again")

    wait_until(lambda: tries() >= 10, "ten tries of the control link", 60)
    lines = [line for line in a.output().splitlines() if "control link not attached" in line]
    assert len(lines) <= 2, lines  # once while retrying, once when it gave up


def test_a_broker_stopping_does_not_log_its_own_close_as_the_peers(brokers: Brokers) -> None:
    """A graceful stop closes the federation's connection; what the peer closes in
    answer (its end of the control link, the connection) is not a warning that the
    peer closed it."""
    brokers.start("b", queues=("work.1",))
    brokers.start("a", connection_xml("b", brokers.port("b"), QUEUE_FEDERATION))
    with client(brokers.url("a")) as ca:
        r1 = ca.create_receiver("queue://work.1", credit=10)
        send(brokers.url("b"), "queue://work.1", ["one"])
        assert receive_all(r1, 1, timeout=30) == ["one"]
    a = brokers.procs["a"]
    a.stop()
    out = a.output()
    assert "broker a stopped" in out, out[-2000:]
    assert "closed by the peer" not in out and "closed the connection" not in out, out[-2000:]
