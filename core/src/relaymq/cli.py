"""The ``relaymq`` command: run a broker, list plugins, check a configuration.

```
relaymq run [--config FILE] [--strict] [-D name=value ...]
relaymq plugins list [--config FILE] [--json]
relaymq config check FILE [-D name=value ...] [--strict]
```

Plugins add subcommands through the entry-point group ``relaymq.cli`` (a click
command or group per entry point; ``relaymq kahadb inspect DIR``). They are
imported only when their command is asked for, so a broken plugin cannot take
``relaymq run`` down with it, and a plugin cannot replace a built-in command.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from relaymq import __version__, compiled
from relaymq.errors import ConfigError, RelayMQError

if TYPE_CHECKING:
    from relaymq.checks import CheckResult
    from relaymq.config.model import BrokerConfig
    from relaymq.plugins import PluginRegistry

# Start-up time: every ``relaymq`` invocation (``--help``, the admin commands, health
# checks in loops) imports this module, so the configuration loader (yaml, the XML
# parser), the checks and the plugin registry (pluggy, stevedore) are imported by the
# commands that use them, not here. docs/operations.md has the measurements.

log = logging.getLogger("relaymq.cli")

#: seconds `relaymq run` gives a stopping broker (connections, store) on SIGTERM
DRAIN_TIMEOUT = 30.0


class StopTimeout(RelayMQError):
    """The broker did not stop within --drain-timeout."""

    exit_status = 5


class StoppedByItself(RelayMQError):
    """The broker stopped without being asked: its store lost its lock (a master
    whose lease ran out while its database was away). Started again, it waits as
    a slave; a service manager restarts it (exit status 6)."""

    exit_status = 6


# ---------------------------------------------------------------------------
# Plumbing
# ---------------------------------------------------------------------------


class RelayMQGroup(click.Group):
    """Built-in commands plus the ``relaymq.cli`` entry points of installed plugins."""

    def _registry(self, ctx: click.Context) -> PluginRegistry:
        root = ctx.find_root()
        registry = root.meta.get("relaymq.registry")
        if registry is None:
            from relaymq.plugins import PluginRegistry

            registry = root.meta["relaymq.registry"] = PluginRegistry()
        return registry  # type: ignore[no-any-return]

    def list_commands(self, ctx: click.Context) -> list[str]:
        from relaymq.plugins import CLI

        plugin_names = self._registry(ctx).names(CLI)
        return sorted({*super().list_commands(ctx), *plugin_names})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from relaymq.plugins import CLI

        registry = self._registry(ctx)
        plugin_claims = registry.entry_points(CLI, cmd_name)
        builtin = super().get_command(ctx, cmd_name)
        if builtin is not None and plugin_claims:
            by = " and ".join(i.describe() for i in plugin_claims)
            raise click.ClickException(
                f"'{cmd_name}' is a built-in relaymq command, but {by} also declares it in the "
                f"entry-point group {CLI}; uninstall {plugin_claims[0].dist}")
        if builtin is not None or not plugin_claims:
            return builtin
        try:
            command = registry.resolve(CLI, cmd_name)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from exc
        if not isinstance(command, click.Command):
            raise click.ClickException(
                f"entry point '{cmd_name}' in {CLI} from {plugin_claims[0].describe()} is "
                f"{type(command).__name__}, not a click command")
        return command


    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """``relaymq --help`` lists a broken plugin command instead of failing."""
        rows = []
        for name in self.list_commands(ctx):
            try:
                cmd = self.get_command(ctx, name)
            except click.ClickException as exc:
                rows.append((name, f"(unavailable: {exc.message.splitlines()[0]})"))
                continue
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(formatter.width - 6 - len(name))))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _parse_defines(values: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"'{item}' is not NAME=VALUE", param_hint="-D")
        out[name.strip()] = value
    return out


def _fail(exc: RelayMQError) -> None:
    """One line (or the list of a configuration's errors) and the error's exit status."""
    click.echo(f"relaymq: {exc}", err=True)
    sys.exit(getattr(exc, "exit_status", 1))


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _quiet_logging() -> None:
    """For commands that print warnings themselves: no duplicate log lines."""
    logging.basicConfig(level=logging.CRITICAL, handlers=[logging.NullHandler()])


def _short(group: str) -> str:
    return group.removeprefix("relaymq.")


define_option = click.option(
    "-D", "defines", multiple=True, metavar="NAME=VALUE",
    help="Define a ${NAME} property for the configuration (repeatable).")


@click.group(cls=RelayMQGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="relaymq")
def main() -> None:
    """RelayMQ: a message broker with a small kernel and pip-installable plugins."""


# ---------------------------------------------------------------------------
# relaymq run
# ---------------------------------------------------------------------------


@main.command()
@click.option("--config", "-c", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="activemq.xml-style XML or YAML; without it, every installed first-party "
                   "transport on its standard port (on --bind) and kahaDB (or the memory store).")
@click.option("--strict", is_flag=True,
              help="Unknown elements/attributes and unserved transports are errors.")
@click.option("--allow-vm-only", is_flag=True,
              help="Start even when no network transport would be served (embedded use).")
@click.option("--bind", default="127.0.0.1", show_default=True, metavar="HOST",
              help="Address the default configuration listens on (ignored with --config).")
@define_option
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@click.option("--drain-timeout", default=DRAIN_TIMEOUT, show_default=True, type=float,
              metavar="SECONDS", help="On SIGTERM, how long connections and the store may take "
                                      "to finish before the process exits anyway.")
@click.option("--log-config", type=click.Path(exists=True, dir_okay=False),
              help="A logging configuration (YAML or JSON, Python's dictConfig schema); "
                   "replaces the <logging> element of the broker configuration.")
def run(config_path: str | None, strict: bool, allow_vm_only: bool, bind: str,
        defines: tuple[str, ...], log_level: str, drain_timeout: float,
        log_config: str | None) -> None:
    """Run a broker until SIGINT or SIGTERM, then stop it gracefully."""
    from relaymq.checks import check
    from relaymq.config.report import mark_reported
    from relaymq.logsetup import configure_logging
    from relaymq.plugins import PluginRegistry

    _setup_logging(log_level)
    registry = PluginRegistry(strict=strict)
    props = _parse_defines(defines)

    def reread() -> CheckResult:
        return check(config_path, registry, props, strict=strict, allow_vm_only=allow_vm_only,
                     host=bind)

    result = reread()
    if not result.ok:
        _print_errors(result.source, result.errors)
        sys.exit(1)
    assert result.config is not None
    config = result.config
    try:
        configure_logging(config.logging, log_config, log_level)
    except ConfigError as exc:
        _fail(exc)
    for w in result.warnings:
        log.warning("%s", w)
    mark_reported(result.warnings)  # building the broker does not log them again
    _log_enabled(result)
    try:
        _run_loop(serve(config, registry, reread=reread if config_path else None,
                        drain_timeout=drain_timeout))
    except RelayMQError as exc:  # a start-up refusal that says what to do
        _fail(exc)


def _print_errors(source: str, errors: list[str]) -> None:
    click.echo(f"{source}: {len(errors)} error(s)", err=True)
    for e in errors:
        click.echo(f"  - {e}", err=True)


def _log_enabled(result: CheckResult) -> None:
    from relaymq.plugins import TRANSPORTS, enabled_names

    config = result.config
    assert config is not None
    log.info("relaymq %s, configuration %s", __version__, config.source)
    for group, names in enabled_names(config).items():
        if group == TRANSPORTS:
            continue
        log.info("configured %s: %s", _short(group), ", ".join(names))
    log.info("transports: %s", ", ".join(f"{tc.name or '-'} {tc.uri}" for tc in result.served)
             or "vm only (--allow-vm-only)")
    for tc in result.unavailable:
        log.warning("transport %s %s is not available: no installed plugin serves it",
                    tc.name or "-", tc.uri)


def tune_gc() -> None:
    """A broker allocates many short-lived objects per message and keeps deep queues
    of long-lived ones; CPython's default thresholds then spend a large share of the
    CPU in collections that find nothing. Collect young objects less often and
    keep start-up objects out of every collection. (Only `relaymq run` does this;
    an application embedding the broker keeps its own settings.)"""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


def _run_loop(coro: Any) -> None:
    """asyncio with uvloop when it is installed (``pip install relaymq[fast]``)."""
    tune_gc()
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coro)


async def serve(config: BrokerConfig, registry: PluginRegistry,
                stop: asyncio.Event | None = None, *,
                reread: Callable[[], CheckResult] | None = None,
                drain_timeout: float = DRAIN_TIMEOUT) -> None:
    """Start a broker, wait for SIGINT/SIGTERM (or ``stop``), stop it gracefully within
    `drain_timeout` seconds; on SIGHUP apply `reread()`'s configuration (`reload.py`)."""
    from relaymq.broker.broker import Broker
    from relaymq.broker.reload import apply_reload

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    broker = Broker(config, registry=registry)

    def on_hangup() -> None:
        if reread is None or not broker.started:
            return
        result = reread()
        if not result.ok:
            for e in result.errors:
                log.error("configuration reload refused, the broker keeps its configuration: %s", e)
            return
        assert result.config is not None
        apply_reload(broker, result.config)
        log.info("configuration reloaded from %s", result.config.source)

    installed: list[signal.Signals] = []
    for sig, handler in ((signal.SIGINT, stop.set), (signal.SIGTERM, stop.set),
                         (signal.SIGHUP, on_hangup)):
        try:
            loop.add_signal_handler(sig, handler)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, AttributeError):  # pragma: no cover
            pass
    try:
        # a slave waits in `start` for its store's lock (or its database) for as long
        # as it takes: SIGTERM/SIGINT stop it there too
        starting = asyncio.ensure_future(broker.start())
        asked_early = asyncio.ensure_future(stop.wait())
        await asyncio.wait([starting, asked_early], return_when=asyncio.FIRST_COMPLETED)
        asked_early.cancel()
        if not starting.done():
            log.info("stopping broker %s before it started (it was waiting for its store)",
                     config.broker_name)
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            return
        starting.result()  # its error, if it failed
        addresses = broker.connector_addresses
        log.info("broker %s listening on %s", config.broker_name,
                 ", ".join(addresses) if addresses else f"vm://{config.broker_name} only")
        if any(a.startswith(("127.", "localhost", "[::1]")) for a in addresses):
            log.info("listening on this machine only; give <transportConnector uri> (or "
                     "relaymq run --bind 0.0.0.0) to accept other machines")
        log.info("running %s", "; ".join(f"{pkg}: {how}" for pkg, how in compiled.status().items()))
        # also end when the broker stops by itself (a store that lost its lock)
        stopped = asyncio.ensure_future(broker.wait_stopped())
        asked = asyncio.ensure_future(stop.wait())
        await asyncio.wait([stopped, asked], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        asked.cancel()
        if not stop.is_set():
            raise StoppedByItself(f"broker {config.broker_name} stopped by itself; "
                                  "the log above says why")
        log.info("stopping broker %s (at most %g s)", config.broker_name, drain_timeout)
    finally:
        try:
            await asyncio.wait_for(broker.stop(), drain_timeout)
        except TimeoutError:
            raise StopTimeout(f"broker {config.broker_name} did not stop within {drain_timeout:g} s"
                              " (--drain-timeout); exiting without waiting further") from None
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)


