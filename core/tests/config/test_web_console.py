"""ActiveMQ's jetty.xml import and <managementContext> -> an implied <console>."""

from __future__ import annotations

from pathlib import Path

from relaymq.config import load_config
from relaymq.testing.activemq_files import jetty_xml


def activemq_xml(tmp: Path, management: str = "", jetty: bool = True) -> Path:
    path = tmp / "activemq.xml"
    path.write_text(f"""<beans xmlns="http://www.springframework.org/schema/beans">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="b" persistent="false">
    {management}
  </broker>
  {'<import resource="jetty.xml"/>' if jetty else ''}
</beans>""")
    return path


def implied(config) -> dict[str, str]:
    [console] = [el for el in config.extra.get("implied_plugins", []) if el.tag == "console"]
    return console.attributes


def test_jetty_xml_maps_to_the_consoles_host_port_groups_and_users(tmp_path) -> None:
    (tmp_path / "jetty.xml").write_text(jetty_xml(18161))
    config = load_config(activemq_xml(tmp_path), env={})
    attrs = implied(config)
    assert attrs["host"] == "127.0.0.1" and attrs["port"] == "18161"
    assert attrs["adminGroup"] == "admin" and attrs["viewerGroup"] == "user"
    assert attrs["usersFile"] == str(tmp_path / "jetty-realm.properties")
    assert "authenticate" not in attrs
    assert attrs["impliedBy"] == str(tmp_path / "jetty.xml")
    assert config.plugins == []  # enabled by the broker only when relaymq-console is there
    assert not any("jetty" in w for w in config.warnings)
    assert any("map to relaymq-console's <console host=127.0.0.1 port=18161" in n
               for n in config.notes)


def test_jetty_xml_without_login(tmp_path) -> None:
    (tmp_path / "jetty.xml").write_text(jetty_xml(8161, authenticate=False))
    attrs = implied(load_config(activemq_xml(tmp_path), env={}))
    assert attrs["authenticate"] == "false" and "usersFile" not in attrs


def test_a_missing_jetty_xml_is_one_warning(tmp_path) -> None:
    config = load_config(activemq_xml(tmp_path), env={})
    assert "implied_plugins" not in config.extra
    [warning] = config.warnings
    assert '<import resource="jetty.xml">' in warning and "cannot read" in warning


def test_management_context_maps_domain_and_connector(tmp_path) -> None:
    config = load_config(activemq_xml(tmp_path, """<managementContext><managementContext
        createConnector="true" connectorPort="1099" jmxDomainName="my.domain"/></managementContext>""",
        jetty=False), env={})
    attrs = implied(config)
    assert attrs["jmxDomainName"] == "my.domain"
    assert attrs["impliedBy"].startswith('<managementContext createConnector="true">')
    assert any('connectorPort="1099"' in n and "no JMX/RMI connector" in n
               for n in config.notes), config.notes
    assert config.warnings == []


def test_management_context_without_a_connector_implies_nothing(tmp_path) -> None:
    config = load_config(activemq_xml(tmp_path, '<managementContext createConnector="false"/>',
                                      jetty=False), env={})
    assert "implied_plugins" not in config.extra and config.warnings == []
