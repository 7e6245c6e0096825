"""PluginRegistry in this process: built-ins, error messages, hooks, validation."""

from __future__ import annotations

import pytest
from relaymq.config import load_config_text
from relaymq.config.defaults import default_config
from relaymq.config.model import BrokerConfig, Origin, PluginElement
from relaymq.errors import ConfigError, PluginHookError, PluginNotFound
from relaymq.hookspecs import hookimpl
from relaymq.model.destination import Destination
from relaymq.plugins import (
    PERSISTENCE,
    TRANSPORTS,
    PluginRegistry,
    enabled_names,
    install_hint,
)
from relaymq.testing.requirements import NOT_APPLICABLE

AT = Origin("activemq.xml", 14)


@pytest.fixture
def registry() -> PluginRegistry:
    return PluginRegistry()


def absent(registry: PluginRegistry, group: str, name: str) -> None:
    if name in registry.names(group):
        pytest.skip(f"{NOT_APPLICABLE}{name} is installed in this environment")


def test_kernel_builtins_are_entry_points_of_the_relaymq_distribution(registry) -> None:
    assert "memoryPersistenceAdapter" in registry.names(PERSISTENCE)
    assert "vm" in registry.names(TRANSPORTS)
    assert "redeliveryPlugin" in registry.names("relaymq.broker_plugins")
    kernel = next(d for d in registry.distributions() if d.name == "relaymq")
    assert kernel.version
    assert "memoryPersistenceAdapter" in kernel.provides[PERSISTENCE]
    from relaymq.store.memory import MemoryPersistenceAdapter

    assert registry.resolve(PERSISTENCE, "memoryPersistenceAdapter") is MemoryPersistenceAdapter


def test_not_found_names_file_line_element_installed_and_the_pip_install(registry) -> None:
    absent(registry, PERSISTENCE, "jdbcPersistenceAdapter")
    installed = ", ".join(registry.names(PERSISTENCE))
    with pytest.raises(PluginNotFound) as info:
        registry.resolve(PERSISTENCE, "jdbcPersistenceAdapter", AT)
    assert str(info.value) == (
        "<jdbcPersistenceAdapter> at activemq.xml:14 needs a persistence adapter named "
        f"'jdbcPersistenceAdapter'; installed: {installed}; install it with "
        "pip install relaymq-jdbc")


def test_not_found_for_other_slots(registry) -> None:
    absent(registry, "relaymq.broker_plugins", "simpleAuthenticationPlugin")
    with pytest.raises(PluginNotFound, match="needs a broker plugin named "
                       "'simpleAuthenticationPlugin'.*pip install relaymq-auth"):
        registry.resolve("relaymq.broker_plugins", "simpleAuthenticationPlugin", AT)
    assert install_hint("relaymq.broker_connections", "amqp-connection") == \
        "pip install relaymq-amqp"
    assert install_hint("relaymq.outgoing", "stomp+ssl") == "pip install relaymq-stomp"


def test_not_found_without_a_first_party_provider(registry) -> None:
    with pytest.raises(PluginNotFound) as info:
        registry.resolve(PERSISTENCE, "levelDB", AT)
    assert "ActiveMQ removed LevelDB; use <kahaDB>" in str(info.value)
    with pytest.raises(PluginNotFound) as info:
        registry.resolve("relaymq.broker_plugins", "redeliveryPlugn", AT)
    message = str(info.value)
    assert "no first-party RelayMQ plugin provides it; did you mean redeliveryPlugin?" in message
    assert "relaymq.broker_plugins" in message


def test_transport_factory(registry) -> None:
    assert registry.transport_factory("vm") is not None
    assert registry.transport_factory("tcp") is None
    assert "RelayMQ does not speak OpenWire" in registry.not_found_message(TRANSPORTS, "tcp")
    assert install_hint(TRANSPORTS, "stomp+ssl") == "pip install relaymq-stomp"


def test_unknown_group(registry) -> None:
    with pytest.raises(ValueError, match="unknown entry-point group"):
        registry.resolve("relaymq.nope", "x")


def test_build_uses_from_element(registry) -> None:
    element = PluginElement("redeliveryPlugin", {"fallbackToDeadLetter": "false"}, origin=AT)
    plugin = registry.build("relaymq.broker_plugins", element, broker=None)
    assert plugin.policy_map.fallback_to_dead_letter is False
    assert registry.built == [("relaymq.broker_plugins", "redeliveryPlugin", AT)]


def test_pm_has_the_hookspecs_and_runs_registered_hooks(registry) -> None:
    calls = []

    class Observer:
        @hookimpl
        def relaymq_destination_added(self, destination):  # a subset of the arguments
            calls.append(destination)

    observer = Observer()
    name = registry.register(observer)
    assert registry.register(observer) == name  # idempotent
    registry.check()
    # The registry also holds every installed plugin's hooks (``relaymq.hooks`` entry
    # points); they are entitled to a real broker, so only the observer is called here,
    # through the same plugin manager, with a real destination as the hookspec says.
    others = [plugin for plugin in registry.pm.get_plugins() if plugin is not observer]
    added = registry.pm.subset_hook_caller("relaymq_destination_added", remove_plugins=others)
    destination = Destination.queue("A")
    added(broker=None, destination=destination, recovered=False)
    assert calls == [destination]