# ---------------------------------------------------------------------------
# relaymq plugins list
# ---------------------------------------------------------------------------


@main.group()
def plugins() -> None:
    """Installed plugins and what a configuration enables."""


@plugins.command("list")
@click.option("--config", "-c", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="Mark what this configuration enables (default: the default config).")
@define_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins_list(config_path: str | None, defines: tuple[str, ...], as_json: bool) -> None:
    """Installed distributions, versions, the names each provides, and what is enabled."""
    from relaymq.config.defaults import default_config
    from relaymq.config.loader import load_config
    from relaymq.plugins import (
        GROUPS,
        PluginRegistry,
        enabled_names,
        install_hint,
        plugin_elements,
    )

    _quiet_logging()
    registry = PluginRegistry()
    try:
        config = (load_config(config_path, _parse_defines(defines)) if config_path
                  else default_config(registry, _parse_defines(defines)))
    except ConfigError as exc:
        _fail(exc)
        return
    enabled = enabled_names(config)
    missing = [
        (group, el.tag, str(el.origin)) for group, el in plugin_elements(config)
        if el.tag not in registry.names(group)
    ]
    conflicts = registry.conflicts()
    builds = _builds([d.name for d in registry.distributions()])
    if as_json:
        click.echo(json.dumps({
            "config": config.source,
            "distributions": [
                {"name": d.name, "version": d.version,
                 "provides": {g: [{"name": n, "enabled": n in enabled.get(g, [])} for n in names]
                              for g, names in d.provides.items()}}
                for d in registry.distributions()],
            "missing": [{"group": g, "name": n, "origin": o, "install": install_hint(g, n)}
                        for g, n, o in missing],
            "conflicts": [{"group": g, "name": n, "distributions": [i.dist for i in infos]}
                          for (g, n), infos in conflicts.items()],
            "builds": builds,
        }, indent=2))
        return
    for dist in registry.distributions():
        click.echo(f"{dist.name} {dist.version}")
        for group in GROUPS:
            names = dist.provides.get(group)
            if names:
                shown = [n + (" [enabled]" if n in enabled.get(group, []) else "") for n in names]
                click.echo(f"  {_short(group)}: {', '.join(shown)}")
    click.echo("\nbuild: " + "; ".join(f"{pkg}: {how}" for pkg, how in builds.items()))
    click.echo(f"\nenabled by {config.source}:")
    for group, names in enabled.items():
        click.echo(f"  {_short(group)}: {', '.join(names)}")
    if missing:
        click.echo("\nnamed by the configuration but not installed:")
        for group, name, origin in missing:
            hint = install_hint(group, name)
            click.echo(f"  <{name}> at {origin} ({_short(group)})"
                       + (f": {hint}" if hint else ""))
    if conflicts:
        click.echo("\nconflicts (a configuration naming these fails):")
        for (group, name), infos in conflicts.items():
            click.echo(f"  {_short(group)} '{name}': " + ", ".join(i.describe() for i in infos))


