"""The broker as users start it: `relaymq run` in its own process (uvloop, tuned GC),
reached by real clients of both protocols."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from relaymq.testing import free_port, wait_until
from relaymq.testing.net import wait_listening

pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
proton = pytest.importorskip("proton", reason="python-qpid-proton is not installed")

from proton.utils import BlockingConnection  # noqa: E402

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


@pytest.fixture
def broker_process(tmp_path):
    amqp_port, stomp_port = free_port(), free_port()
    cfg = tmp_path / "activemq.xml"
    cfg.write_text(f"""<beans xmlns="http://www.springframework.org/schema/beans">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="e2e" dataDirectory="{tmp_path}/data">
    <persistenceAdapter><kahaDB directory="{tmp_path}/data/kahadb"/></persistenceAdapter>
    <transportConnectors>
      <transportConnector name="amqp" uri="amqp://127.0.0.1:{amqp_port}?maximumConnections=1000"/>
      <transportConnector name="stomp" uri="stomp+nio://127.0.0.1:{stomp_port}"/>
      <transportConnector name="openwire" uri="tcp://127.0.0.1:0"/>
    </transportConnectors>
  </broker>
</beans>""")
    proc = subprocess.Popen([RELAYMQ, "run", "--config", str(cfg)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 20
    for port in (amqp_port, stomp_port):
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                if time.monotonic() >= deadline:
                    raise AssertionError("broker did not listen") from None
                time.sleep(0.05)
    yield proc, amqp_port, stomp_port
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    proc.output = out  # type: ignore[attr-defined]


def test_amqp_and_stomp_clients_against_relaymq_run(broker_process):
    proc, amqp_port, stomp_port = broker_process
    got = []

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame):
            got.append((frame.body, frame.headers.get("color")))

    sc = stomp.Connection([("127.0.0.1", stomp_port)])
    sc.set_listener("", Listener())
    sc.connect(wait=True)
    sc.subscribe("/queue/from-amqp", id=1, ack="auto")
    bc = BlockingConnection(f"127.0.0.1:{amqp_port}")
    try:
        sender = bc.create_sender("queue://from-amqp")
        for i in range(20):
            sender.send(proton.Message(body=f"m{i}", properties={"color": "red"}, durable=True))
        sc.send("/queue/from-stomp", "hello amqp", headers={"persistent": "true", "color": "blue"})
        receiver = bc.create_receiver("queue://from-stomp")
        msg = receiver.receive(timeout=10)
        receiver.accept()
        assert msg.properties.get("color") == "blue" and msg.durable
        wait_until(lambda: len(got) >= 20, "20 messages at the STOMP subscriber")
        assert got == [(f"m{i}", "red") for i in range(20)]
    finally:
        bc.close()
        sc.disconnect()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "no installed transport serves 'tcp://'" in out, "the OpenWire connector is skipped with a warning"
    assert "Traceback" not in out


def test_each_configuration_warning_is_logged_once(tmp_path):
    """`relaymq run` checks the configuration before it starts and logs what it
    ignores; building the broker and starting its store convert the same elements
    again and do not log it a second time."""
    pytest.importorskip("relaymq_bridge", reason="relaymq-bridge is not installed")
    pytest.importorskip("relaymq_mirror", reason="relaymq-mirror is not installed")
    port = free_port()
    cfg = tmp_path / "activemq.xml"
    cfg.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core" brokerName="once">
  <persistenceAdapter>
    <kahaDB directory="{tmp_path}/kahadb" fooBar="1" indexCacheSize="50000"/>
  </persistenceAdapter>
  <plugins>
    <simpleAuthenticationPlugin zork="1" anonymousAccessAllowed="true">
      <users><authenticationUser username="a" password="b" groups="admins"/></users>
    </simpleAuthenticationPlugin>
  </plugins>
  <destinationInterceptors>
    <virtualDestinationInterceptor qqq="1">
      <virtualDestinations><virtualTopic name="&gt;" prefix="VirtualTopic.*."/></virtualDestinations>
    </virtualDestinationInterceptor>
  </destinationInterceptors>
  <bridges>
    <bridge name="b1" source-uri="amqp://127.0.0.1:1" source-destination="queue://a"
            target-uri="amqp://127.0.0.1:2" target-destination="queue://b" wibble="3"
            auto-start="false"/>
  </bridges>
  <broker-connections>
    <amqp-connection uri="tcp://127.0.0.1:1" name="dr" auto-start="false" bogus-knob="1">
      <mirror/>
    </amqp-connection>
  </broker-connections>
  <transportConnectors>
    <transportConnector name="amqp" uri="amqp://127.0.0.1:{port}"/>
  </transportConnectors>
</broker>""")
    proc = subprocess.Popen([RELAYMQ, "run", "--config", str(cfg)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_listening(port, proc, timeout=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    for what in ("attribute 'fooBar' is ignored", "indexCacheSize=50000 has no effect",
                 "attribute 'wibble' is ignored", "attribute 'bogus-knob' is ignored",
                 "attribute 'zork' is ignored", "plain-text passwords for a",
                 "attribute 'qqq' is ignored"):
        assert out.count(what) == 1, (what, out)
    assert "fooBar is not a kahaDB attribute" not in out  # one wording for one problem
