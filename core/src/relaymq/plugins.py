"""Plugin discovery (stevedore) and hook composition (pluggy): `PluginRegistry`.

Config element names are entry-point names. The parent element selects the
entry-point group (``<persistenceAdapter><kahaDB>`` -> ``relaymq.persistence``,
``kahaDB``), and the registry resolves, imports and builds exactly the entry
points the configuration names: installed is not enabled.

Strict where safety is at stake, always:

* a name no installed distribution provides -> `PluginNotFound`, naming the
  file:line, the element, what *is* installed in that group and the
  ``pip install relaymq-...`` that provides it;
* an entry point that fails to import or build -> `PluginLoadError`, with the
  original exception chained;
* two distributions claiming one name in one group -> `PluginConflict` naming
  both ("last one wins" is how a security plugin silently disappears).

Why stevedore *and* importlib.metadata: stevedore lists and loads entry points
(through its cross-process cache, and loading only the names asked for), but its
cache drops which distribution an entry point came from. The registry needs that
to name both sides of a conflict and to show versions in ``plugins list``, so it
attributes each entry point to its distribution with importlib.metadata.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import inspect
import logging
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pluggy
from stevedore.named import NamedExtensionManager

from relaymq import hookspecs
from relaymq.config.model import Origin, PluginElement
from relaymq.config.report import Report, at
from relaymq.config.typed import convert, suggest
from relaymq.errors import (
    ConfigError,
    PluginConflict,
    PluginHookError,
    PluginLoadError,
    PluginNotFound,
)

if TYPE_CHECKING:
    from relaymq.config.model import BrokerConfig

log = logging.getLogger("relaymq.plugins")

PERSISTENCE = "relaymq.persistence"
TRANSPORTS = "relaymq.transports"
BROKER_PLUGINS = "relaymq.broker_plugins"
DESTINATION_INTERCEPTORS = "relaymq.destination_interceptors"
BROKER_CONNECTIONS = "relaymq.broker_connections"
CONNECTION_OPERATIONS = "relaymq.connection_operations"
QUEUE_TYPES = "relaymq.queue_types"
HOOKS = "relaymq.hooks"
CLI = "relaymq.cli"
OUTGOING = "relaymq.outgoing"
BRIDGES = "relaymq.bridges"
AMQP_LINK_HANDLERS = "relaymq.amqp_link_handlers"

#: Entry-point group -> what an entry point in it is (for messages).
GROUPS: dict[str, str] = {
    PERSISTENCE: "a persistence adapter",
    TRANSPORTS: "a transport",
    BROKER_PLUGINS: "a broker plugin",
    DESTINATION_INTERCEPTORS: "a destination interceptor",
    BROKER_CONNECTIONS: "a broker connection",
    CONNECTION_OPERATIONS: "a broker connection operation",
    QUEUE_TYPES: "a queue type",
    HOOKS: "a hook implementation",
    CLI: "a command-line command",
    OUTGOING: "an outgoing-connection provider",
    BRIDGES: "a bridge",
    AMQP_LINK_HANDLERS: "an AMQP link handler",
}
#: Groups whose entry points the configuration enables by name.
SLOT_GROUPS = (PERSISTENCE, TRANSPORTS, BROKER_PLUGINS, DESTINATION_INTERCEPTORS,
               BROKER_CONNECTIONS, CONNECTION_OPERATIONS, QUEUE_TYPES, BRIDGES)

_AMQP = ("relaymq-amqp",)
_STOMP = ("relaymq-stomp",)
_AUTH = ("relaymq-auth",)
_MIRROR = ("relaymq-mirror", "relaymq-federation")

#: First-party names -> the distribution(s) that provide them (install hints).
FIRST_PARTY: dict[str, dict[str, tuple[str, ...]]] = {
    PERSISTENCE: {
        "memoryPersistenceAdapter": ("relaymq",),
        "kahaDB": ("relaymq-kahadb",),
        "jdbcPersistenceAdapter": ("relaymq-jdbc",),
    },
    TRANSPORTS: {
        "vm": ("relaymq",),
        **{s: _AMQP for s in ("amqp", "amqps", "amqp+ssl", "amqp+nio", "amqp+nio+ssl")},
        **{s: _STOMP for s in ("stomp", "stomp+nio", "stomp+ssl", "stomp+nio+ssl")},
    },
    BROKER_PLUGINS: {
        "redeliveryPlugin": ("relaymq",),
        "virtualSelectorCacheBrokerPlugin": ("relaymq-selector-cache",),
        "simpleAuthenticationPlugin": _AUTH,
        "jaasAuthenticationPlugin": _AUTH,
        "jaasCertificateAuthenticationPlugin": _AUTH,
        "jaasDualAuthenticationPlugin": _AUTH,
        "authorizationPlugin": _AUTH,
        "statisticsBrokerPlugin": ("relaymq-console",),
        "console": ("relaymq-console",),
    },
    DESTINATION_INTERCEPTORS: {
        "virtualDestinationInterceptor": ("relaymq-virtual-topic",),
        "mirroredQueue": ("relaymq-virtual-topic",),
    },
    BROKER_CONNECTIONS: {"amqp-connection": _AMQP},
    QUEUE_TYPES: {"standard": ("relaymq",),
                  **{t: ("relaymq-queue-types",)
                     for t in ("solace", "partitioned", "lastValue", "anonymous")}},
    BRIDGES: {n: ("relaymq-bridge",) for n in ("bridge", "jmsQueueConnector", "jmsTopicConnector")},
    OUTGOING: {
        **{s: _AMQP for s in ("amqp", "amqps", "amqp+ssl", "tcp", "ssl")},
        **{s: _STOMP for s in ("stomp", "stomp+ssl", "stomp+nio", "stomp+nio+ssl", "stomp+tls")},
    },
    CONNECTION_OPERATIONS: {
        "mirror": ("relaymq-mirror",),
        "federation": ("relaymq-federation",),
        "sender": _MIRROR,
        "receiver": _MIRROR,
        "peer": _MIRROR,
    },
}

#: ActiveMQ names RelayMQ does not provide, with what to do instead.
NOT_PROVIDED: dict[str, dict[str, str]] = {
    PERSISTENCE: {
        "levelDB": "ActiveMQ removed LevelDB; use <kahaDB> (pip install relaymq-kahadb)",
        "replicatedLevelDB": "ActiveMQ removed LevelDB; use <kahaDB> or <jdbcPersistenceAdapter>",
        "mKahaDB": "multi-KahaDB is not available; use one <kahaDB> (pip install relaymq-kahadb)",
    },
    TRANSPORTS: {
        **{s: "RelayMQ does not speak OpenWire; point clients at amqp:// (relaymq-amqp) or "
              "stomp:// (relaymq-stomp)" for s in ("tcp", "nio", "ssl", "nio+ssl", "auto",
                                                   "auto+nio", "auto+ssl", "auto+nio+ssl")},
        **{s: "MQTT is not available yet" for s in ("mqtt", "mqtt+nio", "mqtt+ssl", "mqtt+nio+ssl")},
        **{s: "WebSocket and HTTP transports are not available yet"
           for s in ("ws", "wss", "http", "https")},
    },
}


# ---------------------------------------------------------------------------
# Inventory
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EntryPointInfo:
    """One entry point and the distribution that declares it."""

    group: str
    name: str
    value: str
    dist: str
    version: str

    def describe(self) -> str:
        return f"{self.dist} {self.version} ({self.value})"


@dataclass(slots=True)
class DistributionInfo:
    """What one installed distribution provides, for ``relaymq plugins list``."""

    name: str
    version: str
    provides: dict[str, list[str]] = field(default_factory=dict)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_Attribution = dict[tuple[str, str, str], list[tuple[str, str]]]
_attribution_cache: dict[tuple[str, ...], _Attribution] = {}


def _attribution() -> _Attribution:
    """(group, name, value) -> [(distribution, version)], first on sys.path first.

    Cached per ``sys.path`` (as stevedore caches its listing): scanning every
    installed distribution's metadata costs tens of milliseconds, and tests
    start hundreds of brokers.
    """
    key = tuple(sys.path)
    if key not in _attribution_cache:
        _attribution_cache[key] = _scan_distributions()
    return _attribution_cache[key]


def _scan_distributions() -> _Attribution:
    table: _Attribution = {}
    seen: set[str] = set()
    for dist in importlib.metadata.distributions():
        dist_name = dist.metadata["Name"] or "unknown"
        if _canonical(dist_name) in seen:
            continue  # the same distribution further down sys.path is never imported
        seen.add(_canonical(dist_name))
        for ep in dist.entry_points:
            if ep.group.startswith("relaymq."):
                key = (ep.group, ep.name, ep.value)
                table.setdefault(key, []).append((dist_name, dist.version))
    return table


def install_hint(group: str, name: str) -> str | None:
    """``'pip install relaymq-kahadb'`` for a first-party name, else None."""
    dists = FIRST_PARTY.get(group, {}).get(name)
    if not dists:
        return None
    hint = f"pip install {dists[0]}"
    if len(dists) > 1:
        hint += " (or " + ", ".join(dists[1:]) + ")"
    return hint


def _raise_load_failure(manager: Any, ep: importlib.metadata.EntryPoint,
                        exc: BaseException) -> None:
    """stevedore's on_load_failure_callback: never log-and-continue."""
    raise _LoadFailed(ep, exc) from exc


