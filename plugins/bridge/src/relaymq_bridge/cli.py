"""``relaymq bridge run CONFIG``: bridges without a broker (migrations); and
``relaymq bridge list|status|start|stop|pause|resume`` on a running broker's
bridges (`relaymq_bridge.remote`).

CONFIG is XML or YAML. XML: a ``<bridges>`` (or ``<jmsBridgeConnectors>``)
root, or a whole broker configuration whose bridges are run. YAML: the
broker-config shape (``bridges: [{bridge: {...}}]``). Status lines (JSON, one
per bridge) are printed every ``--status-every`` seconds; SIGINT/SIGTERM stop
the bridges politely. The exit status is 1 when every bridge stopped by
itself (max-retries exhausted), else 0.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from relaymq.errors import ConfigError, RelayMQError

from relaymq_bridge.remote import add_remote_commands

if TYPE_CHECKING:
    from relaymq.config.model import BrokerConfig
    from relaymq.outgoing import OutgoingConnections
    from relaymq.plugins import PluginRegistry

    from relaymq_bridge.bridge import Bridge

# `relaymq bridge list|status|...` (console requests) and `relaymq --help` import this
# module; the configuration loader and the bridge machinery are imported by `run`.


def load_bridges_config(path: Path) -> BrokerConfig:
    import yaml
    from relaymq.config import load_config_text

    data = path.read_bytes()
    text = data.decode("utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        tree = yaml.safe_load(text)
        if isinstance(tree, dict) and tree and set(tree) <= {"bridges", "jmsBridgeConnectors"}:
            text = yaml.safe_dump({"broker": tree}, sort_keys=False)  # bridges alone
        return load_config_text(text, "yaml", filename=str(path), base_dir=path.parent)
    body = re.sub(r"^\s*<\?xml[^>]*\?>", "", text)
    root = re.search(r"<\s*([A-Za-z][\w.-]*)", re.sub(r"<!--.*?-->", "", body, flags=re.S))
    if root is not None and root.group(1) in ("bridges", "jmsBridgeConnectors"):
        body = "<broker>" + body + "</broker>"  # same lines: errors keep their line numbers
    return load_config_text(body, "xml", filename=str(path), base_dir=path.parent)


def build_bridges(config: BrokerConfig, outgoing: OutgoingConnections,
                  registry: PluginRegistry) -> list[Bridge]:
    """The bridges a configuration names, for a standalone run (no local broker)."""
    from relaymq_bridge.manager import BridgeManager

    manager = BridgeManager()

    class _NoBroker:
        strict = False
        extensions: dict[str, Any] = {"bridges": manager}

        def __init__(self) -> None:
            self.outgoing = outgoing
            self.plugins = registry

        def connector_address(self, scheme: str) -> str:
            raise KeyError(scheme)

    host = _NoBroker()
    for el in (*config.bridges, *config.jms_bridge_connectors):
        registry.build("relaymq.bridges", el, host)
    bridges = list(manager)
    bad = [f"bridge {b.name}: {b.config_error}" for b in bridges if b.config_error is not None]
    if bad:  # a standalone run exists for these bridges: refuse it whole, as a config error
        raise ConfigError("\n".join(bad), bad)
    for b in bridges:
        for uri in (b.config.source_uri, b.config.target_uri):
            if uri.startswith("vm:"):
                raise ConfigError(f"bridge {b.name}: {uri} means the local broker, and "
                                  "`relaymq bridge run` runs without one; give an amqp:// or "
                                  "stomp:// URI")
    return bridges


async def run_bridges(bridges: list[Bridge], status_every: float) -> int:
    from relaymq_bridge.bridge import BridgeState

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - not on the main thread
            pass
    for b in bridges:
        await b.start()

    async def all_failed() -> None:
        await asyncio.gather(*(b.wait_stopped() for b in bridges))

    watcher = loop.create_task(all_failed())
    stopper = loop.create_task(stop.wait())
    try:
        while True:
            done, _ = await asyncio.wait({watcher, stopper},
                                         timeout=status_every if status_every > 0 else None,
                                         return_when=asyncio.FIRST_COMPLETED)
            for b in bridges:
                if status_every > 0 or done:
                    click.echo(json.dumps(b.info(), sort_keys=True))
            sys.stdout.flush()
            if done:
                break
    finally:
        watcher.cancel()
        stopper.cancel()
        for b in bridges:
            await b.stop() if b.state is not BridgeState.FAILED else None
    return 1 if all(b.state is BridgeState.FAILED for b in bridges) else 0


@click.group("bridge")
def bridge() -> None:
    """JMS-style bridges (relaymq-bridge): run standalone, or control a broker's."""


add_remote_commands(bridge)


@bridge.command("run")
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--status-every", default=10.0, show_default=True,
              help="seconds between status lines (0: only at the end)")
def run(config: Path, status_every: float) -> None:
    """Run the bridges of CONFIG until SIGINT/SIGTERM (no broker needed)."""
    try:
        cfg = load_bridges_config(config)
        for w in cfg.warnings:
            click.echo(f"warning: {w}", err=True)

        from relaymq.outgoing import OutgoingConnections
        from relaymq.plugins import PluginRegistry

        async def main() -> int:
            registry = PluginRegistry()
            outgoing = OutgoingConnections(registry)
            bridges = build_bridges(cfg, outgoing, registry)
            if not bridges:
                raise ConfigError(f"{config}: no <bridge> found (write <bridges><bridge .../></bridges>)")
            return await run_bridges(bridges, status_every)

        code = asyncio.run(main())
    except (RelayMQError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    sys.exit(code)