def _builds(distributions: list[str]) -> dict[str, str]:
    """Import each distribution's package so `compiled.status()` says how it runs."""
    import importlib

    for dist in distributions:
        try:
            importlib.import_module(dist.replace("-", "_"))
        except ImportError:
            continue
    return compiled.status()


# ---------------------------------------------------------------------------
# relaymq config check
# ---------------------------------------------------------------------------


@main.group("config")
def config_group() -> None:
    """Configuration tools."""


@config_group.command("check")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@define_option
@click.option("--strict", is_flag=True, help="Warnings are errors.")
@click.option("--allow-vm-only", is_flag=True,
              help="Accept a configuration that serves no network transport.")
def config_check(file: str, defines: tuple[str, ...], strict: bool, allow_vm_only: bool) -> None:
    """Load FILE and resolve every plugin it names; exit 1 listing every error."""
    from relaymq.checks import check
    from relaymq.plugins import PluginRegistry

    _quiet_logging()
    registry = PluginRegistry(strict=strict)
    result = check(file, registry, _parse_defines(defines), strict=strict,
                   allow_vm_only=allow_vm_only)
    if not result.ok:
        _print_errors(file, result.errors)
        sys.exit(1)
    config = result.config
    assert config is not None
    click.echo(f"{file}: OK")
    for line in _summary(result):
        click.echo(f"  {line}")
    if result.warnings:
        click.echo(f"{len(result.warnings)} warning(s):")
        for w in result.warnings:
            click.echo(f"  - {w}")
    for note in config.notes:
        click.echo(f"  note: {note}")