def test_check_names_the_plugin_and_the_misspelt_hook(registry) -> None:
    class Typo:
        @hookimpl
        def relaymq_broker_startd(self, broker):
            pass

    registry.register(Typo(), description="the <typoPlugin> plugin from relaymq-typo 1.0")
    with pytest.raises(PluginHookError) as info:
        registry.check()
    assert str(info.value) == (
        "the <typoPlugin> plugin from relaymq-typo 1.0 implements 'relaymq_broker_startd', which "
        "is not a RelayMQ hook; did you mean relaymq_broker_started?")


def test_register_refuses_arguments_the_spec_lacks(registry) -> None:
    class Wrong:
        @hookimpl
        def relaymq_broker_started(self, broker, extra):
            pass

    with pytest.raises(PluginHookError, match="(?s)invalid hook implementation.*extra"):
        registry.register(Wrong())


def test_validate_lists_every_missing_plugin(registry) -> None:
    absent(registry, "relaymq.broker_plugins", "authorizationPlugin")
    config = load_config_text("""<broker>
  <persistenceAdapter><levelDB/></persistenceAdapter>
  <plugins><redeliveryPlugin/><authorizationPlugin/></plugins>
  <transportConnectors><transportConnector uri="tcp://0.0.0.0:61616"/></transportConnectors>
</broker>""", "xml", filename="activemq.xml")
    with pytest.raises(ConfigError) as info:
        registry.validate(config)
    assert len(info.value.errors) == 2
    assert info.value.errors[0].startswith("<levelDB> at activemq.xml:2")
    assert info.value.errors[1].startswith("<authorizationPlugin> at activemq.xml:3")

    ok = load_config_text('<broker><transportConnectors><transportConnector uri="tcp://x:1"/>'
                          '</transportConnectors></broker>', "xml", filename="a.xml")
    (warning,) = registry.validate(ok)
    assert warning.startswith('<transportConnector uri="tcp://x:1"> at a.xml:1 will be skipped')
    with pytest.raises(ConfigError, match="will be skipped"):
        PluginRegistry(strict=True).validate(ok)


def test_enabled_names() -> None:
    config = load_config_text("""<broker persistent="false">
  <persistenceAdapter><kahaDB/></persistenceAdapter>
  <plugins><redeliveryPlugin/></plugins>
  <transportConnectors><transportConnector uri="amqp://0.0.0.0:5672"/></transportConnectors>
  <broker-connections><amqp-connection uri="amqp://b"><mirror/></amqp-connection></broker-connections>
</broker>""", "xml")
    assert enabled_names(config) == {
        "relaymq.broker_plugins": ["redeliveryPlugin"],
        "relaymq.broker_connections": ["amqp-connection"],
        "relaymq.connection_operations": ["mirror"],
        PERSISTENCE: ["memoryPersistenceAdapter"],  # persistent="false" wins over <kahaDB>
        TRANSPORTS: ["amqp", "vm"],
        "relaymq.queue_types": ["standard"],  # always; plus each queueType the config names
    }


def test_default_config_enables_installed_first_party_transports_and_store(registry) -> None:
    config = default_config(registry, {"relaymq.data": "/srv/data"})
    installed = set(registry.names(TRANSPORTS))
    expected = [u for s, u in (("amqp", "amqp://127.0.0.1:5672"), ("stomp", "stomp://127.0.0.1:61613"))
                if s in installed]
    assert [tc.uri for tc in config.transport_connectors] == expected
    if "kahaDB" in registry.names(PERSISTENCE):
        assert config.persistence_adapter == PluginElement("kahaDB", {"directory": "/srv/data/kahadb"})
    else:
        assert config.persistence_adapter is None
    assert isinstance(config, BrokerConfig) and config.source == "<default config>"


def test_every_first_party_entry_point_has_its_install_hint() -> None:
    """Each element a first-party plugin provides (its pyproject's entry points)
    is in `FIRST_PARTY`, naming that distribution: a configuration that uses it
    without the plugin installed is told what to `pip install` (<console> was
    told "no first-party RelayMQ plugin provides it")."""
    import tomllib
    from pathlib import Path

    from relaymq.plugins import FIRST_PARTY

    root = Path(__file__).resolve().parents[3]
    missing = []
    for pyproject in sorted(root.glob("plugins/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        dist = project["name"]
        for group, points in project.get("entry-points", {}).items():
            if group not in FIRST_PARTY:
                continue
            for name in points:
                if dist not in FIRST_PARTY[group].get(name, ()):
                    missing.append(f"{group}: {name} ({dist})")
    assert not missing, missing
