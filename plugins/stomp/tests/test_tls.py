"""`stomp+ssl://` with a self-signed certificate made for the test."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import pytest
import stomp

from .conftest import Collector

openssl = shutil.which("openssl")
pytestmark = pytest.mark.skipif(openssl is None, reason="needs the openssl command-line tool "
                                "to make a self-signed certificate")


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "server.key", d / "server.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(crt), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return crt, key


@pytest.fixture
def tls_broker(start_broker, cert):
    crt, key = cert
    return start_broker(f"stomp+ssl://127.0.0.1:0?certFile={crt}&keyFile={key}")


def test_stomp_py_over_tls(tls_broker, cert) -> None:
    crt, _ = cert
    conn = stomp.Connection12([(tls_broker.host, tls_broker.port)], reconnect_attempts_max=1)
    conn.set_ssl(for_hosts=[(tls_broker.host, tls_broker.port)], ca_certs=str(crt),
                 ssl_version=ssl.PROTOCOL_TLS_CLIENT)
    col = Collector()
    conn.set_listener("c", col)
    conn.connect(wait=True)
    conn.subscribe("/queue/secure", id="1")
    conn.send("/queue/secure", "encrypted", receipt="r")
    assert col.wait_receipt("r")
    assert [m.body for m in col.wait_messages(1)] == ["encrypted"]
    conn.disconnect()


def test_tls_raw_and_plaintext_refused(tls_broker, cert) -> None:
    crt, _ = cert
    ctx = ssl.create_default_context(cafile=str(crt))
    with socket.create_connection((tls_broker.host, tls_broker.port), timeout=5) as s, \
            ctx.wrap_socket(s, server_hostname="localhost") as t:
        t.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
        data = t.recv(4096)
        assert data.startswith(b"CONNECTED\n")
    with socket.create_connection((tls_broker.host, tls_broker.port), timeout=5) as s:
        s.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        assert not data.startswith(b"CONNECTED")


def test_tls_without_certificate_is_a_config_error(start_broker) -> None:
    with pytest.raises(Exception, match="certFile"):
        start_broker("stomp+ssl://127.0.0.1:0")
