"""Starting and running a broker as an operator does: `relaymq run` in its own process.

Each start-up failure is one line naming the connector, the address and the
configuration line, with its own exit status; `relaymq run` and `relaymq config
check` give the same diagnostics; `relaymq config init` writes a configuration that
loads; the `<logging>` element writes rotating files and JSON lines.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")

from relaymq.broker.startup import listen_failure  # noqa: E402
from relaymq.config.model import Origin, TransportConnectorConfig  # noqa: E402
from relaymq.testing import free_port  # noqa: E402

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))
FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parent.parent


def relaymq(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([RELAYMQ, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)


def broker_xml(tmp_path: Path, connectors: str, extra: str = "", name: str = "activemq.xml") -> Path:
    path = tmp_path / name
    path.write_text(f"""<beans xmlns="http://www.springframework.org/schema/beans">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="ops" dataDirectory="{tmp_path}/data">
    <persistenceAdapter><kahaDB directory="{tmp_path}/data/kahadb"/></persistenceAdapter>
    <transportConnectors>
{connectors}
    </transportConnectors>
{extra}
  </broker>
</beans>
""")
    return path


def one_error_line(done: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("relaymq: ")]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return lines[0]


def start(args: list[str], port: int, cwd: Path | None = None) -> subprocess.Popen:
    proc = subprocess.Popen([RELAYMQ, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=cwd)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(proc.stdout.read() if proc.stdout else "") from None
            if time.monotonic() >= deadline:
                proc.kill()
                raise AssertionError("the broker did not listen within 30 s") from None
            time.sleep(0.05)


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    return out


# ---------------------------------------------------------------------------
# Start-up errors: one line each, a distinct exit status
# ---------------------------------------------------------------------------


def test_a_port_in_use_is_one_line_naming_connector_address_and_line(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = broker_xml(tmp_path, f'      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>')
        done = relaymq("run", "-c", str(cfg))
    assert done.returncode == 3
    line = one_error_line(done)
    assert f'<transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"> at {cfg}:5' in line
    assert f"address 127.0.0.1:{port} is already in use" in line


def test_a_host_that_does_not_resolve_is_one_line(tmp_path) -> None:
    cfg = broker_xml(tmp_path, '      <transportConnector name="stomp" uri="stomp://no-such-host.invalid:61613"/>')
    done = relaymq("run", "-c", str(cfg))
    assert done.returncode == 3
    assert "host 'no-such-host.invalid' does not resolve" in one_error_line(done)


def test_a_missing_tls_file_is_one_line_naming_the_option(tmp_path) -> None:
    port = free_port()
    uri = f"stomp+ssl://127.0.0.1:{port}?certFile={tmp_path}/missing.pem&amp;keyFile={tmp_path}/k.pem"
    cfg = broker_xml(tmp_path, f'      <transportConnector name="tls" uri="{uri}"/>')
    done = relaymq("run", "-c", str(cfg))
    assert done.returncode == 3
    line = one_error_line(done)
    assert f"TLS certFile does not exist: {tmp_path}/missing.pem" in line
    assert f"at {cfg}:5" in line


def test_permission_denied_names_the_privileged_port() -> None:
    tc = TransportConnectorConfig(name="amqp", uri="amqp://0.0.0.0:80", origin=Origin("a.xml", 9))
    line = listen_failure(tc, "0.0.0.0", 80, PermissionError(errno.EACCES, "denied"))
    assert line == ('<transportConnector name="amqp" uri="amqp://0.0.0.0:80"> at a.xml:9: '
                    "permission denied to listen on 0.0.0.0:80 (ports below 1024 need privileges)")


def test_a_store_locked_by_another_broker_exits_4(tmp_path) -> None:
    port = free_port()
    first = broker_xml(tmp_path, f'      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>')
    second = broker_xml(tmp_path, f'      <transportConnector name="stomp" uri="stomp://127.0.0.1:{free_port()}"/>',
                        name="second.xml")
    proc = start(["run", "-c", str(first)], port)
    try:
        done = relaymq("run", "-c", str(second))
    finally:
        stop(proc)
    assert done.returncode == 4
    assert "is locked by another broker" in one_error_line(done)


# ---------------------------------------------------------------------------
# One validation path
# ---------------------------------------------------------------------------

BROKEN = """<broker xmlns="http://activemq.apache.org/schema/core" persistent="perhaps">
  <plugins><redeliveryPlugn/></plugins>
  <transportConnectors><transportConnector name="stomp" uri="stomp://127.0.0.1:1"/></transportConnectors>
