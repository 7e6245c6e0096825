"""<jaasAuthenticationPlugin> with login.config and properties files, reloaded
while the broker runs; <jaasCertificateAuthenticationPlugin> with certificates
made by a test CA, over STOMP and AMQP (SASL EXTERNAL)."""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Any

import pytest
from proton import ConnectionException, Message, SSLDomain
from proton.utils import BlockingConnection, LinkDetached

from .conftest import audit_lines
from .matrix import AUTHORIZATION, ENC_KEY, ENC_MYPASSWORD, READER_HASH

LOGIN_CONFIG = """
// ActiveMQ's conf/login.config, as shipped, plus a certificate entry
activemq {
    org.apache.activemq.jaas.PropertiesLoginModule required
        org.apache.activemq.jaas.properties.user="users.properties"
        org.apache.activemq.jaas.properties.group="groups.properties"
        reload=true;
};

CertLogin {
    org.apache.activemq.jaas.TextFileCertificateLoginModule required
        org.apache.activemq.jaas.textfiledn.user="dn-users.properties"
        org.apache.activemq.jaas.textfiledn.group="dn-groups.properties";
};

GuestToo {
    org.apache.activemq.jaas.PropertiesLoginModule sufficient
        org.apache.activemq.jaas.properties.user="users.properties"
        org.apache.activemq.jaas.properties.group="groups.properties";
    org.apache.activemq.jaas.GuestLoginModule sufficient
        org.apache.activemq.jaas.guest.user="guest"
        org.apache.activemq.jaas.guest.group="everyone"
        credentialsInvalidate=true;
};
"""
USERS = f"""# user=password
admin=adminpw
app={ENC_MYPASSWORD}
reader={READER_HASH}
"""
GROUPS = """admins=admin
apps=app
everyone=app,reader
consumers=reader
"""


def jaas_files(**extra: str) -> dict[str, str]:
    return {"login.config": LOGIN_CONFIG, "users.properties": USERS,
            "groups.properties": GROUPS, **extra}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIVEMQ_ENCRYPTION_PASSWORD", ENC_KEY)


def test_properties_login_and_authorization(start: Any, stomp_client: Any) -> None:
    bt = start('<plugins><jaasAuthenticationPlugin configuration="activemq"/>'
               + AUTHORIZATION + "</plugins>", jaas_files())
    app = stomp_client(bt, "app", "mypassword")
    assert app.send("/queue/orders.jaas") == "receipt"
    reader = stomp_client(bt, "reader", "readerpw")
    refused = reader.send("/queue/orders.jaas")
    assert refused.headers["message"] == "User reader is not authorized to write to: queue://orders.jaas"
    bad = stomp_client(bt, "app", "Wr0ng-Passw0rd", wait=False)
    assert bad.col.wait_error().headers["message"] == "User name [app] or password is invalid."


def test_properties_files_changed_while_running(start: Any, stomp_client: Any, tmp_path: Path,
                                                audit: Any) -> None:
    bt = start('<plugins><jaasAuthenticationPlugin configuration="activemq"/>'
               + AUTHORIZATION + "</plugins>", jaas_files())
    reader = stomp_client(bt, "reader", "readerpw")
    assert reader.send("/queue/orders.reload") != "receipt"
    # reader joins apps and gets a new password; a new user appears
    (tmp_path / "groups.properties").write_text(GROUPS.replace("apps=app", "apps=app,reader")
                                                + "apps=app,reader,late\n")
    (tmp_path / "users.properties").write_text(
        USERS.replace(f"reader={READER_HASH}", "reader=changed") + "late=latepw\n")
    stale = stomp_client(bt, "reader", "readerpw", wait=False)
    assert stale.col.wait_error().headers["message"] == "User name [reader] or password is invalid."
    again = stomp_client(bt, "reader", "changed")
    assert again.send("/queue/orders.reload") == "receipt"
    late = stomp_client(bt, "late", "latepw")
    assert late.send("/queue/orders.reload") == "receipt"
    # the connection made before the change keeps its groups (as in ActiveMQ)
    assert reader.connected