@config_group.command("init")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--yaml", "as_yaml", is_flag=True, help="Write the YAML form instead of XML.")
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
def config_init(file: str | None, as_yaml: bool, force: bool) -> None:
    """Write a commented starting configuration (the built-in default) to FILE or stdout."""
    from importlib.resources import files

    name = "relaymq.yaml" if as_yaml else "activemq.xml"
    text = files("relaymq.config").joinpath("templates", name).read_text(encoding="utf-8")
    if file is None:
        click.echo(text, nl=False)
        return
    try:
        with open(file, "w" if force else "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        _fail(ConfigError(f"{file} exists; pass --force to overwrite it"))
    except OSError as exc:
        _fail(ConfigError(f"cannot write {file}: {exc.strerror or exc}"))
    click.echo(f"wrote {file}; check it with: relaymq config check {file}", err=True)


def _summary(result: CheckResult) -> list[str]:
    config = result.config
    assert config is not None
    store = (config.persistence_adapter.tag if config.persistent and config.persistence_adapter
             else "memoryPersistenceAdapter")
    lines = [
        f"broker: {config.broker_name} (persistent={str(config.persistent).lower()}, "
        f"dataDirectory={config.data_directory})",
        f"persistence: {store}",
        "transports: " + (", ".join(f"{tc.name or '-'} {tc.uri}" for tc in result.served)
                          or "vm only"),
    ]
    if result.unavailable:
        lines.append("not available (no plugin serves them): "
                     + ", ".join(f"{tc.name or '-'} {tc.uri}" for tc in result.unavailable))
    for label, elements in (("plugins", config.plugins),
                            ("destination interceptors", config.destination_interceptors),
                            ("broker connections", config.broker_connections),
                            ("bridges", [*config.bridges, *config.jms_bridge_connectors])):
        if elements:
            lines.append(f"{label}: " + ", ".join(e.tag for e in elements))
    lines.append(f"policy entries: {len(config.policy_entries)}"
                 + (" + default" if config.default_policy else "")
                 + f"; startup destinations: {len(config.destinations)}")
    return lines


if __name__ == "__main__":  # pragma: no cover
    main()
