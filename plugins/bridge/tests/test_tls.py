"""Bridges over TLS: `amqps://` and `stomp+ssl://` endpoints of RelayMQ brokers
listening with a self-signed certificate made for the test (openssl)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from bridge_helpers import Drain, produce, until
from relaymq.broker.broker import Broker
from relaymq.config import load_config_text
from relaymq.testing import running_broker
from relaymq_bridge import BridgeState
from relaymq_bridge.manager import manager_of

openssl = shutil.which("openssl")
pytestmark = pytest.mark.skipif(openssl is None, reason="needs the openssl command-line tool "
                                "to make a self-signed certificate")


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "server.key", d / "server.pem"
    assert openssl is not None
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(crt), "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return crt, key


def port_of(broker: Broker, scheme: str) -> str:
    return broker.connector_address(scheme).rpartition(":")[2]


async def bridge_host(xml: str) -> Broker:
    host = Broker(load_config_text(f"""<broker persistent="false" brokerName="host">
  <bridges>{xml}</bridges></broker>""", "xml"), strict=True)
    await host.start()
    return host


@pytest.mark.parametrize("source_scheme,target_scheme",
                         [("amqps", "stomp+ssl"), ("stomp+ssl", "amqps"), ("amqps", "amqps")])
async def test_bridge_over_tls(cert: tuple[Path, Path], source_scheme: str,
                               target_scheme: str) -> None:
    crt, key = cert
    files = f"certFile={crt}&keyFile={key}"
    listen = (f"amqps://127.0.0.1:0?{files}", f"stomp+ssl://127.0.0.1:0?{files}",
              "amqp://127.0.0.1:0")
    async with running_broker(None, *listen) as source, running_broker(None, *listen) as target:
        src = f"{source_scheme}://localhost:{port_of(source, source_scheme)}?caFile={crt}"
        dst = f"{target_scheme}://localhost:{port_of(target, target_scheme)}?caFile={crt}"
        host = await bridge_host(f"""
  <bridge name="tls" source-uri="{src}" source-destination="queue://src"
          target-uri="{dst}" target-destination="queue://dst" quality-of-service="ONCE_AND_ONLY_ONCE"
          max-batch-size="10" max-batch-time="50" failure-retry-interval="100"/>""")
        drain = Drain()
        try:
            await produce(f"amqp://{source.connector_address('amqp')}", "queue://src", 25)
            await drain.start(f"amqp://{target.connector_address('amqp')}", "queue://dst")
            await until(lambda: len(drain.deliveries) == 25, what="25 messages over TLS")
            assert sorted(drain.bodies) == sorted(f"m-{i}" for i in range(25))
            info = manager_of(host).get("tls").info()
            assert info["state"] == "running" and info["failures"] == 0, info
        finally:
            await drain.close()
            await host.stop()


async def test_an_untrusted_certificate_is_a_clear_retried_failure(cert: tuple[Path, Path]) -> None:
    """Without the CA file the self-signed certificate is refused: the bridge says so
    and retries; given the CA file on the same broker it forwards."""
    crt, key = cert
    files = f"certFile={crt}&keyFile={key}"
    async with running_broker(None, f"amqps://127.0.0.1:0?{files}", "amqp://127.0.0.1:0") as b:
        tls_port = port_of(b, "amqps")
        host = await bridge_host(f"""
  <bridge name="untrusted" source-uri="amqp://{b.connector_address('amqp')}"
          source-destination="queue://a" target-uri="amqps://localhost:{tls_port}"
          target-destination="queue://b" failure-retry-interval="100"/>""")
        try:
            bridge = manager_of(host).get("untrusted")
            await until(lambda: bridge.retries >= 2, what="retries after the refused certificate")
            assert bridge.state in (BridgeState.RETRYING, BridgeState.STARTING)
            assert "certificate" in (bridge.last_error or "").lower(), bridge.last_error
        finally:
            await host.stop()
