"""Configuration: XML and YAML, fail-closed start-up, `relaymq config check`, and
the pieces (authorization map, DNs, ENC values, login.config) on their own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from relaymq.broker.broker import Broker
from relaymq.broker.security import Principal
from relaymq.config.loader import load_config, load_config_text
from relaymq.errors import ConfigError, PluginNotFound
from relaymq.model.destination import Destination
from relaymq.plugins import PluginRegistry
from relaymq_auth import jasypt
from relaymq_auth.authorization import parse_authorization
from relaymq_auth.certs import dn_key, subject_dn
from relaymq_auth.loginconfig import LoginConfigError, parse_login_config
from relaymq_auth.passwords import PasswordFormatError, hash_password, parse

from .matrix import AUTHORIZATION, ENC_KEY, plugins

XML = ('<broker xmlns="http://activemq.apache.org/schema/core" persistent="false">'
       '{body}</broker>')


class RegistryWithoutAuth(PluginRegistry):
    """The plugin registry as it is where relaymq-auth is not installed."""

    def _group(self, group: str) -> dict[str, Any]:
        found = super()._group(group)
        return {name: [i for i in infos if i.dist != "relaymq-auth"]
                for name, infos in found.items()
                if any(i.dist != "relaymq-auth" for i in infos)}


@pytest.mark.parametrize("element", ["simpleAuthenticationPlugin", "jaasAuthenticationPlugin",
                                     "jaasCertificateAuthenticationPlugin", "authorizationPlugin"])
async def test_a_config_naming_auth_does_not_start_without_the_plugin(element: str) -> None:
    config = load_config_text(XML.format(body=f"<plugins><{element}/></plugins>"))
    broker = Broker(config, registry=RegistryWithoutAuth())
    with pytest.raises(PluginNotFound, match=f"'{element}'.*pip install relaymq-auth"):
        await broker.start()
    assert not broker.started


async def test_authorization_without_authentication_does_not_start() -> None:
    config = load_config_text(XML.format(body=f"<plugins>{AUTHORIZATION}</plugins>"))
    with pytest.raises(ConfigError, match="needs an authentication plugin"):
        await Broker(config).start()


async def test_two_authentication_plugins_do_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIVEMQ_ENCRYPTION_PASSWORD", ENC_KEY)
    body = plugins(authorization=False).replace(
        "</plugins>", '<simpleAuthenticationPlugin anonymousAccessAllowed="true"/></plugins>')
    with pytest.raises(ConfigError, match="configure one authentication plugin"):
        await Broker(load_config_text(XML.format(body=body))).start()


async def test_enc_password_without_a_key_does_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACTIVEMQ_ENCRYPTION_PASSWORD", raising=False)
    monkeypatch.delenv("RELAYMQ_ENCRYPTION_PASSWORD", raising=False)
    with pytest.raises(ConfigError, match="ACTIVEMQ_ENCRYPTION_PASSWORD"):
        await Broker(load_config_text(XML.format(body=plugins()))).start()


async def test_ldap_authorization_maps_are_refused() -> None:
    body = ('<plugins><simpleAuthenticationPlugin anonymousAccessAllowed="true"/>'
            '<authorizationPlugin><map><cachedLDAPAuthorizationMap/></map></authorizationPlugin>'
            '</plugins>')
    with pytest.raises(ConfigError, match="not LDAP"):
        await Broker(load_config_text(XML.format(body=body))).start()


YAML = """
broker:
  persistent: false
  plugins:
    - simpleAuthenticationPlugin:
        anonymousAccessAllowed: false
        users:
          - authenticationUser: {username: app, password: apppw, groups: "apps,users"}
    - authorizationPlugin:
        map:
          authorizationMap:
            authorizationEntries:
              - authorizationEntry: {queue: "orders.>", read: apps, write: apps, admin: apps}
            tempDestinationAuthorizationEntry:
              tempDestinationAuthorizationEntry: {read: users, write: users, admin: users}
