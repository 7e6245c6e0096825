"""populateJMSXUserID: messages carry the authenticated sender, not what it claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from proton import Message
from proton.utils import BlockingConnection, SendException

from .matrix import ENC_KEY, plugins


def _amqp(bt: Any, user: str, password: str) -> BlockingConnection:
    host, port = bt.address("amqp")
    return BlockingConnection(f"amqp://{host}:{port}", timeout=5, user=user, password=password,
                              allowed_mechs="PLAIN")


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIVEMQ_ENCRYPTION_PASSWORD", ENC_KEY)


def _with_attribute(tmp_path: Path) -> Any:
    from .conftest import BROKER, CONNECTORS, broker_from
    path = tmp_path / "activemq.xml"
    path.write_text(BROKER.replace('persistent="false"', 'persistent="false" populateJMSXUserID="true"')
                    .format(body=CONNECTORS + plugins(anonymous=True, authorization=False)))
    return broker_from(path)


def test_without_populate_the_senders_user_id_passes(start: Any, stomp_client: Any) -> None:
    bt = start(plugins(anonymous=True, authorization=False))
    consumer = stomp_client(bt, "admin", "adminpw")
    assert consumer.subscribe("/queue/ids") == "receipt"
    sender = _amqp(bt, "app", "mypassword")
    try:
        sender.create_sender("queue://ids").send(Message(body="claimed", user_id=b"mallory"))
    finally:
        sender.close()
    assert consumer.col.wait(lambda: len(consumer.col.messages) == 1)
    assert consumer.col.messages[0].headers.get("JMSXUserID") == "mallory"


def test_populate_jmsx_user_id_stamps_the_authenticated_user(tmp_path: Path,
                                                             stomp_client: Any) -> None:
    bt = _with_attribute(tmp_path)
    try:
        consumer = stomp_client(bt, "admin", "adminpw")
        assert consumer.subscribe("/queue/stamped") == "receipt"
        app = _amqp(bt, "app", "mypassword")
        try:
            sender = app.create_sender("queue://stamped")
            sender.send(Message(body="a"))  # no user-id: stamped
            sender.send(Message(body="own", user_id=b"app"))  # its own: fine
            with pytest.raises(SendException):  # somebody else's: refused
                sender.send(Message(body="forged", user_id=b"mallory"))
        finally:
            app.close()
        reader = stomp_client(bt, "reader", "readerpw")
        assert reader.send("/queue/stamped", "b", JMSXUserID="mallory") == "receipt"
        anonymous = stomp_client(bt)
        assert anonymous.send("/queue/stamped", "c") == "receipt"
        assert consumer.col.wait(lambda: len(consumer.col.messages) == 4)
        seen = {m.body: m.headers.get("JMSXUserID") for m in consumer.col.messages}
        assert seen == {"a": "app", "own": "app", "b": "reader", "c": None}
        # a STOMP sender's user reaches AMQP consumers too
        admin = _amqp(bt, "admin", "adminpw")
        try:
            assert reader.send("/queue/stamped.amqp", "d") == "receipt"
            got = admin.create_receiver("queue://stamped.amqp", credit=1).receive(timeout=5)
            assert got.user_id == b"reader"
        finally:
            admin.close()
    finally:
        bt.stop()