class _LoadFailed(Exception):
    def __init__(self, ep: importlib.metadata.EntryPoint, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.ep = ep
        self.exc = exc


# ---------------------------------------------------------------------------
# The registry
# ---------------------------------------------------------------------------


class PluginRegistry:
    """Resolves configured element names to entry points and owns the pluggy manager.

    :param strict: plugin ``Config`` conversion treats unknown attributes and
        children as errors (``relaymq run --strict``). Missing, broken and
        conflicting plugins are errors either way.
    """

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self._pm: pluggy.PluginManager | None = None
        self._inventory: dict[str, dict[str, list[EntryPointInfo]]] = {}
        self._attribution: _Attribution | None = None
        self._loaded: dict[tuple[str, str], Any] = {}
        self._described: dict[str, str] = {}
        #: (group, name, origin) of every element built, in build order
        self.built: list[tuple[str, str, Origin]] = []

    # -- pluggy --------------------------------------------------------------

    @property
    def pm(self) -> pluggy.PluginManager:
        """The broker's ``pluggy.PluginManager("relaymq")``, with every hook spec and
        every ``relaymq.hooks`` entry point registered (hooks observe; they are
        always on). Created on first use so ``plugins list`` imports no plugin."""
        if self._pm is None:
            pm = pluggy.PluginManager("relaymq")
            pm.add_hookspecs(hookspecs)
            self._pm = pm
            pm.hook.relaymq_addhooks.call_historic(kwargs={"pluginmanager": pm})
            for info in self._entries(HOOKS):
                obj = self._load(HOOKS, info.name, None)
                self.register(obj, name=f"{HOOKS}:{info.name}", description=info.describe())
        return self._pm

    def register(self, obj: Any, name: str | None = None, *, description: str | None = None) -> str:
        """Register hook implementations (pluggy ``register``); idempotent.

        :raises PluginHookError: a hookimpl whose arguments its spec does not have.
        """
        pm = self.pm
        if pm.is_registered(obj):
            return pm.get_name(obj) or ""
        try:
            registered = pm.register(obj, name=name)
        except pluggy.PluginValidationError as exc:
            what = description or _describe_object(obj)
            raise PluginHookError(f"{what} has an invalid hook implementation: {exc}") from exc
        plugin_name = registered or pm.get_name(obj) or ""
        self._described[plugin_name] = description or _describe_object(obj)
        return plugin_name

    def check(self) -> None:
        """Fail on hook implementations no spec declares (a misspelt hook name).

        :raises PluginHookError: naming the plugin, the bad hook and the closest spec.
        """
        pm = self.pm
        specs = [n for n in vars(pm.hook) if not n.startswith("_") and getattr(pm.hook, n).has_spec()]
        for name in list(vars(pm.hook)):
            if name.startswith("_"):
                continue
            caller = getattr(pm.hook, name)
            if caller.has_spec():
                continue
            for impl in caller.get_hookimpls():
                if impl.optionalhook:
                    continue
                what = self._described.get(impl.plugin_name) or _describe_object(impl.plugin)
                raise PluginHookError(
                    f"{what} implements '{name}', which is not a RelayMQ hook"
                    f"{suggest(name, specs) or '; see docs/hooks.md for the hook names'}"
                )

    # -- discovery -----------------------------------------------------------

    def _entries(self, group: str) -> list[EntryPointInfo]:
        return [info for infos in self._group(group).values() for info in infos]

    def _group(self, group: str) -> dict[str, list[EntryPointInfo]]:
        if group not in self._inventory:
            if self._attribution is None:
                self._attribution = _attribution()
            listing: NamedExtensionManager[Any] = NamedExtensionManager(
                group, names=[], on_missing_entrypoints_callback=None)
            by_name: dict[str, list[EntryPointInfo]] = {}
            for ep in listing.list_entry_points():
                dists = self._attribution.get((group, ep.name, ep.value)) or [("unknown", "?")]
                for dist, version in dists:
                    by_name.setdefault(ep.name, []).append(
                        EntryPointInfo(group, ep.name, ep.value, dist, version))
            self._inventory[group] = by_name
        return self._inventory[group]

    def names(self, group: str) -> list[str]:
        """Every name installed in ``group`` (nothing is imported)."""
        return sorted(self._group(group))

    def entry_points(self, group: str, name: str) -> list[EntryPointInfo]:
        """Who provides ``name`` in ``group`` (more than one is a conflict)."""
        return list(self._group(group).get(name, []))

    def distributions(self) -> list[DistributionInfo]:
        """Installed distributions providing RelayMQ entry points, with versions."""
        dists: dict[str, DistributionInfo] = {}
        for group in GROUPS:
            for info in self._entries(group):
                d = dists.setdefault(info.dist, DistributionInfo(info.dist, info.version))
                d.provides.setdefault(group, []).append(info.name)
        for d in dists.values():
            for names in d.provides.values():
                names.sort()
        return sorted(dists.values(), key=lambda d: (d.name != "relaymq", d.name))

    def conflicts(self) -> dict[tuple[str, str], list[EntryPointInfo]]:
        """Every (group, name) claimed by more than one distribution."""
        out = {}
        for group in GROUPS:
            for name, infos in self._group(group).items():
                if len({i.dist for i in infos}) > 1 or len(infos) > 1:
                    out[(group, name)] = infos
        return out

    # -- resolution ----------------------------------------------------------

    def not_found_message(self, group: str, name: str, origin: Origin | None = None) -> str:
        """The `PluginNotFound` text: what was asked, what exists, what to do."""
        noun = GROUPS.get(group, group)
        element = (f"'{name}://'" if group == TRANSPORTS else f'queueType="{name}"'
                   if group == QUEUE_TYPES else f"<{name}>")
        installed = ", ".join(self.names(group)) or "nothing"
        return (f"{element}{at(origin)} needs {noun} named '{name}'; installed: {installed}; "
                + self.advice(group, name))

    def advice(self, group: str, name: str) -> str:
        """What to do about a missing name: the pip install, or why there is none."""
        hint = install_hint(group, name)
        if hint:
            return f"install it with {hint}"
        reason = NOT_PROVIDED.get(group, {}).get(name)
        if reason:
            return reason
        what = "change queueType" if group == QUEUE_TYPES else "remove the element"
        return (f"no first-party RelayMQ plugin provides it{suggest(name, self.names(group))} "
                f"(a third-party plugin would declare it in the entry-point group {group}); "
                f"{what} or install a plugin that provides it")

    def resolve(self, group: str, name: str, origin: Origin | None = None) -> Any:
        """The loaded object of entry point ``name`` in ``group``.

        :raises PluginNotFound: nothing installed provides it (with an install hint).
        :raises PluginConflict: two distributions provide it.
        :raises PluginLoadError: importing it failed (the cause is chained).
        """
        if group not in GROUPS:
            raise ValueError(f"unknown entry-point group {group!r}; known: {', '.join(GROUPS)}")
        if (group, name) in self._loaded:
            return self._loaded[(group, name)]
        infos = self._group(group).get(name)
        if not infos:
            raise PluginNotFound(self.not_found_message(group, name, origin))
        if len(infos) > 1:
            claims = " and ".join(i.describe() for i in infos)
            dists = [i.dist for i in infos]
            raise PluginConflict(
                f"<{name}>{at(origin)}: '{name}' in {group} is claimed by {claims}; RelayMQ "
                f"will not pick one. Uninstall one of them (pip uninstall {dists[-1]})"
            )
        return self._load(group, name, origin)

    def _load(self, group: str, name: str, origin: Origin | None) -> Any:
        if (group, name) in self._loaded:
            return self._loaded[(group, name)]
        info = self._group(group)[name][0]
        try:
            manager: NamedExtensionManager[Any] = NamedExtensionManager(
                group, names=[name], on_load_failure_callback=_raise_load_failure,
                on_missing_entrypoints_callback=None,
            )
        except _LoadFailed as failed:
            raise PluginLoadError(
                f"<{name}>{at(origin)}: {GROUPS[group]} from {info.describe()} failed to import: "
                f"{type(failed.exc).__name__}: {failed.exc}; reinstall {info.dist} or install "
                "what it is missing"
            ) from failed.exc
        if not manager.extensions:  # pragma: no cover - stevedore and metadata disagree
            raise PluginNotFound(self.not_found_message(group, name, origin))
        obj = manager.extensions[0].plugin
        self._loaded[(group, name)] = obj
        log.debug("loaded %s %s from %s", group, name, info.describe())
        return obj

    def transport_factory(self, scheme: str) -> Any | None:
        """The factory serving ``scheme://``, or None when no plugin provides it.

        The broker decides what a missing transport means (a warning, or an error
        under ``--strict``); `not_found_message` words it. A broken or conflicting
        transport still raises.
        """
        if not self._group(TRANSPORTS).get(scheme):
            return None
        return self.resolve(TRANSPORTS, scheme)

    def build(self, group: str, element: PluginElement, broker: Any) -> Any:
        """Resolve ``element.tag`` in ``group`` and construct it (see `relaymq.spi.plugin`).

        ``from_element(element, broker)`` if the class has it; else ``cls(config)``
        with its ``Config`` dataclass converted from the attributes; else ``cls()``.
        The result's hook implementations, if any, are registered.
        """
        obj = self.resolve(group, element.tag, element.origin)
        info = self._group(group)[element.tag][0]
        where = at(element.origin)
        try:
            if hasattr(obj, "from_element"):
                instance = obj.from_element(element, broker)
            elif dataclasses.is_dataclass(getattr(obj, "Config", None)):
                instance = obj(convert(obj.Config, element, strict=self.strict))
            else:
                if element.attributes or element.children:
                    msg = (f"<{element.tag}>{where}: {info.describe()} takes no configuration; "
                           "its attributes and children are ignored")
                    if self.strict:
                        raise ConfigError(msg + " (an error because of --strict)")
                    log.warning("%s", msg)
                instance = obj()
        except ConfigError:
            raise
        except Exception as exc:
            raise PluginLoadError(
                f"<{element.tag}>{where}: building {GROUPS[group]} from {info.describe()} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if _has_hookimpls(instance):
            self.register(instance, description=f"<{element.tag}>{where} from {info.describe()}")
        self.built.append((group, element.tag, element.origin))
        return instance

    # -- whole configurations --------------------------------------------------

    def validate(self, config: BrokerConfig) -> list[str]:
        """Resolve every plugin the config names and convert plugin ``Config``s,
        without constructing anything (``relaymq config check``).

        :returns: warnings: attributes a plugin ignores, transports no plugin serves
            (under ``strict`` both are errors).
        :raises ConfigError: listing every missing, broken or conflicting plugin and
            every bad plugin attribute.
        """
        errors: list[str] = []
        warnings: list[str] = []
        for group, element in plugin_elements(config):
            report = Report(strict=self.strict, quiet=True)
            try:
                obj = self.resolve(group, element.tag, element.origin)
                check = getattr(obj, "validate_element", None)
                if check is not None:
                    # a check that takes `config` sees the whole configuration (what
                    # other elements provide), as the plugin does once installed
                    more = ({"config": config}
                            if "config" in inspect.signature(check).parameters else {})
                    warnings.extend(check(element, strict=self.strict, **more) or ())
                elif not hasattr(obj, "from_element") and dataclasses.is_dataclass(
                        getattr(obj, "Config", None)):
                    convert(obj.Config, element, strict=self.strict, report=report)
            except ConfigError as exc:
                errors.extend(exc.errors or [str(exc)])
            errors.extend(report.errors)
            warnings.extend(report.warnings)
        for name, origin in config.queue_type_uses():
            try:
                self.resolve(QUEUE_TYPES, name, origin)
            except ConfigError as exc:
                errors.extend(exc.errors or [str(exc)])
        for tc in config.transport_connectors:
            scheme = tc.uri.split(":", 1)[0]
            try:
                if self.transport_factory(scheme) is None:
                    msg = (f"<transportConnector uri=\"{tc.uri}\">{at(tc.origin)} will be skipped: "
                           f"no installed transport serves '{scheme}://'; "
                           + self.advice(TRANSPORTS, scheme))
                    (errors if self.strict else warnings).append(msg)
            except ConfigError as exc:
                errors.extend(exc.errors or [str(exc)])
        if errors:
            raise ConfigError("\n".join(errors), errors)
        return warnings


def plugin_elements(config: BrokerConfig) -> Iterable[tuple[str, PluginElement]]:
    """(group, element) for every plugin element the config names, in start-up order."""
    if config.persistent and config.persistence_adapter is not None:
        yield PERSISTENCE, config.persistence_adapter
    for el in config.plugins:
        yield BROKER_PLUGINS, el
    for el in config.destination_interceptors:
        yield DESTINATION_INTERCEPTORS, el
    for el in config.broker_connections:
        yield BROKER_CONNECTIONS, el
        for op in el.children:
            yield CONNECTION_OPERATIONS, op
    for el in (*config.bridges, *config.jms_bridge_connectors):
        yield BRIDGES, el


def enabled_names(config: BrokerConfig) -> dict[str, list[str]]:
    """Group -> the entry-point names ``config`` enables (for ``plugins list``)."""
    out: dict[str, list[str]] = {}
    for group, element in plugin_elements(config):
        out.setdefault(group, []).append(element.tag)
    if not (config.persistent and config.persistence_adapter is not None):
        out.setdefault(PERSISTENCE, []).append("memoryPersistenceAdapter")
    for tc in config.transport_connectors:
        out.setdefault(TRANSPORTS, []).append(tc.uri.split(":", 1)[0])
    out.setdefault(TRANSPORTS, []).append("vm")
    out[QUEUE_TYPES] = list(dict.fromkeys(["standard", *(n for n, _ in config.queue_type_uses())]))
    return out


def _has_hookimpls(obj: Any) -> bool:
    return any(
        hasattr(getattr(type(obj), name, None), "relaymq_impl")
        for name in dir(type(obj)) if name.startswith("relaymq_")
    )


def _describe_object(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or type(obj).__module__
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    if isinstance(obj, type(importlib)):
        return f"plugin module {obj.__name__}"
    return f"plugin {module}.{name}"