"""


async def test_yaml_configuration(tmp_path: Path) -> None:
    from relaymq.broker.security import ConnectRequest
    from relaymq.errors import SecurityError

    path = tmp_path / "activemq.yaml"
    path.write_text(YAML)
    broker = Broker(load_config(path, strict=True), strict=True)
    await broker.start()
    try:
        conn = await broker.connect(ConnectRequest("app", "apppw"))
        assert conn.principal == Principal("app", frozenset({"apps", "users"}))
        conn.authorize("write", Destination.queue("orders.eu"))
        with pytest.raises(SecurityError, match="User app is not authorized to write to: queue://other"):
            conn.authorize("write", Destination.queue("other"))
        with pytest.raises(SecurityError, match=r"User name \[app\] or password is invalid"):
            await broker.connect(ConnectRequest("app", "nope"))
    finally:
        await broker.stop()


def test_config_check_accepts_it_and_warns_about_plain_passwords(tmp_path: Path) -> None:
    path = tmp_path / "activemq.xml"
    path.write_text(XML.format(body=(
        '<plugins><simpleAuthenticationPlugin><users>'
        '<authenticationUser username="a" password="plain" groups="g"/>'
        '</users></simpleAuthenticationPlugin>' + AUTHORIZATION + "</plugins>")))
    done = subprocess.run([sys.executable, "-m", "relaymq.cli", "config", "check", "--allow-vm-only",
                           str(path)],
                          capture_output=True, text=True, timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "relaymq-auth" not in out or "pip install" not in out
    assert "plain-text passwords for a" in out


# -- pieces ----------------------------------------------------------------------------


def _map(entries: str, extra: str = "", attributes: str = "") -> Any:
    xml = XML.format(body=f"<plugins><authorizationPlugin><map><authorizationMap {attributes}>"
                     f"<authorizationEntries>{entries}</authorizationEntries>{extra}"
                     "</authorizationMap></map></authorizationPlugin></plugins>")
    element = load_config_text(xml).plugins[0]
    return parse_authorization(element, strict=True)[0]


ENTRIES = ('<authorizationEntry queue="orders.eu.vip" read="vip"/>'
           '<authorizationEntry queue=">" read="all"/>'
           '<authorizationEntry queue="orders.*.vip" read="star"/>'
           '<authorizationEntry queue="orders.>" read="orders"/>')


def test_every_matching_entry_grants_as_in_activemq() -> None:
    amap = _map(ENTRIES)
    who = {name: Principal(name, frozenset({name})) for name in ("vip", "all", "star", "orders")}

    def readers(queue: str) -> list[str]:
        return [n for n, p in who.items() if amap.allowed(p, "read", Destination.queue(queue))]

    assert readers("orders.eu.vip") == ["vip", "all", "star", "orders"]
    assert readers("orders.us.vip") == ["all", "star", "orders"]
    assert readers("payments") == ["all"]
    assert not amap.allowed(who["all"], "read", Destination.topic("payments"))


def test_most_specific_wins_when_asked_whatever_the_order() -> None:
    amap = _map(ENTRIES, attributes='mostSpecificWins="true"')
    who = {name: Principal(name, frozenset({name})) for name in ("vip", "all", "star", "orders")}

    def readers(queue: str) -> list[str]:
        return [n for n, p in who.items() if amap.allowed(p, "read", Destination.queue(queue))]

    assert readers("orders.eu.vip") == ["vip"]
    assert readers("orders.us.vip") == ["star"]
    assert readers("orders.us") == ["orders"]
    assert readers("payments") == ["all"]
    assert readers("orders") == ["orders"]  # '>' also matches nothing more, as in ActiveMQ
    # topics are not queues
    assert not amap.allowed(who["all"], "read", Destination.topic("payments"))


def test_default_entry_any_group_user_principals_and_composites() -> None:
    amap = _map('<authorizationEntry queue="a" write="*"/>'
                '<authorizationEntry queue="b" write="bob" '
                'groupClass="org.apache.activemq.jaas.UserPrincipal"/>',
                "<defaultEntry><authorizationEntry read=\"readers\"/></defaultEntry>")
    bob, eve = Principal("bob", frozenset({"readers"})), Principal("eve", frozenset({"bob"}))
    assert amap.allowed(eve, "write", Destination.queue("a"))
    assert amap.allowed(bob, "write", Destination.queue("b"))
    assert not amap.allowed(eve, "write", Destination.queue("b"))  # a group named bob is not bob
    assert amap.allowed(bob, "read", Destination.topic("anything"))  # the default entry
    assert not amap.allowed(eve, "read", Destination.topic("anything"))
    assert amap.allowed(bob, "write", Destination.queue("a,b"))
    assert not amap.allowed(eve, "write", Destination.queue("a,b"))  # every part


def test_temporary_destinations_without_an_entry_are_allowed() -> None:
    amap = _map('<authorizationEntry queue=">" read="x"/>')
    temp = Destination.parse("temp-queue://ID:1")
    assert amap.allowed(Principal("anyone"), "admin", temp)


@pytest.mark.parametrize("bad", ['<authorizationEntry read="x"/>',
                                 '<authorizationEntry queue="a" topic="b"/>',
                                 '<authorizationEntry queue="a,b"/>'])
def test_bad_entries_are_configuration_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        _map(bad)


def test_subject_dn_matches_however_it_is_written() -> None:
    peer = {"subject": ((("countryName", "US"),), (("organizationName", "RelayMQ Tests"),),
                        (("commonName", "app-client"),))}
    dn = subject_dn(peer)
    assert dn == "CN=app-client,O=RelayMQ Tests,C=US"
    assert dn_key(dn) == dn_key("C = US, O = RelayMQ Tests, CN = app-client") \
        == dn_key("/C=US/O=RelayMQ Tests/CN=app-client")
    assert dn_key(dn) != dn_key("CN=app-client,O=Other,C=US")


def test_enc_values_are_activemq_compatible() -> None:
    # the values in ActiveMQ's own documentation (key "activemq")
    assert jasypt.decrypt("mYRkg+4Q4hua1kvpCCI2hg==", "activemq") == "manager"
    assert jasypt.decrypt("eeWjNyX6FY8Fjp3E+F6qTytV11bZItDp", "activemq") == "mypassword"
    for algorithm in jasypt.ALGORITHMS:
        made = jasypt.encrypt("s3cret ünïcode", "key", algorithm)
        assert jasypt.decrypt(made, "key", algorithm) == "s3cret ünïcode"
        with pytest.raises(jasypt.EncryptionError):
            jasypt.decrypt(made, "other key", algorithm)


def test_password_forms() -> None:
    hashed = parse(hash_password("pw", ln=10))
    assert hashed.slow and hashed.check("pw") and not hashed.check("PW")
    assert parse("plain").check("plain") and not parse("plain").check("plain ")
    enc = parse("ENC(eeWjNyX6FY8Fjp3E+F6qTytV11bZItDp)", {"ACTIVEMQ_ENCRYPTION_PASSWORD": ENC_KEY})
    assert enc.check("mypassword")
    with pytest.raises(PasswordFormatError, match="out of range"):
        parse("$scrypt$ln=30,r=8,p=1$AAAA$AAAA")
    with pytest.raises(PasswordFormatError, match="relaymq passwd"):
        parse("$scrypt$garbage")


def test_login_config_syntax() -> None:
    entries = parse_login_config("""
        /* several entries */ a { x.Y required k="v w" n=1; z.Q optional; };
        b { # comment
          m.N sufficient debug=true; }
    """)
    assert [m.short_name for m in entries["a"]] == ["Y", "Q"]
    assert entries["a"][0].options == {"k": "v w", "n": "1"}
    assert entries["b"][0].flag == "sufficient"
    with pytest.raises(LoginConfigError, match="control flag"):
        parse_login_config("a { x.Y mandatory; };")
    with pytest.raises(LoginConfigError, match="end of file"):
        parse_login_config("a { x.Y required")


def test_equally_specific_entries_follow_configuration_order() -> None:
    first = _map('<authorizationEntry queue="*.b" read="star-first"/>'
                 '<authorizationEntry queue="a.*" read="a-first"/>',
                 attributes='mostSpecificWins="true"')
    p = Principal("p", frozenset({"star-first"}))
    assert first.allowed(p, "read", Destination.queue("a.b"))
    second = _map('<authorizationEntry queue="a.*" read="a-first"/>'
                  '<authorizationEntry queue="*.b" read="star-first"/>',
                  attributes='mostSpecificWins="true"')
    assert not second.allowed(p, "read", Destination.queue("a.b"))


async def test_sighup_reload_changes_users_and_entries(tmp_path: Path) -> None:
    from relaymq.broker.reload import apply_reload
    from relaymq.broker.security import ConnectRequest
    from relaymq.errors import SecurityError

    def xml(users: str, entry: str) -> str:
        return XML.format(body=(
            f"<plugins><simpleAuthenticationPlugin><users>{users}</users>"
            "</simpleAuthenticationPlugin><authorizationPlugin><map><authorizationMap>"
            f"<authorizationEntries>{entry}</authorizationEntries>"
            "</authorizationMap></map></authorizationPlugin></plugins>"))

    before = xml('<authenticationUser username="a" password="pa" groups="g1"/>',
                 '<authorizationEntry queue="q" write="g1"/>')
    after = xml('<authenticationUser username="a" password="pa2" groups="g2"/>'
                '<authenticationUser username="b" password="pb" groups="g1"/>',
                '<authorizationEntry queue="q" write="g1"/>'
                '<authorizationEntry queue="r" write="g2"/>')
    broker = Broker(load_config_text(before))
    await broker.start()
    try:
        old = await broker.connect(ConnectRequest("a", "pa"))
        old.authorize("write", Destination.queue("q"))
        apply_reload(broker, load_config_text(after))
        with pytest.raises(SecurityError):
            await broker.connect(ConnectRequest("a", "pa"))
        a = await broker.connect(ConnectRequest("a", "pa2"))
        a.authorize("write", Destination.queue("r"))
        with pytest.raises(SecurityError):
            a.authorize("write", Destination.queue("q"))
        b = await broker.connect(ConnectRequest("b", "pb"))
        b.authorize("write", Destination.queue("q"))
        # the connection made before keeps its groups, and asks the new entries
        old.authorize("write", Destination.queue("q"))
        with pytest.raises(SecurityError):
            old.authorize("write", Destination.queue("r"))
    finally:
        await broker.stop()


@pytest.mark.parametrize(("remote", "host"), [
    ("10.0.0.7:5123", "10.0.0.7"), ("10.0.0.7", "10.0.0.7"), ("[::1]:5123", "[::1]"),
    ("::1", "::1"), ("fe80::1:2", "fe80::1:2"), (None, None)])
def test_throttling_is_per_host(remote: str | None, host: str | None) -> None:
    from relaymq_auth.throttle import host_of

    assert host_of(remote) == host


@pytest.mark.parametrize(("attributes", "entries", "needle"), [
    ('mostSpecificWin="true"', ENTRIES,
     "'mostSpecificWin' is not an attribute of it (did you mean 'mostSpecificWins'?)"),
    ("", '<authorizationEntry queue="orders.>" read="orders" writ="apps"/>',
     "'writ' is not an attribute of it (did you mean 'write'?)"),
])
def test_an_authorization_attribute_that_would_not_apply_is_refused(
        attributes: str, entries: str, needle: str) -> None:
    """A misspelt mostSpecificWins left the map on the rule that grants every match
    (fail open); it, and a misspelt entry attribute, are errors, not warnings."""
    xml = XML.format(body=f"<plugins><authorizationPlugin><map><authorizationMap {attributes}>"
                     f"<authorizationEntries>{entries}</authorizationEntries>"
                     "</authorizationMap></map></authorizationPlugin></plugins>")
    element = load_config_text(xml).plugins[0]
    with pytest.raises(ConfigError, match="would not apply is refused") as info:
        parse_authorization(element, strict=False)
    assert needle in str(info.value)
