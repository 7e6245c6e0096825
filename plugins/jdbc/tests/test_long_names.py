"""Names as long as the JDBC store's key columns hold, counted the way the database
counts them: `VARCHAR(250)` holds 250 *characters* on PostgreSQL, in any script
(up to 1,000 bytes of UTF-8), and SQLite, which enforces no width, is held to the
same declared 250 characters. A destination key (`queue://NAME`) or a durable
subscription key (`durable://CLIENT:NAME`) of 250 non-ASCII characters is stored
and survives a restart; one of 251 is refused, saying "at most 250 characters",
on that send or subscribe alone: the connection and the other destinations go on.

Real `relaymq run` processes on SQLite and on PostgreSQL 15, stomp.py and the
AMQP client; what the store holds is read with `relaymq jdbc inspect`."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator

import pytest
from relaymq.testing.processes import RELAYMQ
from relaymq.testing.waits import wait_until
from relaymq_jdbc.testing import PostgresCluster

from .brokers import BrokerProcess

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")

from proton.utils import BlockingConnection, LinkDetached  # noqa: E402

#: 2, 3 and 4 bytes each in UTF-8, one character each in PostgreSQL and Python
NON_ASCII = "é日😀"
CLIENT = "jdbc-long"
REFUSED_CLIENT = "jdbc-refused"


def sized(key_prefix: str, tag: str, length: int, alphabet: str = NON_ASCII) -> str:
    """A name whose key (`key_prefix` + name) is `length` characters long."""
    fill = length - len(key_prefix) - len(tag)
    return tag + (alphabet * fill)[:fill]


SUB_PREFIX = f"durable://{CLIENT}:"
REFUSED_PREFIX = f"durable://{REFUSED_CLIENT}:"
# keys of exactly 250 characters: 250 to 1,000 bytes of UTF-8
Q_FITS = sized("queue://", "fits.", 250)
Q_OTHER_FITS = sized("queue://", "other.", 250)
Q_ASCII_FITS = sized("queue://", "ascii.", 250, "x")
T_FITS = sized("topic://", "fits.", 250)
SUB_FITS = sized(SUB_PREFIX, "fits.", 250)
# keys of 251 characters
Q_TOO_LONG = sized("queue://", "long.", 251)
Q_ASCII_TOO_LONG = sized("queue://", "ascii-long.", 251, "x")
SUB_TOO_LONG = sized(REFUSED_PREFIX, "long.", 251)


@pytest.fixture(scope="module",
                params=["sqlite", pytest.param("postgresql", marks=pytest.mark.external("postgres"))])
def broker(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp(f"long-names-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{tmp / 'store.sqlite'}"
    else:
        cluster: PostgresCluster = request.getfixturevalue("postgres")
        url = cluster.url(cluster.create_database())
    b = BrokerProcess(tmp, url, "longnames")
    b.start()
    yield b
    b.stop()


class Client(stomp.ConnectionListener):
    """A stomp.py connection that records what the broker answered."""

    def __init__(self, broker: BrokerProcess, client_id: str | None = None) -> None:
        self.broker = broker
        self.errors: list[dict[str, str]] = []
        self.receipts: list[str] = []
        self.bodies: list[str] = []
        self._lock = threading.Lock()
        self.conn = stomp.Connection12([("127.0.0.1", broker.stomp_port)])
        self.conn.set_listener("", self)
        headers = {"client-id": client_id} if client_id else {}
        self.conn.connect(wait=True, headers=headers)

    def on_error(self, frame) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            self.errors.append(dict(frame.headers))

    def on_receipt(self, frame) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            self.receipts.append(frame.headers["receipt-id"])

    def on_message(self, frame) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            self.bodies.append(frame.body)

    def answer(self, receipt: str) -> str:
        """"RECEIPT", or the ERROR frame's message, for the frame sent with `receipt`."""
        def answered() -> str | None:
            with self._lock:
                if receipt in self.receipts:
                    return "RECEIPT"
                for e in self.errors:
                    if e.get("receipt-id") == receipt:
                        return "ERROR: " + e.get("message", "")
            return None

        return wait_until(answered, f"the broker's answer to {receipt}", 30,
                          detail=self.broker.output)

    def send(self, destination: str, body: str, receipt: str) -> str:
        self.conn.send(destination, body, headers={"persistent": "true", "receipt": receipt})
        return self.answer(receipt)

    def subscribe(self, destination: str, sid: str, receipt: str, durable: str | None = None) -> str:
        headers = {"receipt": receipt}
        if durable is not None:
            headers["activemq.subscriptionName"] = durable
        self.conn.subscribe(destination, id=sid, ack="auto", headers=headers)
        return self.answer(receipt)

    def received(self, body: str) -> None:
        wait_until(lambda: body in self.bodies, f"the message {body!r}", 30,
                   detail=self.broker.output)

    def close(self) -> None:
        self.conn.disconnect()