</broker>
"""


@pytest.mark.parametrize("config", ["debian-activemq.xml", "broken.xml", "example"])
def test_run_and_config_check_give_the_same_diagnostics(tmp_path, config) -> None:
    if config == "example":
        path = ROOT / "conf" / "activemq.xml"
    elif config == "broken.xml":
        path = tmp_path / config
        path.write_text(BROKEN)
    else:
        path = FIXTURES / config
    check = relaymq("config", "check", str(path))
    if check.returncode == 0:
        # the example is fine: run would start it; its warnings are the same lines
        assert config == "example", check.stdout
        assert "OK" in check.stdout and "warning" not in check.stdout
        return
    assert check.returncode == 1
    run = relaymq("run", "-c", str(path))
    assert run.returncode == 1
    assert run.stderr.splitlines()[-len(check.stderr.splitlines()):] == check.stderr.splitlines()


def test_the_stock_debian_activemq_xml_is_refused_as_unreachable() -> None:
    check = relaymq("config", "check", str(FIXTURES / "debian-activemq.xml"))
    assert check.returncode == 1
    assert "this broker would serve only vm://" in check.stderr
    assert "--allow-vm-only" in check.stderr
    allowed = relaymq("config", "check", "--allow-vm-only", str(FIXTURES / "debian-activemq.xml"))
    assert allowed.returncode == 0, allowed.stderr
    assert "not available (no plugin serves them): openwire" in allowed.stdout


# ---------------------------------------------------------------------------
# First run: config init, the default listens on 127.0.0.1
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("flag", [[], ["--yaml"]], ids=["xml", "yaml"])
def test_config_init_writes_a_configuration_that_loads(tmp_path, flag) -> None:
    path = tmp_path / ("relaymq.yaml" if flag else "activemq.xml")
    done = relaymq("config", "init", *flag, str(path))
    assert done.returncode == 0, done.stderr
    check = relaymq("config", "check", str(path), "-D", f"activemq.data={tmp_path}/data")
    assert check.returncode == 0, check.stderr
    assert "persistence: kahaDB" in check.stdout
    assert "stomp stomp://127.0.0.1:61613" in check.stdout
    again = relaymq("config", "init", *flag, str(path))
    assert again.returncode == 1 and "pass --force" in again.stderr


def test_the_example_configuration_is_what_config_init_prints() -> None:
    done = relaymq("config", "init")
    assert done.returncode == 0
    assert done.stdout == (ROOT / "conf" / "activemq.xml").read_text()


def test_the_default_configuration_listens_on_localhost_and_says_so(tmp_path) -> None:
    # a default broker in an empty directory: ports are the standard ones, so only check
    # what it would serve (config check of the default is what run validates)
    from relaymq.checks import check
    from relaymq.plugins import PluginRegistry

    result = check(None, PluginRegistry(), {"relaymq.data": str(tmp_path)})
    assert result.ok, result.errors
    assert [tc.uri for tc in result.served] == ["amqp://127.0.0.1:5672", "stomp://127.0.0.1:61613"]
    wide = check(None, PluginRegistry(), {}, host="0.0.0.0")
    assert all(tc.uri.split("//")[1].startswith("0.0.0.0:") for tc in wide.served)


# ---------------------------------------------------------------------------
# Logging
# ---------------------------------------------------------------------------


def test_logging_writes_json_lines_to_a_rotating_file(tmp_path) -> None:
    port = free_port()
    log_file = tmp_path / "logs" / "relaymq.log"
    cfg = broker_xml(
        tmp_path, f'      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>',
        extra=f'    <logging level="WARN" console="false" file="{log_file}" format="json" '
              f'maxFileSize="64 kb" maxBackupIndex="2">\n'
              f'      <loggers><logger name="relaymq.broker" level="INFO"/></loggers>\n'
              f'    </logging>')
    proc = start(["run", "-c", str(cfg)], port)
    conn = stomp.Connection([("127.0.0.1", port)])
    conn.connect(wait=True)
    conn.disconnect()
    out = stop(proc)
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert {"time", "level", "logger", "message"} <= set(records[0])
    # relaymq.broker is raised to INFO; everything else stays at the root's WARNING
    assert any(r["logger"] == "relaymq.broker" and "started" in r["message"] for r in records)
    assert not any(r["logger"] == "relaymq.cli" for r in records), records
    assert "started" not in out  # console="false": nothing on stderr once logging is set up


def test_a_log_config_file_replaces_the_logging_element(tmp_path) -> None:
    port = free_port()
    log_file = tmp_path / "dict.log"
    log_config = tmp_path / "logging.yaml"
    log_config.write_text(f"""version: 1
