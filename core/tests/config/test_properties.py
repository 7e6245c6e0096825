"""${name} substitution: -D, the environment as ActiveMQ maps it, built-in defaults, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from relaymq.config import ConfigError, load_config, load_config_text
from relaymq.config.properties import Properties, parse_java_properties

KAHADB = """<broker dataDirectory="{data}">
  <persistenceAdapter><kahaDB directory="{dir}"/></persistenceAdapter>
</broker>"""


def load(data: str, dir: str = "x", **kw: object) -> object:
    return load_config_text(KAHADB.format(data=data, dir=dir), "xml", filename="activemq.xml",
                            **kw)  # type: ignore[arg-type]


def test_builtin_defaults_base_on_the_working_directory(tmp_path: Path) -> None:
    config = load("${activemq.data}", "${relaymq.data}/kahadb", env={}, base_dir=tmp_path)
    assert config.data_directory == f"{tmp_path}/data"
    assert config.persistence_adapter.attributes["directory"] == f"{tmp_path}/data/kahadb"
    assert config.properties["activemq.base"] == str(tmp_path)


def test_default_base_is_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load("${activemq.base}", env={}).data_directory == str(tmp_path)


def test_dash_d_wins_over_environment_and_defaults() -> None:
    config = load("${activemq.data}", env={"ACTIVEMQ_DATA": "/from/env"},
                  properties={"activemq.data": "/from/cli"})
    assert config.data_directory == "/from/cli"


def test_environment_as_the_activemq_launcher_maps_it() -> None:
    env = {"ACTIVEMQ_BASE": "/opt/base", "ACTIVEMQ_HOME": "/opt/home"}
    config = load("${activemq.data}", "${activemq.home}/x", env=env)
    assert config.data_directory == "/opt/base/data"  # activemq.data follows activemq.base
    assert config.persistence_adapter.attributes["directory"] == "/opt/home/x"
    config = load("${relaymq.data}", env={"ACTIVEMQ_DATA": "/var/amq"})
    assert config.data_directory == "/var/amq"  # relaymq.data follows activemq.data


def test_any_environment_variable_by_its_name() -> None:
    assert load("${STORE_ROOT}/data", env={"STORE_ROOT": "/srv"}).data_directory == "/srv/data"


def test_spring_default_value() -> None:
    assert load("${nowhere:/fallback}", env={}).data_directory == "/fallback"
    assert load("${nowhere:${ALSO:/x}}/y", env={}).data_directory == "/x/y"


def test_unknown_property_is_an_error_with_file_line() -> None:
    with pytest.raises(ConfigError) as info:
        load("${activemq.dta}", "${nope}", env={})
    first, second = info.value.errors
    assert first.startswith("${activemq.dta} at activemq.xml:1 is not defined; pass -D "
                            "activemq.dta=VALUE")
    assert "did you mean activemq.data?" in first
    assert second.startswith("${nope} at activemq.xml:2 is not defined")


def test_self_reference_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"refers to itself \(a -> b -> a\)"):
        load("${a}", properties={"a": "${b}", "b": "${a}"}, env={})


def test_unused_spring_beans_may_name_undefined_properties() -> None:
    config = load_config_text(
        """<beans xmlns="http://www.springframework.org/schema/beans">
  <bean id="x" class="com.acme.Thing"><property name="p" value="${never.defined}"/></bean>
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="b"/>
</beans>""", "xml", env={})
    assert config.broker_name == "b"


def test_placeholder_configurer_properties_file(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "credentials.properties").write_text(
        "# ActiveMQ's stock credentials file\nactivemq.username=system\n"
        "activemq.password = manager\nstore.dir: ${activemq.base}/store\n")
    (conf / "activemq.xml").write_text("""<beans xmlns="http://www.springframework.org/schema/beans">
  <bean class="org.springframework.beans.factory.config.PropertyPlaceholderConfigurer">
    <property name="locations"><value>file:${activemq.conf}/credentials.properties</value></property>
  </bean>
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="${activemq.username}"
          dataDirectory="${store.dir}">
    <plugins><simpleAuthenticationPlugin><users>
      <authenticationUser username="${activemq.username}" password="${activemq.password}"
                          groups="admins"/>
    </users></simpleAuthenticationPlugin></plugins>
  </broker>
</beans>""")
    config = load_config(conf / "activemq.xml", {"activemq.base": "/b"}, env={})
    assert config.broker_name == "system"
    assert config.data_directory == "/b/store"
    user = config.plugins[0].child("users").child("authenticationUser")
    assert user.attributes["password"] == "manager"
    assert any("credentials.properties" in n for n in config.notes)


def test_java_properties_format() -> None:
    text = "a=1\nb : 2\nc 3\n! comment\n# comment\nlong = one \\\n    two\nesc=tab\\there\\u0041\n"
    assert parse_java_properties(text) == {
        "a": "1", "b": "2", "c": "3", "long": "one two", "esc": "tab\there" + "A"}


def test_properties_api() -> None:
    props = Properties({"x": "${y}-1"}, env={"y": "Y"}, base_dir=Path("/base"))
    assert props.substitute("${x}/${activemq.conf}") == "Y-1//base/conf"
    assert props.get("missing") is None
    assert props.used["x"] == "Y-1"
