"""Brokers configured from activemq.xml text on a background loop, real clients.

stomp.py and proton's BlockingConnection are blocking clients, so each broker
runs on its own event loop thread; tests are plain functions talking over
loopback sockets. ``start(xml_body, files={...})`` writes activemq.xml (and any
login.config / properties files) into a temporary directory and starts it.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import stomp
from relaymq.config.loader import load_config
from relaymq.testing.stomp_collector import Collector
from relaymq.testing.threads import BrokerThread

BROKER = ('<beans><broker xmlns="http://activemq.apache.org/schema/core" brokerName="auth" '
          'persistent="false">{body}</broker></beans>')
CONNECTORS = ('<transportConnectors>'
              '<transportConnector name="stomp" uri="stomp://127.0.0.1:0"/>'
              '<transportConnector name="amqp" uri="amqp://127.0.0.1:0"/>'
              '</transportConnectors>')


def broker_from(path: Path) -> BrokerThread:
    """A started broker configured from the activemq.xml at `path`."""
    return BrokerThread(load_config(path, strict=True))


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., BrokerThread]]:
    """``start(body, files={"login.config": ...})`` -> a started BrokerThread."""
    started: list[BrokerThread] = []

    def _start(body: str, files: dict[str, str] | None = None,
               connectors: str = CONNECTORS) -> BrokerThread:
        for name, text in (files or {}).items():
            (tmp_path / name).write_text(text, encoding="utf-8")
        path = tmp_path / "activemq.xml"
        path.write_text(BROKER.format(body=connectors + body), encoding="utf-8")
        bt = broker_from(path)
        started.append(bt)
        return bt

    yield _start
    for bt in started:
        bt.stop()


@pytest.fixture
def audit(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The audit log lines (``relaymq.audit``) captured as the test runs."""
    caplog.set_level(logging.INFO, logger="relaymq.audit")
    return caplog


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "relaymq.audit"]


# -- STOMP -----------------------------------------------------------------------------


class Stomp:
    """One stomp.py 1.2 connection and what it received."""

    def __init__(self, bt: BrokerThread, login: str | None = None, passcode: str | None = None,
                 wait: bool = True, ssl: dict[str, Any] | None = None,
                 scheme: str = "stomp") -> None:
        host, port = bt.address(scheme)
        self.conn = stomp.Connection12([(host, port)], reconnect_attempts_max=1,
                                       heartbeats=(0, 0))
        if ssl is not None:
            self.conn.set_ssl(for_hosts=[(host, port)], **ssl)
        self.col = Collector()
        self.conn.set_listener("c", self.col)
        kw: dict[str, Any] = {}
        if login is not None:
            kw["username"] = login
        if passcode is not None:
            kw["passcode"] = passcode
        self.conn.connect(wait=wait, **kw)

    @property
    def connected(self) -> bool:
        return bool(self.conn.is_connected())

    def send(self, destination: str, body: str = "x", **headers: Any) -> Any:
        """SEND with a receipt: the RECEIPT, or the ERROR frame that refused it."""
        rid = uuid.uuid4().hex
        before = len(self.col.errors)
        self.conn.send(destination, body, receipt=rid, headers=headers)
        self.col.wait(lambda: rid in self.col.receipts or len(self.col.errors) > before)
        if rid in self.col.receipts:
            return "receipt"
        return self.col.errors[-1] if len(self.col.errors) > before else None

    def subscribe(self, destination: str, sub_id: str | None = None, **headers: Any) -> Any:
        rid = uuid.uuid4().hex
        before = len(self.col.errors)
        self.conn.subscribe(destination, id=sub_id or uuid.uuid4().hex, receipt=rid,
                            headers=headers)
        self.col.wait(lambda: rid in self.col.receipts or len(self.col.errors) > before)
        if rid in self.col.receipts:
            return "receipt"
        return self.col.errors[-1] if len(self.col.errors) > before else None

    def close(self) -> None:
        if self.conn.is_connected():
            try:
                self.conn.disconnect()
            except Exception:  # noqa: BLE001
                pass


@pytest.fixture
def stomp_client() -> Iterator[Callable[..., Stomp]]:
    made: list[Stomp] = []

    def make(bt: BrokerThread, login: str | None = None, passcode: str | None = None,
             **kw: Any) -> Stomp:
        client = Stomp(bt, login, passcode, **kw)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


# -- certificates ----------------------------------------------------------------------

openssl = shutil.which("openssl")


class CertificateAuthority:
    """A test certificate authority made with the openssl command, and certificates
    it signs (the server's, and clients' with the subjects a test asks for)."""

    def __init__(self, directory: Path, name: str = "ca") -> None:
        if openssl is None:
            pytest.skip("the openssl command is not installed; it makes the test certificates")
        self.dir = directory
        self.key, self.cert = directory / f"{name}.key", directory / f"{name}.pem"
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                 "-keyout", self.key, "-out", self.cert, "-subj", f"/CN=RelayMQ Test {name}")

    def issue(self, name: str, subject: str, server: bool = False) -> tuple[Path, Path]:
        key, csr, crt = (self.dir / f"{name}.key", self.dir / f"{name}.csr",
                         self.dir / f"{name}.pem")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
                 "-subj", subject)
        ext = self.dir / f"{name}.ext"
        ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n" if server
                       else "extendedKeyUsage=clientAuth\n")
        _openssl("x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key,
                 "-CAcreateserial", "-days", "2", "-out", crt, "-extfile", ext)
        return crt, key


def _openssl(*args: Any) -> None:
    assert openssl is not None
    subprocess.run([openssl, *map(str, args)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A CA, a server certificate, two client certificates it signs, and a client
    certificate from a CA the broker does not trust."""
    d = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(d)
    rogue = CertificateAuthority(d, "rogue-ca")
    return {
        "ca": ca.cert,
        "server": ca.issue("server", "/CN=localhost", server=True),
        "app": ca.issue("app", "/C=US/O=RelayMQ Tests/CN=app-client"),
        "stranger": ca.issue("stranger", "/C=US/O=RelayMQ Tests/CN=stranger"),
        "rogue": rogue.issue("rogue", "/C=US/O=RelayMQ Tests/CN=app-client"),
    }