formatters: {{plain: {{format: "%(levelname)s|%(name)s|%(message)s"}}}}
handlers: {{f: {{class: logging.FileHandler, filename: "{log_file}", formatter: plain}}}}
root: {{level: INFO, handlers: [f]}}
""")
    cfg = broker_xml(tmp_path, f'      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>')
    proc = start(["run", "-c", str(cfg), "--log-config", str(log_config)], port)
    stop(proc)
    assert "INFO|relaymq.broker|broker ops started" in log_file.read_text()


def test_a_log_file_that_cannot_be_written_is_one_line(tmp_path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    cfg = broker_xml(tmp_path, f'      <transportConnector name="stomp" uri="stomp://127.0.0.1:{free_port()}"/>',
                     extra=f'    <logging file="{blocker}/x/relaymq.log"/>')
    done = relaymq("run", "-c", str(cfg))
    assert done.returncode == 1
    assert "cannot write the log file" in one_error_line(done)


def test_audit_records_go_only_to_the_audit_file(tmp_path) -> None:
    import logging

    from relaymq.config.model import LogFileConfig, LoggingConfig
    from relaymq.logsetup import AUDIT_LOGGER, configure_logging

    main_log, audit_log = tmp_path / "main.log", tmp_path / "audit.log"
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging(LoggingConfig(console=False, output=LogFileConfig(file=str(main_log)),
                                        audit=LogFileConfig(file=str(audit_log), format="json")),
                          None, "INFO")
        logging.getLogger(AUDIT_LOGGER).info("user app sent to queue://orders")
        logging.getLogger("relaymq.broker").info("broker line")
    finally:
        for h in list(root.handlers) + list(logging.getLogger(AUDIT_LOGGER).handlers):
            h.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logging.getLogger(AUDIT_LOGGER).handlers.clear()
        logging.getLogger(AUDIT_LOGGER).propagate = True
    assert json.loads(audit_log.read_text())["message"] == "user app sent to queue://orders"
    assert "broker line" in main_log.read_text()
    assert "queue://orders" not in main_log.read_text()
    assert os.path.getsize(audit_log) > 0


def test_the_logging_element_reads_the_same_from_xml_and_yaml(tmp_path) -> None:
    from relaymq.config.loader import load_config

    xml = tmp_path / "a.xml"
    xml.write_text('<broker><logging level="warn" file="/var/log/r.log" maxFileSize="1 mb" '
                   'format="json"><loggers><logger name="relaymq.stomp" level="DEBUG"/></loggers>'
                   '<audit file="/var/log/audit.log"/></logging></broker>')
    yml = tmp_path / "a.yaml"
    yml.write_text("broker:\n  logging:\n    level: warn\n    file: /var/log/r.log\n"
                   "    maxFileSize: 1 mb\n    format: json\n"
                   "    loggers:\n      - logger: {name: relaymq.stomp, level: DEBUG}\n"
                   "    audit: {file: /var/log/audit.log}\n")
    a, b = load_config(str(xml)).logging, load_config(str(yml)).logging
    assert a == b
    assert a is not None and a.level == "WARNING" and a.output.max_file_size == 1 << 20
    assert a.loggers == {"relaymq.stomp": "DEBUG"} and a.audit is not None
    bad = tmp_path / "bad.xml"
    bad.write_text('<broker><logging level="LOUD" format="xml"/></broker>')
    from relaymq.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        load_config(str(bad))
    assert any('level "LOUD"' in e for e in info.value.errors)
    assert any('format "xml"' in e for e in info.value.errors)


# ---------------------------------------------------------------------------
# Running as a service: SIGHUP reload, SIGTERM within the drain timeout
# ---------------------------------------------------------------------------


class Collect(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.messages: list = []
        self.errors: list = []
        self.receipts: list = []
        self.disconnected = False

    def on_message(self, frame) -> None:
        self.messages.append(frame)

    def on_error(self, frame) -> None:
        self.errors.append(frame)

    def on_disconnected(self) -> None:
        self.disconnected = True

    def on_receipt(self, frame) -> None:
        self.receipts.append(frame.headers.get("receipt-id"))

    def wait(self, count: int, timeout: float = 15) -> list:
        deadline = time.monotonic() + timeout
        while len(self.messages) < count:
            if time.monotonic() >= deadline:
                raise AssertionError(f"{len(self.messages)} of {count} messages within {timeout} s")
            time.sleep(0.02)
        return self.messages


def wait_for_line(path: Path, text: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        if time.monotonic() >= deadline:
            raise AssertionError(f"no '{text}' in {path} within {timeout} s")
        time.sleep(0.05)


POLICY = """    <destinationPolicy><policyMap><policyEntries>
      <policyEntry queue="reload.>"><deadLetterStrategy>
        <individualDeadLetterStrategy queuePrefix="DLQ."/></deadLetterStrategy></policyEntry>
    </policyEntries></policyMap></destinationPolicy>"""


def dead_letter_one(conn: stomp.Connection12, listener: Collect, queue: str, sub: str) -> None:
    # persistent: like ActiveMQ, the DLQ strategies drop non-persistent messages by default
    conn.send(f"/queue/{queue}", f"poison on {queue}",
              headers={"receipt": f"s-{sub}", "persistent": "true"})
    seen = len(listener.messages)  # counted before subscribing: the delivery may come at once
    conn.subscribe(f"/queue/{queue}", id=sub, ack="client-individual")
    frame = listener.wait(seen + 1)[-1]
    conn.nack(frame.headers["ack"])
    conn.unsubscribe(sub)


def test_sighup_reloads_a_policy_without_dropping_connections(tmp_path) -> None:
    port = free_port()
    log_file = tmp_path / "broker.log"
    connectors = f'      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>'
    logging_el = f'    <logging console="false" file="{log_file}"/>'
    cfg = broker_xml(tmp_path, connectors, extra=logging_el)
    proc = start(["run", "-c", str(cfg)], port)
    listener = Collect()
    conn = stomp.Connection12([("127.0.0.1", port)])
    conn.set_listener("", listener)
    conn.connect(wait=True)
    try:
        dead_letter_one(conn, listener, "reload.a", "1")
        conn.subscribe("/queue/ActiveMQ.DLQ", id="dlq", ack="auto")
        assert listener.wait(2)[-1].body == "poison on reload.a"
        conn.unsubscribe("dlq")

        broker_xml(tmp_path, connectors, extra=logging_el + "\n" + POLICY)  # rewrite in place
        proc.send_signal(signal.SIGHUP)
        wait_for_line(log_file, "configuration reloaded")
        dead_letter_one(conn, listener, "reload.b", "2")
        conn.subscribe("/queue/DLQ.reload.b", id="dlq2", ack="auto")
        assert listener.wait(4)[-1].body == "poison on reload.b"

        # a broken file is refused whole; the broker keeps running on what it had
        cfg.write_text("<broker><persistenceAdapter><levelDB/></persistenceAdapter></broker>")
        proc.send_signal(signal.SIGHUP)
        wait_for_line(log_file, "configuration reload refused")
        conn.send("/queue/reload.c", "still here", headers={"receipt": "c"})
        conn.subscribe("/queue/reload.c", id="3", ack="auto")
        assert listener.wait(5)[-1].body == "still here"
        assert not listener.disconnected and not listener.errors
    finally:
        conn.disconnect()
        stop(proc)
    assert "the persistence adapter changed" not in log_file.read_text()


def test_sigterm_stops_the_broker_and_keeps_what_was_accepted(tmp_path) -> None:
    port = free_port()
    cfg = broker_xml(tmp_path, f'      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>')
    proc = start(["run", "-c", str(cfg), "--drain-timeout", "20"], port)
    sender = Collect()
    conn = stomp.Connection([("127.0.0.1", port)])
    conn.set_listener("", sender)
    conn.connect(wait=True)
    for i in range(50):
        conn.send("/queue/drain", f"m{i}", headers={"persistent": "true", "receipt": f"r{i}"})
    deadline = time.monotonic() + 15
    while len(sender.receipts) < 50:  # receipted: the broker promised they are stored
        if time.monotonic() >= deadline:  # a bounded wait, not a timing check
            raise AssertionError(f"{len(sender.receipts)} of 50 receipts")
        time.sleep(0.02)
    conn.disconnect()
    out = stop(proc)
    assert "stopping broker ops (at most 20 s)" in out and "broker ops stopped" in out
    proc = start(["run", "-c", str(cfg)], port)
    listener = Collect()
    conn = stomp.Connection([("127.0.0.1", port)])
    conn.set_listener("", listener)
    conn.connect(wait=True)
    conn.subscribe("/queue/drain", id="1", ack="auto")
    try:
        assert [m.body for m in listener.wait(50)] == [f"m{i}" for i in range(50)]
    finally:
        conn.disconnect()
        stop(proc)


def test_a_reload_needs_a_restart_only_when_plugin_elements_come_or_go() -> None:
    from relaymq.broker.reload import needs_restart
    from relaymq.config.model import BrokerConfig, PluginElement

    users = PluginElement("simpleAuthenticationPlugin", {"anonymousAccessAllowed": "false"})
    changed_users = PluginElement("simpleAuthenticationPlugin", {"anonymousAccessAllowed": "true"})
    assert needs_restart(BrokerConfig(plugins=[users]), BrokerConfig(plugins=[changed_users])) == []
    assert needs_restart(BrokerConfig(plugins=[users]), BrokerConfig(plugins=[])) == \
        ["the <plugins> list"]
