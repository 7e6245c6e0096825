"""Where the console may listen: a non-local bind needs authentication."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from relaymq.testing.activemq_files import jetty_xml

from .conftest import free_port

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


def run(tmp_path: Path, console: str) -> subprocess.CompletedProcess:
    cfg = tmp_path / "activemq.xml"
    cfg.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core" persistent="false">
  <plugins>{console}</plugins>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{free_port()}"/>
  </transportConnectors>
</broker>""")
    return subprocess.run([RELAYMQ, "run", "-c", str(cfg)], capture_output=True, text=True,
                          timeout=60)


def test_a_non_local_console_without_authentication_does_not_start(tmp_path) -> None:
    done = run(tmp_path, f'<console host="0.0.0.0" port="{free_port()}"/>')
    assert done.returncode == 1
    line = [ln for ln in done.stderr.splitlines() if "without authentication" in ln]
    assert len(line) == 1, done.stderr
    assert "allowUnauthenticated" in line[0]


def test_config_check_refuses_what_run_refuses_for_a_non_local_console(tmp_path) -> None:
    """`relaymq config check` reports the same line `relaymq run` stops with; with
    users (relaymq-auth), `usersFile` or `allowUnauthenticated` both accept it."""
    port = free_port()
    refused = run(tmp_path, f'<console host="0.0.0.0" port="{port}"/>')
    line = [ln for ln in refused.stderr.splitlines() if "without authentication" in ln]
    assert refused.returncode == 1 and len(line) == 1, refused.stderr
    cfg = tmp_path / "activemq.xml"
    checked = subprocess.run([RELAYMQ, "config", "check", str(cfg)], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert line[0].strip().removeprefix("- ") in checked.stdout + checked.stderr
    realm = tmp_path / "realm.properties"
    realm.write_text("ops: secret, admins\n")
    for ok in ('allowUnauthenticated="true"', f'usersFile="{realm}"'):
        cfg.write_text(cfg.read_text().replace(f'port="{port}"', f'port="{port}" {ok}'))
        accepted = subprocess.run([RELAYMQ, "config", "check", str(cfg)], capture_output=True,
                                  text=True, timeout=60)
        assert accepted.returncode == 0, accepted.stdout + accepted.stderr
        cfg.write_text(cfg.read_text().replace(f' {ok}', ""))
    cfg.write_text(cfg.read_text().replace("<plugins>", """<plugins>
    <simpleAuthenticationPlugin><users>
      <authenticationUser username="ops" password="secret" groups="admins"/>
    </users></simpleAuthenticationPlugin>"""))
    with_users = subprocess.run([RELAYMQ, "config", "check", str(cfg)], capture_output=True,
                                text=True, timeout=60)
    assert with_users.returncode == 0, with_users.stdout + with_users.stderr


def test_a_port_in_use_is_one_line(tmp_path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(tmp_path, f'<console host="127.0.0.1" port="{port}"/>')
    assert done.returncode == 3, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


def test_an_activemq_xml_importing_jetty_xml_gets_its_web_console(tmp_path) -> None:
    """No <console> element and no relaymq-auth: jetty.xml's port, its realm's users and
    roles, and <managementContext>'s JMX domain for the Jolokia-style reads."""
    import hashlib

    import httpx
    from relaymq.testing.processes import RelaymqProcess

    http_port, stomp_port = free_port(), free_port()
    (tmp_path / "jetty.xml").write_text(jetty_xml(http_port))
    md5 = hashlib.md5(b"look-secret", usedforsecurity=False).hexdigest()
    (tmp_path / "jetty-realm.properties").write_text(
        f"# username: password [,rolename ...]\nadmin: admin-secret, admin\nwatch: MD5:{md5}, user\n")
    cfg = tmp_path / "activemq.xml"
    cfg.write_text(f"""<beans xmlns="http://www.springframework.org/schema/beans">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="legacy" persistent="false">
    <managementContext>
      <managementContext createConnector="false" connectorPort="1099" jmxDomainName="corp.mq"/>
    </managementContext>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp_port}"/>
    </transportConnectors>
  </broker>
  <import resource="jetty.xml"/>
</beans>""")
    broker = RelaymqProcess(cfg, tmp_path / "broker.log", [stomp_port, http_port]).start()
    try:
        url = f"http://127.0.0.1:{http_port}"
        admin, viewer = ("admin", "admin-secret"), ("watch", "look-secret")
        assert httpx.get(f"{url}/api/v1/broker", auth=admin).json()["name"] == "legacy"
        assert httpx.get(f"{url}/api/v1/broker", auth=viewer).status_code == 200
        assert httpx.get(f"{url}/api/v1/broker", auth=("admin", "wrong")).status_code == 401
        assert httpx.get(f"{url}/api/v1/broker").status_code == 401
        created = httpx.post(f"{url}/api/v1/queues", auth=viewer, json={"name": "legacy.q"})
        assert created.status_code == 403, created.text
        created = httpx.post(f"{url}/api/v1/queues", auth=admin, json={"name": "legacy.q"})
        assert created.status_code == 200, created.text
        read = "/api/jolokia/read/{}:type=Broker,brokerName=legacy,destinationType=Queue," \
               "destinationName=legacy.q/QueueSize"
        ours = httpx.get(url + read.format("corp.mq"), auth=viewer).json()
        assert ours["status"] == 200 and ours["value"] == 0
        assert httpx.get(url + read.format("org.apache.activemq"), auth=viewer).json()["status"] \
            == 404
    finally:
        broker.stop()
    log = broker.output()
    assert f"console on http://127.0.0.1:{http_port} (from {tmp_path / 'jetty.xml'})" in log


def test_a_realm_file_with_jettys_obfuscated_passwords_is_refused(tmp_path) -> None:
    import pytest
    from relaymq.errors import ConfigError
    from relaymq_console.realm import load_realm

    realm = tmp_path / "jetty-realm.properties"
    realm.write_text("admin: OBF:1u2a1toa1w8v1tok1u30, admin\n")
    with pytest.raises(ConfigError, match="OBF form"):
        load_realm(str(realm))
    realm.write_text("admin admin\n")
    with pytest.raises(ConfigError, match="jetty-realm.properties:1"):
        load_realm(str(realm))


def test_tls_serves_https_from_one_pem_file(tmp_path) -> None:
    """`<console tls="server.pem">`: certificate and key in one file; the session
    cookie is then `Secure`."""
    import datetime
    import ipaddress

    import httpx
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    from relaymq.testing.processes import RelaymqProcess

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    pem = tmp_path / "server.pem"
    pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    http_port, stomp_port = free_port(), free_port()
    cfg = tmp_path / "activemq.xml"
    cfg.write_text(f"""<broker xmlns="http://activemq.apache.org/schema/core" persistent="false">
  <plugins><console host="127.0.0.1" port="{http_port}" tls="{pem}"/></plugins>
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{stomp_port}"/>
  </transportConnectors>
</broker>""")
    broker = RelaymqProcess(cfg, tmp_path / "broker.log", [http_port]).start()
    try:
        r = httpx.get(f"https://127.0.0.1:{http_port}/api/v1/broker", verify=str(pem))
        assert r.status_code == 200 and r.json()["connections"] == 0
        login = httpx.post(f"https://127.0.0.1:{http_port}/login", verify=str(pem),
                           data={"username": "x", "password": "y"})
        assert login.status_code == 303
        assert "secure" in login.headers["set-cookie"].lower()
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{http_port}/api/v1/broker", timeout=5)
    finally:
        broker.stop()