def test_guest_module_after_properties(start: Any, stomp_client: Any) -> None:
    bt = start('<plugins><jaasAuthenticationPlugin configuration="GuestToo"/>'
               + AUTHORIZATION + "</plugins>", jaas_files())
    guest = stomp_client(bt)  # no credentials: the guest user, group everyone
    assert guest.subscribe("/topic/events.guests") == "receipt"
    assert guest.send("/topic/events.guests").headers["message"] == \
        "User guest is not authorized to write to: topic://events.guests"
    # a wrong password is not silently a guest (credentialsInvalidate=true)
    bad = stomp_client(bt, "app", "Wr0ng-Passw0rd", wait=False)
    assert bad.col.wait_error() is not None
    app = stomp_client(bt, "app", "mypassword")
    assert app.send("/topic/events.guests") == "receipt"


@pytest.mark.parametrize(("files", "message"), [
    ({"login.config": "activemq { nonsense"}, "login.config"),
    ({"login.config": LOGIN_CONFIG.replace("activemq {", "other {")}, "has no entry 'activemq'"),
    ({"login.config": LOGIN_CONFIG}, "users.properties"),  # the properties files are missing
    ({**jaas_files(), "users.properties": "app=ENC(not-base64!)\n"}, "ENC(...)"),
])
def test_bad_jaas_configuration_does_not_start(start: Any, files: dict[str, str],
                                               message: str) -> None:
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.")):
        start('<plugins><jaasAuthenticationPlugin configuration="activemq"/></plugins>', files)


# -- certificates --------------------------------------------------------------------------


def cert_files(pki: dict[str, Any]) -> dict[str, str]:
    # DNs as users copy them: RFC 2253 (Java) for one, `openssl x509 -subject` for the other
    return {
        "login.config": LOGIN_CONFIG,
        "users.properties": USERS, "groups.properties": GROUPS,
        "dn-users.properties": "app=CN=app-client, O=RelayMQ Tests, C=US\n"
                               "other=/C=US/O=RelayMQ Tests/CN=somebody-else\n",
        "dn-groups.properties": "apps=app\neveryone=app\n",
    }


def tls_connectors(pki: dict[str, Any]) -> str:
    crt, key = pki["server"]
    opts = f"certFile={crt}&amp;keyFile={key}&amp;caFile={pki['ca']}&amp;needClientAuth=true"
    return ('<transportConnectors>'
            f'<transportConnector name="stomp" uri="stomp+ssl://127.0.0.1:0?{opts}"/>'
            f'<transportConnector name="amqp" uri="amqps://127.0.0.1:0?{opts}"/>'
            '</transportConnectors>')


@pytest.fixture
def cert_broker(start: Any, pki: dict[str, Any]) -> Any:
    return start('<plugins><jaasCertificateAuthenticationPlugin configuration="CertLogin"/>'
                 + AUTHORIZATION + "</plugins>", cert_files(pki), connectors=tls_connectors(pki))


def stomp_tls(pki: dict[str, Any], who: str) -> dict[str, Any]:
    crt, key = pki[who]
    return {"key_file": str(key), "cert_file": str(crt), "ca_certs": str(pki["ca"]),
            "ssl_version": ssl.PROTOCOL_TLS_CLIENT}


def amqps(bt: Any, pki: dict[str, Any], who: str) -> BlockingConnection:
    crt, key = pki[who]
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_credentials(str(crt), str(key), None)
    domain.set_trusted_ca_db(str(pki["ca"]))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
    host, port = bt.address("amqps")
    return BlockingConnection(f"amqps://localhost:{port}", timeout=5, ssl_domain=domain,
                              allowed_mechs="EXTERNAL")


