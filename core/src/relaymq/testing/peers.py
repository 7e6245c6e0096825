"""Real peer brokers for tests: ActiveMQ 5.17 and RabbitMQ 3.10 (Debian's
`activemq` and `rabbitmq-server` packages) on private ports and data
directories, started once per test session, never the system services; and
(`relaymq run` processes: `relaymq.testing.processes.RelaymqProcess`).

The session fixtures `activemq` and `rabbitmq` are registered by the pytest plugin
(`relaymq.testing.pytest_plugin`), so every package's tests share one of each per
run: do not import them into a conftest, which would define a second fixture and
start the peer again for that directory.

A test that needs a peer whose package is absent is skipped with the reason
(`.ci/run` installs both).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from relaymq.testing.net import free_port_below_ephemeral, is_listening, wait_listening
from relaymq.testing.waits import wait_until

#: a port below the ephemeral range: a peer restarted on it after a kill -9 must
#: not find it taken by some client connection's local port
free_port = free_port_below_ephemeral


def wait_port(port: int, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30) -> None:
    """`net.wait_listening`, raising RuntimeError (with the process's stderr when
    it exits first): what the peers' start-up turns into a clear failure."""

    def output() -> str:
        return proc.stderr.read().decode()[-2000:] if proc is not None and proc.stderr else ""

    try:
        wait_listening(port, proc, timeout, output)
    except AssertionError as exc:
        raise RuntimeError(str(exc)) from None


ACTIVEMQ_HOME = Path("/usr/share/activemq")
RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")


@dataclass
class Peer:
    name: str
    stomp_port: int
    amqp_port: int | None
    proc: subprocess.Popen[bytes]
    base: Path
    command: list[str]
    env: dict[str, str]
    #: a helper process that lives as long as the peer (RabbitMQ's epmd)
    helper: subprocess.Popen[bytes] | None = None
    #: what the peer prints once each time it has booted and serves clients
    ready: str | None = None

    def close(self) -> None:
        """Stop the peer and its helper for good (session teardown)."""
        self.stop()
        if self.helper is not None and self.helper.poll() is None:
            self.helper.kill()
            self.helper.wait(10)

    def stop(self, kill: bool = False) -> None:
        """Stop the peer (SIGTERM; `kill`: SIGKILL, a crash) and return once every process
        of it is gone. RabbitMQ runs under its `rabbitmq-server` shell script, which is
        reaped while the Erlang VM, killed with it, may still hold its listening ports,
        its node name in epmd and its distribution port: a `start` meanwhile would see
        the dying node's ports answer and return at once, and the new node would fail
        to boot (the name or port in use) or boot long after."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        group = self.proc.pid  # start_new_session: the group's id is the leader's pid
        ports = [self.stomp_port] + ([self.amqp_port] if self.amqp_port else [])

        def gone() -> bool:
            return not group_running(group) and not any(is_listening(p) for p in ports)

        try:
            wait_until(gone, f"the processes of {self.name} to exit", 30)
        except AssertionError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
            wait_until(gone, f"the processes of {self.name} to exit", 30)

    def start(self, timeout: float = 180) -> None:
        """Start the peer (again, after `stop`: the same ports, node name and data
        directory, so what it stored survives a kill -9) and return once it serves
        clients: its ports listen and, when it has a `ready` line, its output has
        printed that line once more. RuntimeError with the output's tail when it exits
        first (a failed boot) or takes longer than `timeout` seconds (after a kill -9 it
        recovers its store first, which on a loaded machine can take a minute)."""
        out = self.base / "out.log"
        boots = self._ready_lines()
        log = open(out, "ab")
        self.proc = subprocess.Popen(self.command, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=self.base)
        ports = [self.stomp_port] + ([self.amqp_port] if self.amqp_port else [])

        def serving() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"it exited with {self.proc.returncode}")
            booted = self.ready is None or self._ready_lines() > boots
            return booted and all(is_listening(p) for p in ports)

        try:
            wait_until(serving, f"{self.name} to listen on {ports}", timeout, interval=0.1)
        except AssertionError as exc:
            tail = out.read_text(errors="replace")[-3000:]
            self.stop(kill=True)
            raise RuntimeError(f"{self.name} did not start: {exc}\n{tail}") from None

    def _ready_lines(self) -> int:
        """How many times the output says the peer has booted (its `ready` line)."""
        out = self.base / "out.log"
        if self.ready is None or not out.exists():
            return 0
        return out.read_text(errors="replace").count(self.ready)


def group_running(pgid: int) -> bool:
    """Whether a process of process group `pgid` still runs (Linux /proc). A process
    counts until its last thread has exited: a killed VM's main thread is a zombie
    while its other threads still exit, holding its sockets and files."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            threads = [t.read_text().rsplit(")", 1)[1].split()[0]
                       for t in stat.parent.glob("task/*/stat")]
        except (OSError, ValueError, IndexError):
            continue  # gone while we looked
        if any(state not in ("Z", "X") for state in threads):
            return True
    return False


