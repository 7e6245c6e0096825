"""Brokers and clients for the queue-type tests: a `relaymq run` process, or a broker
embedded in a thread (for tests that call the management API), both reached by
stomp.py and proton over real sockets."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import stomp
from relaymq.testing import free_port, wait_until
from relaymq.testing.processes import RelaymqProcess
from relaymq.testing.threads import BrokerThread


def broker_xml(name: str, policies: str, extra: str = "") -> str:
    """The tests' broker: `policies` (policy entries), kahaDB in {data}, STOMP and AMQP
    on {stomp} and {amqp} (the template `Broker` and `EmbeddedBroker` format), `extra`
    (other <broker> children) verbatim."""
    return f"""<broker xmlns="http://activemq.apache.org/schema/core" brokerName="{name}"
        dataDirectory="{{data}}">
  <destinationPolicy><policyMap><policyEntries>
    {policies}
  </policyEntries></policyMap></destinationPolicy>
  <persistenceAdapter><kahaDB directory="{{data}}/kahadb"/></persistenceAdapter>
  {extra}
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{{stomp}}"/>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{{amqp}}"/>
  </transportConnectors>
</broker>"""


class Broker(RelaymqProcess):
    """A `relaymq run` process with the configuration `template` (formatted with
    `data`, `stomp` and `amqp`)."""

    def __init__(self, tmp: Path, template: str) -> None:
        self.tmp = tmp
        self.template = template
        self.stomp_port, self.amqp_port = free_port(), free_port()
        super().__init__(tmp / "activemq.xml", tmp / "broker.log", [self.stomp_port])
        self.write_config(template)

    def write_config(self, template: str) -> None:
        self.config.write_text(template.format(data=self.tmp / "data", stomp=self.stomp_port,
                                               amqp=self.amqp_port))

    def start(self, *, wait: bool = True, timeout: float = 30.0) -> Broker:
        super().start(wait=wait, timeout=timeout)
        return self

    def reload(self, template: str, expect: str) -> None:
        """Rewrite the configuration and SIGHUP the broker; wait for `expect` in its log."""
        assert self.proc is not None
        self.write_config(template)
        self.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: expect in self.output(), f"{expect!r} in the broker log", 20)

    def stop(self, timeout: float = 30.0, must_stop: bool = True) -> None:
        """SIGTERM; AssertionError unless it exits 0 (a clean stop)."""
        super().stop(timeout, must_stop)
        assert self.proc is not None and self.proc.returncode == 0, self.output()


class EmbeddedBroker:
    """A broker of this process on its own event loop thread, with connectors on
    free ports; `call(fn)` runs `await fn(broker)` there (management calls)."""

    def __init__(self, tmp: Path, template: str) -> None:
        self.tmp = tmp
        self.template = template
        self.stomp_port, self.amqp_port = free_port(), free_port()
        self.thread: BrokerThread | None = None

    @property
    def broker(self) -> Any:
        assert self.thread is not None
        return self.thread.broker

    def start(self) -> None:
        from relaymq.config import load_config_text

        text = self.template.format(data=self.tmp / "data", stomp=self.stomp_port,
                                    amqp=self.amqp_port)
        self.thread = BrokerThread(load_config_text(text))

    def call(self, fn: Callable[[Any], Any]) -> Any:
        async def run() -> Any:
            result = fn(self.broker)
            return await result if asyncio.iscoroutine(result) else result

        assert self.thread is not None
        return self.thread.run(run())

    def stop(self) -> None:
        assert self.thread is not None
        self.thread.stop()


class Client(stomp.ConnectionListener):
    """A STOMP 1.2 client that records what it receives and the ERROR frames it gets."""

    def __init__(self, broker: Broker | EmbeddedBroker, name: str = "c",
                 client_id: str | None = None, login: tuple[str, str] | None = None) -> None:
        self.name = name
        self.messages: list = []
        self.errors: list = []
        self.receipts: set[str] = set()
        self.browse_ends = 0
        self.lock = threading.Lock()
        self.on_msg: Callable[[Client, Any], None] | None = None
        self.conn = stomp.Connection12([("127.0.0.1", broker.stomp_port)])
        self.conn.set_listener("", self)
        headers = {"client-id": client_id} if client_id else {}
        if login is not None:
            headers.update(login=login[0], passcode=login[1])
        self.conn.connect(wait=True, headers=headers)

    def on_message(self, frame) -> None:  # type: ignore[no-untyped-def]
        if frame.headers.get("browser") == "end":
            self.browse_ends += 1  # the empty MESSAGE that ends a browse
            return
        with self.lock:
            self.messages.append(frame)
        if self.on_msg is not None:
            self.on_msg(self, frame)

    def on_error(self, frame) -> None:  # type: ignore[no-untyped-def]
        self.errors.append(frame)

    def on_receipt(self, frame) -> None:  # type: ignore[no-untyped-def]
        self.receipts.add(frame.headers["receipt-id"])

    def send(self, dest: str, body: str, **headers: str) -> None:
        """SEND with a receipt: returns once the broker has taken the message."""
        rid = f"r{time.monotonic_ns()}"
        self.conn.send(dest, body, headers={**headers, "receipt": rid})
        wait_until(lambda: rid in self.receipts or self.errors, f"receipt {rid}", 10)
        assert not self.errors, self.errors[0].body

    def subscribe(self, dest: str, id: str, **headers: str) -> None:
        """SUBSCRIBE with a receipt: returns once the broker has bound the consumer."""
        rid = f"s{time.monotonic_ns()}"
        self.conn.subscribe(dest, id=id, ack=headers.pop("ack", "auto"),
                            headers={**headers, "receipt": rid})
        wait_until(lambda: rid in self.receipts or self.errors, f"receipt {rid}", 10)

    def ack(self, frame: Any) -> None:
        """ACK with a receipt: returns once the broker has settled the message."""
        rid = f"a{time.monotonic_ns()}"
        self.conn.ack(frame.headers["ack"], receipt=rid)
        wait_until(lambda: rid in self.receipts or self.errors, f"receipt {rid}", 10)

    def with_receipt(self, frame: Callable[[str], None]) -> None:
        """Send a frame (`frame(receipt_id)` sends it) and wait for its RECEIPT."""
        rid = f"x{time.monotonic_ns()}"
        frame(rid)
        wait_until(lambda: rid in self.receipts or self.errors, f"receipt {rid}", 10)
        assert not self.errors, self.errors[0].body

    def begin(self, txid: str) -> None:
        self.with_receipt(lambda rid: self.conn.begin(txid, headers={"receipt": rid}))

    def commit(self, txid: str) -> None:
        self.with_receipt(lambda rid: self.conn.commit(txid, headers={"receipt": rid}))

    def abort(self, txid: str) -> None:
        self.with_receipt(lambda rid: self.conn.abort(txid, headers={"receipt": rid}))

    def bodies(self) -> list[str]:
        return [m.body for m in self.messages]

    def bodies_of(self, subscription: str) -> list[str]:
        return [m.body for m in self.messages if m.headers.get("subscription") == subscription]

    def wait(self, count: int, timeout: float = 20) -> list[str]:
        wait_until(lambda: len(self.messages) >= count, f"{count} messages at {self.name} (have {len(self.messages)})", timeout)
        return self.bodies()

    def wait_for(self, body: str, timeout: float = 20) -> list[str]:
        """Wait for a message with `body` (a marker sent last); returns every body so far."""
        wait_until(lambda: body in self.bodies(), f"{body!r} at {self.name}", timeout)
        return self.bodies()

    def wait_error(self, timeout: float = 10) -> str:
        wait_until(lambda: self.errors, f"an ERROR frame at {self.name}", timeout)
        return str(self.errors[0].headers.get("message", "")) + " " + str(self.errors[0].body)

    def close(self) -> None:
        if self.conn.is_connected():
            self.conn.disconnect()