def test_certificate_login_over_stomp(cert_broker: Any, pki: dict[str, Any], stomp_client: Any,
                                      audit: Any) -> None:
    app = stomp_client(cert_broker, ssl=stomp_tls(pki, "app"), scheme="stomp+ssl")
    assert app.send("/queue/orders.tls") == "receipt"
    assert app.send("/queue/payments").headers["message"] == \
        "User app is not authorized to write to: queue://payments"
    logins = [line for line in audit_lines(audit) if line.startswith("login ")]
    assert logins and "user=app" in logins[0] and "method=certificate" in logins[0]


def test_unknown_certificate_is_refused_over_stomp(cert_broker: Any, pki: dict[str, Any],
                                                   stomp_client: Any) -> None:
    stranger = stomp_client(cert_broker, ssl=stomp_tls(pki, "stranger"), scheme="stomp+ssl",
                            wait=False)
    assert stranger.col.wait_error().headers["message"] == "The client certificate is not accepted."


def test_untrusted_certificate_fails_the_tls_handshake(cert_broker: Any, pki: dict[str, Any]) -> None:
    crt, key = pki["rogue"]  # same subject as app's, from a CA the broker does not trust
    host, port = cert_broker.address("stomp+ssl")
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    ctx.load_cert_chain(str(crt), str(key))
    import socket
    with socket.create_connection((host, port), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            with ctx.wrap_socket(raw, server_hostname="localhost") as t:
                t.sendall(b"CONNECT\naccept-version:1.2\nhost:x\n\n\x00")
                if not t.recv(4096):
                    raise ConnectionResetError("closed")


def test_certificate_login_over_amqp_sasl_external(cert_broker: Any, pki: dict[str, Any]) -> None:
    conn = amqps(cert_broker, pki, "app")
    try:
        conn.create_sender("queue://orders.external").send(Message(body="by certificate"))
        with pytest.raises(LinkDetached, match="User app is not authorized to write to: queue://payments"):
            conn.create_sender("queue://payments")
        assert conn.create_receiver("topic://events.x", credit=1) is not None
    finally:
        conn.close()


def test_unknown_certificate_is_refused_over_amqp(cert_broker: Any, pki: dict[str, Any]) -> None:
    with pytest.raises(ConnectionException, match="unauthorized-access"):
        amqps(cert_broker, pki, "stranger")


def test_dual_plugin_uses_certificates_on_tls_and_passwords_elsewhere(
        start: Any, pki: dict[str, Any], stomp_client: Any) -> None:
    crt, key = pki["server"]
    opts = f"certFile={crt}&amp;keyFile={key}&amp;caFile={pki['ca']}&amp;needClientAuth=true"
    connectors = ('<transportConnectors>'
                  '<transportConnector name="stomp" uri="stomp://127.0.0.1:0"/>'
                  f'<transportConnector name="tls" uri="stomp+ssl://127.0.0.1:0?{opts}"/>'
                  '</transportConnectors>')
    bt = start('<plugins><jaasDualAuthenticationPlugin configuration="activemq" '
               'sslConfiguration="CertLogin"/>' + AUTHORIZATION + "</plugins>",
               cert_files(pki), connectors=connectors)
    by_cert = stomp_client(bt, ssl=stomp_tls(pki, "app"), scheme="stomp+ssl")
    assert by_cert.send("/queue/orders.dual") == "receipt"
    by_password = stomp_client(bt, "app", "mypassword")
    assert by_password.send("/queue/orders.dual") == "receipt"
    nobody = stomp_client(bt, wait=False)
    assert nobody.col.wait_error() is not None


def test_login_config_from_the_environment(start: Any, stomp_client: Any, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "conf"
    elsewhere.mkdir()
    for name, text in jaas_files().items():
        (elsewhere / name).write_text(text)
    monkeypatch.setenv("RELAYMQ_LOGIN_CONFIG", str(elsewhere / "login.config"))
    bt = start("<plugins><jaasAuthenticationPlugin/></plugins>".replace(
        "<jaasAuthenticationPlugin/>", '<jaasAuthenticationPlugin configuration="activemq"/>'))
    assert os.environ["RELAYMQ_LOGIN_CONFIG"].endswith("login.config")
    assert stomp_client(bt, "admin", "adminpw").send("/queue/anything") == "receipt"