def start_activemq(base: Path) -> Peer:
    java = shutil.which("java")
    if not (ACTIVEMQ_HOME / "bin" / "activemq.jar").exists() or java is None:
        pytest.skip("ActiveMQ 5.17 is not installed (apt-get install activemq)")
    stomp = free_port()
    (base / "conf").mkdir(parents=True)
    (base / "data").mkdir()
    (base / "conf" / "activemq.xml").write_text(f"""<beans
  xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName="bridge-test"
          dataDirectory="{base}/data" schedulerSupport="false">
    <persistenceAdapter><kahaDB directory="{base}/data/kahadb"/></persistenceAdapter>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp}"/>
    </transportConnectors>
  </broker>
</beans>""")
    opens = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in
             ("java.lang", "java.util", "java.net", "java.security", "java.util.concurrent")]
    command = [java, "-Xmx256m", *opens,
               f"-Dactivemq.classpath={base}/conf:{ACTIVEMQ_HOME}/lib/",
               f"-Dactivemq.home={ACTIVEMQ_HOME}", f"-Dactivemq.base={base}",
               f"-Dactivemq.conf={base}/conf", f"-Dactivemq.data={base}/data",
               "-jar", str(ACTIVEMQ_HOME / "bin" / "activemq.jar"), "start",
               f"xbean:file:{base}/conf/activemq.xml"]
    peer = Peer("ActiveMQ", stomp, None, None, base, command, dict(os.environ))  # type: ignore[arg-type]
    peer.start()
    return peer


def start_rabbitmq(base: Path) -> Peer:
    if not RABBITMQ_SERVER.exists():
        pytest.skip("RabbitMQ 3.10 is not installed (apt-get install rabbitmq-server)")
    stomp, amqp = free_port(), free_port()
    base.mkdir(parents=True)
    (base / "rabbitmq.conf").write_text(
        f"listeners.tcp.1 = 127.0.0.1:{amqp}\nstomp.listeners.tcp.1 = 127.0.0.1:{stomp}\n"
        "loopback_users = none\n")
    (base / "enabled_plugins").write_text("[rabbitmq_stomp,rabbitmq_amqp1_0].\n")
    epmd_port = free_port()
    epmd = shutil.which("epmd") or next(iter(sorted(Path("/usr/lib/erlang").glob("erts-*/bin/epmd"))), None)
    if epmd is None:
        pytest.skip("RabbitMQ's epmd is not installed (apt-get install rabbitmq-server)")
    # our own epmd in the foreground: Erlang would otherwise start a daemon that outlives the test
    helper = subprocess.Popen([str(epmd), "-port", str(epmd_port)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    wait_port(epmd_port, helper, 30)
    env = dict(os.environ)
    env.update({
        "HOME": str(base), "RABBITMQ_NODENAME": f"rmq-test-{os.getpid()}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_NODE_PORT": str(amqp),
        "RABBITMQ_DIST_PORT": str(free_port()), "ERL_EPMD_PORT": str(epmd_port),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"), "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
        "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
    })
    peer = Peer("RabbitMQ", stomp, amqp, None, base, [str(RABBITMQ_SERVER)], env,  # type: ignore[arg-type]
                helper, ready="Starting broker... completed")
    try:
        peer.start()
    except BaseException:
        helper.kill()
        helper.wait(10)
        raise
    return peer


@pytest.fixture(scope="session")
def activemq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    peer = start_activemq(tmp_path_factory.mktemp("activemq"))
    yield peer
    peer.close()


@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    peer = start_rabbitmq(tmp_path_factory.mktemp("rabbitmq") / "node")
    yield peer
    peer.close()

