"""Really installed plugin packages: discovery, enabling by config, hooks, strict errors."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from .conftest import run_python

EXAMPLE_SCRIPT = textwrap.dedent("""
    import asyncio, json
    from relaymq.broker.broker import Broker
    from relaymq.client import connect_broker
    from relaymq.config import load_config_text
    from relaymq.errors import RelayMQError
    from relaymq.plugins import PluginRegistry

    async def main():
        out = {}
        registry = PluginRegistry()
        out["names"] = registry.names("relaymq.broker_plugins")
        out["hooks"] = registry.names("relaymq.hooks")
        out["dists"] = {d.name: [d.version, d.provides] for d in registry.distributions()}

        import relaymq_example
        from relaymq_example.plugin import ExamplePlugin

        # Installed is not enabled: a config that does not name it builds nothing.
        plain = Broker(load_config_text('<broker brokerName="plain" persistent="false"/>'),
                       registry=PluginRegistry())
        await plain.start()
        await plain.stop()
        out["instances_when_not_named"] = ExamplePlugin.instances
        out["events_when_not_named"] = list(relaymq_example.EVENTS)
        relaymq_example.EVENTS.clear()

        config = load_config_text('''<broker brokerName="b1" persistent="false">
          <plugins><examplePlugin greeting="hi" maxBytes="1 kb"/></plugins>
        </broker>''')
        broker = Broker(config, registry=PluginRegistry())
        await broker.start()
        conn = await connect_broker(broker)
        consumer = await conn.consumer("queue://q")
        await conn.send("queue://q", b"small")
        msg = await consumer.receive(timeout=5)
        out["greeting"] = msg.properties.get("greeting")
        try:
            await conn.send("queue://q", b"x" * 2048)
            out["big"] = "accepted"
        except RelayMQError as exc:
            out["big"] = type(exc).__name__
        await conn.close()
        await broker.stop()
        out["instances"] = ExamplePlugin.instances
        out["events"] = relaymq_example.EVENTS
        print(json.dumps(out))

    asyncio.run(main())
""")


def test_example_plugin_is_discovered_enabled_by_config_and_its_hooks_run(example_site: Path) -> None:
    done = run_python(example_site, EXAMPLE_SCRIPT)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "examplePlugin" in out["names"] and "redeliveryPlugin" in out["names"]
    assert "example" in out["hooks"]
    version, provides = out["dists"]["relaymq-example"]
    assert version == "0.1.0"
    assert provides == {"relaymq.broker_plugins": ["examplePlugin"], "relaymq.hooks": ["example"],
                        "relaymq.cli": ["example"]}
    # relaymq.hooks entry points are always registered; the broker plugin is not built
    assert out["instances_when_not_named"] == 0
    assert out["events_when_not_named"] == ["configure plain"]
    assert out["instances"] == 1
    assert out["events"] == ["built greeting=hi max_bytes=1024", "installed", "configure b1",
                             "started b1", "stopping b1"]
    assert out["greeting"] == "hi"
    assert out["big"] == "ResourceLimitExceeded"


def test_plugin_adds_a_cli_subcommand(example_site: Path) -> None:
    done = run_python(example_site, "relaymq.cli", "example", "hello", "RelayMQ", module=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello, RelayMQ, from relaymq-example"
    listing = run_python(example_site, "relaymq.cli", "--help", module=True)
    assert "example" in listing.stdout


def test_plugins_list_shows_the_installed_distribution(example_site: Path, tmp_path: Path) -> None:
    config = tmp_path / "activemq.xml"
    config.write_text('<broker><plugins><examplePlugin/></plugins></broker>')
    done = run_python(example_site, "relaymq.cli", "plugins", "list", "--config", str(config),
                      module=True)
    assert done.returncode == 0, done.stderr
    assert "relaymq-example 0.1.0" in done.stdout
    assert "broker_plugins: examplePlugin [enabled]" in done.stdout


def test_config_check_validates_the_plugin_config(example_site: Path, tmp_path: Path) -> None:
    config = tmp_path / "activemq.xml"
    config.write_text('<broker>\n<plugins>\n<examplePlugin maxBytes="huge"/></plugins></broker>')
    done = run_python(example_site, "relaymq.cli", "config", "check", str(config), module=True)
    assert done.returncode == 1
    assert f'<examplePlugin maxBytes="huge"> at {config}:3: expected a size' in done.stderr


CONFLICT_SCRIPT = textwrap.dedent("""
    from relaymq.config.model import Origin
    from relaymq.errors import PluginConflict, PluginLoadError
    from relaymq.plugins import PluginRegistry

    registry = PluginRegistry()
    try:
        registry.resolve("relaymq.broker_plugins", "conflictingPlugin", Origin("activemq.xml", 9))
    except PluginConflict as exc:
        print("CONFLICT", exc)
    try:
        registry.resolve("relaymq.broker_plugins", "brokenPlugin", Origin("activemq.xml", 12))
    except PluginLoadError as exc:
        print("LOAD", exc)
        print("CAUSE", type(exc.__cause__).__name__, exc.__cause__)
