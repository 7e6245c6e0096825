"""One validation of a configuration, shared by ``relaymq run`` and ``relaymq config check``.

Both commands load the file, resolve every plugin it names, convert every plugin's
attributes and look at what would be served, through `check()`: the same errors
(all of them, not the first), the same warnings and the same wording. `run` stops
on errors before anything starts; `config check` lists them and exits 1.

A configuration that starts a broker no network client can reach (no connector a
plugin serves, only ``vm://``) is an error, because it is what the stock ActiveMQ
file gives without ``relaymq-amqp``/``relaymq-stomp``: an idle broker that looks
healthy. ``--allow-vm-only`` accepts it for embedded use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from relaymq.config.defaults import default_config
from relaymq.config.loader import load_config
from relaymq.config.model import BrokerConfig, TransportConnectorConfig
from relaymq.config.report import at, collecting
from relaymq.errors import ConfigError
from relaymq.plugins import TRANSPORTS, PluginRegistry


@dataclass
class CheckResult:
    """What a configuration would do, and what is wrong with it."""

    source: str
    config: BrokerConfig | None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    served: list[TransportConnectorConfig] = field(default_factory=list)
    unavailable: list[TransportConnectorConfig] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def check(path: str | None, registry: PluginRegistry, properties: Mapping[str, str],
          *, strict: bool = False, allow_vm_only: bool = False,
          host: str = "127.0.0.1") -> CheckResult:
    """Load `path` (or the built-in default, listening on `host`) and validate it whole;
    nothing is logged meanwhile: the result holds every warning, for the caller."""
    with collecting():
        return _check(path, registry, properties, strict, allow_vm_only, host)


def _check(path: str | None, registry: PluginRegistry, properties: Mapping[str, str],
           strict: bool, allow_vm_only: bool, host: str) -> CheckResult:
    config: BrokerConfig | None
    errors: list[str] = []
    source = path or "<default config>"
    try:
        config = (load_config(path, dict(properties), strict) if path
                  else default_config(registry, properties, host=host))
    except ConfigError as exc:
        errors = exc.errors or [str(exc)]
        config = getattr(exc, "partial_config", None)
    result = CheckResult(source, config, errors)
    if config is None:
        return result
    result.warnings.extend(config.warnings)
    try:
        result.warnings.extend(registry.validate(config))
    except ConfigError as exc:
        result.errors.extend(exc.errors or [str(exc)])
    served_schemes = set(registry.names(TRANSPORTS))
    for tc in config.transport_connectors:
        scheme = tc.uri.split(":", 1)[0]
        (result.served if scheme in served_schemes and scheme != "vm"
         else result.unavailable).append(tc)
    if not result.served and not allow_vm_only:
        result.errors.append(_vm_only(config, result.unavailable, registry))
    return result


def _vm_only(config: BrokerConfig, unavailable: list[TransportConnectorConfig],
             registry: PluginRegistry) -> str:
    network = [s for s in registry.names(TRANSPORTS) if s != "vm" and "+" not in s]
    if network:
        fix = ("point a connector at a scheme that is installed ("
               + ", ".join(f"{s}://" for s in sorted(network)) + ")")
    else:
        fix = "pip install relaymq-amqp and/or relaymq-stomp"
    if unavailable:
        listed = ", ".join(f'"{tc.uri}"{at(tc.origin)}' for tc in unavailable)
        why = f"no installed transport serves its connectors ({listed}); {fix}"
    else:
        why = ("it has no <transportConnectors>; add <transportConnector name=\"amqp\" "
               "uri=\"amqp://127.0.0.1:5672\"/> (relaymq-amqp) or a stomp:// one (relaymq-stomp)")
    return (f"{config.source}: this broker would serve only vm:// (in-process clients), so no "
            f"network client could connect: {why}; pass --allow-vm-only if that is intended")
