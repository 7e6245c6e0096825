"""The permission matrix against ActiveMQ 5.17 itself: the same plugins XML loaded by
Debian's `activemq` (private ports and data directory, started once for the
module, skipped with the reason where it is not installed; `.ci/run` installs it)
and by RelayMQ, the same STOMP operations, the same answers."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Stomp
from .matrix import AUTHORIZATION, CREATE, MATRIX, PASSWORDS

ACTIVEMQ_HOME = Path("/usr/share/activemq")

#: plain passwords: ActiveMQ decrypts ENC(...) only through property placeholders
USERS = """<simpleAuthenticationPlugin anonymousAccessAllowed="false"><users>
  <authenticationUser username="admin" password="adminpw" groups="admins"/>
  <authenticationUser username="app" password="mypassword" groups="apps,everyone"/>
  <authenticationUser username="reader" password="readerpw" groups="consumers,everyone"/>
</users></simpleAuthenticationPlugin>"""


def _declared() -> str:
    names = sorted({d for _, _, d, _ in MATRIX})
    out = []
    for d in names:
        kind, name = d.split("://")
        out.append(f'<{kind} physicalName="{name}"/>')
    return "<destinations>" + "".join(out) + "</destinations>"


def broker_xml(port: int, data: Path | None = None) -> str:
    store = f'<persistenceAdapter><kahaDB directory="{data}/kahadb"/></persistenceAdapter>' \
        if data else ""
    return f"""<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
<broker xmlns="http://activemq.apache.org/schema/core" brokerName="parity" useJmx="false"
        persistent="{'true' if data else 'false'}" {f'dataDirectory="{data}"' if data else ''}>
  {_declared()}
  <plugins>{USERS}{AUTHORIZATION}</plugins>
  {store}
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
  </transportConnectors>
</broker></beans>"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Endpoint:
    """What `Stomp` needs: an address."""

    def __init__(self, port: int) -> None:
        self.port = port

    def address(self, scheme: str) -> tuple[str, int]:
        return "127.0.0.1", self.port


@pytest.fixture(scope="module")
def activemq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    java = shutil.which("java")
    if not (ACTIVEMQ_HOME / "bin" / "activemq.jar").exists() or java is None:
        pytest.skip("ActiveMQ 5.17 is not installed (apt-get install activemq)")
    base = tmp_path_factory.mktemp("activemq")
    (base / "conf").mkdir()
    (base / "data").mkdir()
    port = _free_port()
    (base / "conf" / "activemq.xml").write_text(broker_xml(port, base / "data"))
    opens = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in
             ("java.lang", "java.util", "java.net", "java.security", "java.util.concurrent")]
    command = [java, "-Xmx256m", *opens,
               f"-Dactivemq.classpath={base}/conf:{ACTIVEMQ_HOME}/lib/",
               f"-Dactivemq.home={ACTIVEMQ_HOME}", f"-Dactivemq.base={base}",
               f"-Dactivemq.conf={base}/conf", f"-Dactivemq.data={base}/data",
               "-jar", str(ACTIVEMQ_HOME / "bin" / "activemq.jar"), "start",
               f"xbean:file:{base}/conf/activemq.xml"]
    with open(base / "out.log", "ab") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=base)
    deadline = time.monotonic() + 90
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                tail = (base / "out.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"ActiveMQ did not start:\n{tail}") from None
            time.sleep(0.2)
    yield Endpoint(port)
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@pytest.fixture(scope="module")
def relaymq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from .conftest import broker_from

    base = tmp_path_factory.mktemp("relaymq")
    path = base / "activemq.xml"
    path.write_text(broker_xml(0))
    bt = broker_from(path)
    yield bt
    bt.stop()


STOMP_NAME = {"queue": "/queue/", "topic": "/topic/"}


def _outcome(broker: Any, user: str, operation: str, dest: str) -> str:
    """'ok' or the ERROR frame's message, for one operation on a fresh connection."""
    client = Stomp(broker, user, PASSWORDS[user])
    try:
        kind, name = dest.split("://")
        target = STOMP_NAME[kind] + name
        if operation == "send":
            got = client.send(target)
        else:
            got = client.subscribe(target, **({"browser": "true"} if operation == "browse" else {}))
        if got == "receipt":
            return "ok"
        return "no answer" if got is None else str(got.headers.get("message"))
    finally:
        client.close()


@pytest.mark.parametrize(("user", "operation", "dest", "allowed"), MATRIX + [
    (u, o, d.replace("fresh", "parity.fresh"), a) for u, o, d, a in CREATE],
    ids=[f"{u}-{o}-{d}" for u, o, d, _ in MATRIX + CREATE])
def test_relaymq_answers_as_activemq(activemq: Endpoint, relaymq: Any, user: str,
                                     operation: str, dest: str, allowed: bool) -> None:
    theirs = _outcome(activemq, user, operation, dest)
    ours = _outcome(relaymq, user, operation, dest)
    assert ours == theirs