def stored_keys(broker: BrokerProcess) -> dict[str, int]:
    """Every key the store holds, with its stored messages (`relaymq jdbc inspect`)."""
    proc = subprocess.run([RELAYMQ, "jdbc", "inspect", broker.url, "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {row["key"]: row["messages"] for row in json.loads(proc.stdout)["keys"]}


def refused(answer: str, size: int = 251) -> bool:
    return (answer.startswith("ERROR: ") and "too long" in answer
            and f"{size} characters" in answer and "at most 250 characters" in answer)


def test_keys_of_250_characters_are_stored_and_survive_a_restart(broker: BrokerProcess) -> None:
    for key in (f"queue://{Q_FITS}", f"topic://{T_FITS}", SUB_PREFIX + SUB_FITS):
        assert len(key) == 250 and len(key.encode()) > 600  # characters, not bytes
    assert len(f"queue://{Q_ASCII_FITS}".encode()) == 250
    c = Client(broker, CLIENT)
    assert c.send(f"/queue/{Q_FITS}", "queued", "q") == "RECEIPT"
    assert c.send(f"/queue/{Q_ASCII_FITS}", "queued (ascii)", "qa") == "RECEIPT"
    assert c.subscribe(f"/topic/{T_FITS}", "d", "d", durable=SUB_FITS) == "RECEIPT"
    c.close()  # the durable subscription stays, without a consumer
    p = Client(broker)
    assert p.send(f"/topic/{T_FITS}", "published", "t") == "RECEIPT"
    p.close()
    keys = stored_keys(broker)
    assert keys[f"queue://{Q_FITS}"] == 1
    assert keys[f"queue://{Q_ASCII_FITS}"] == 1
    assert keys[SUB_PREFIX + SUB_FITS] == 1

    broker.stop()
    broker.start()
    assert stored_keys(broker)[SUB_PREFIX + SUB_FITS] == 1
    c = Client(broker, CLIENT)
    assert c.subscribe(f"/queue/{Q_FITS}", "q", "q") == "RECEIPT"
    c.received("queued")
    assert c.subscribe(f"/queue/{Q_ASCII_FITS}", "qa", "qa") == "RECEIPT"
    c.received("queued (ascii)")
    assert c.subscribe(f"/topic/{T_FITS}", "d", "d", durable=SUB_FITS) == "RECEIPT"
    c.received("published")
    assert not c.errors
    c.close()


def test_a_key_of_251_characters_is_refused_alone(broker: BrokerProcess) -> None:
    assert len(f"queue://{Q_TOO_LONG}") == len(REFUSED_PREFIX + SUB_TOO_LONG) == 251
    assert len(f"queue://{Q_ASCII_TOO_LONG}".encode()) == 251
    c = Client(broker, REFUSED_CLIENT)
    answer = c.send(f"/queue/{Q_TOO_LONG}", "x", "long-send")
    assert refused(answer), answer
    answer = c.subscribe(f"/queue/{Q_TOO_LONG}", "long", "long-sub")
    assert refused(answer), answer
    answer = c.subscribe(f"/topic/{T_FITS}", "long-d", "long-durable", durable=SUB_TOO_LONG)
    assert refused(answer) and "durable subscription" in answer, answer
    answer = c.send(f"/queue/{Q_ASCII_TOO_LONG}", "x", "long-ascii")
    assert refused(answer), answer
    # the same connection goes on, to other destinations, 250 characters long included
    assert c.send("/queue/jdbc.after", "after (stomp)", "after") == "RECEIPT"
    assert c.send(f"/queue/{Q_OTHER_FITS}", "other", "other") == "RECEIPT"
    c.close()

    conn = BlockingConnection(f"amqp://127.0.0.1:{broker.amqp_port}", timeout=20)
    try:
        with pytest.raises(LinkDetached) as detached:
            conn.create_receiver(f"queue://{Q_TOO_LONG}", name="long-receiver")
        assert "at most 250 characters" in str(detached.value)
        with pytest.raises(LinkDetached) as detached:
            conn.create_sender(f"queue://{Q_TOO_LONG}", name="long-sender")
        assert "at most 250 characters" in str(detached.value)
        anonymous = conn.create_sender(None, name="anonymous")
        delivery = anonymous.send(proton.Message(address=f"queue://{Q_TOO_LONG}", body="x",
                                                 durable=True), error_states=[])
        assert delivery.remote_state == proton.Delivery.REJECTED
        condition = delivery.remote.condition
        assert condition is not None and "at most 250 characters" in condition.description
        # the anonymous link goes on too
        anonymous.send(proton.Message(address="queue://jdbc.after", body="after (anonymous)",
                                      durable=True))
        # the connection's other links go on
        conn.create_sender("queue://jdbc.after").send(proton.Message(body="after (amqp)", durable=True))
    finally:
        conn.close()

    keys = stored_keys(broker)
    assert keys["queue://jdbc.after"] == 3
    assert keys[f"queue://{Q_OTHER_FITS}"] == 1
    assert max(len(k) for k in keys) == 250, [k for k in keys if len(k) > 250]