""")


def test_two_distributions_claiming_one_name_is_an_error_naming_both(troubled_site: Path) -> None:
    done = run_python(troubled_site, CONFLICT_SCRIPT)
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("CONFLICT"))
    assert "<conflictingPlugin> at activemq.xml:9" in line
    assert "relaymq-conflict-a 0.1.0 (relaymq_conflict_a:Plugin)" in line
    assert "relaymq-conflict-b 0.2.0 (relaymq_conflict_b:Plugin)" in line
    assert "will not pick one" in line


def test_import_failure_is_chained(troubled_site: Path) -> None:
    done = run_python(troubled_site, CONFLICT_SCRIPT)
    lines = done.stdout.splitlines()
    load = next(ln for ln in lines if ln.startswith("LOAD"))
    assert "<brokenPlugin> at activemq.xml:12: a broker plugin from relaymq-broken 0.1.0" in load
    assert "failed to import: ModuleNotFoundError" in load
    assert "relaymq_dependency_that_is_not_installed" in load
    cause = next(ln for ln in lines if ln.startswith("CAUSE"))
    assert cause.startswith("CAUSE ModuleNotFoundError")


def test_config_check_reports_conflict_and_broken_plugin(troubled_site: Path, tmp_path: Path) -> None:
    config = tmp_path / "activemq.xml"
    config.write_text("<broker><plugins>\n<conflictingPlugin/>\n<brokenPlugin/>\n</plugins></broker>")
    done = run_python(troubled_site, "relaymq.cli", "config", "check", "--allow-vm-only", str(config),
                      module=True)
    assert done.returncode == 1
    assert "2 error(s)" in done.stderr
    assert "relaymq-conflict-a" in done.stderr and "relaymq-conflict-b" in done.stderr
    assert "relaymq-broken 0.1.0" in done.stderr


def test_unnamed_broken_and_conflicting_plugins_do_not_stop_a_broker(troubled_site: Path) -> None:
    script = textwrap.dedent("""
        import asyncio
        from relaymq.broker.broker import Broker
        from relaymq.config import load_config_text
        async def main():
            b = Broker(load_config_text('<broker persistent="false"/>'))
            await b.start()
            await b.stop()
            print("OK")
        asyncio.run(main())
    """)
    done = run_python(troubled_site, script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "OK"
    listing = run_python(troubled_site, "relaymq.cli", "plugins", "list", module=True)
    assert "conflicts (a configuration naming these fails):" in listing.stdout
    assert "broker_plugins 'conflictingPlugin'" in listing.stdout


def test_broken_plugin_command_is_listed_and_fails_alone(troubled_site: Path) -> None:
    listing = run_python(troubled_site, "relaymq.cli", "--help", module=True)
    assert listing.returncode == 0, listing.stderr
    assert "broken" in listing.stdout and "(unavailable:" in listing.stdout
    done = run_python(troubled_site, "relaymq.cli", "broken", module=True)
    assert done.returncode == 1
    assert "failed to import: ModuleNotFoundError" in done.stderr
    check = run_python(troubled_site, "relaymq.cli", "plugins", "list", module=True)
    assert check.returncode == 0, check.stderr


def test_a_plugin_cannot_replace_a_builtin_command(troubled_site: Path) -> None:
    done = run_python(troubled_site, "relaymq.cli", "run", "--help", module=True)
    assert done.returncode == 1
    assert "'run' is a built-in relaymq command, but relaymq-conflict-a 0.1.0" in done.stderr
