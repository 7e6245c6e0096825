"""The ``<mirror>`` element (Artemis' attribute names and defaults)."""

from __future__ import annotations

from dataclasses import dataclass, field

from relaymq.config.model import Origin, PluginElement
from relaymq.config.report import Report, at
from relaymq.config.typed import convert

#: characters other brokers' address filters read as wildcards: here a prefix is literal
_WILDCARDS = ("*", ">", "#")


@dataclass
class MirrorConfig:
    """``<mirror message-acknowledgements queue-creation queue-removal durable sync address-filter window batch>``."""

    message_acknowledgements: bool = True
    queue_creation: bool = True
    queue_removal: bool = True
    durable: bool = True
    sync: bool = False
    address_filter: str | None = None
    #: events sent and not yet accepted by the target (the link's window)
    window: int = 5000
    #: to a RelayMQ target, the events of a run go in one transfer (a RelayMQ
    #: extension; an Artemis target gets them one by one regardless)
    batch: bool = True
    origin: Origin | None = None


@dataclass(frozen=True)
class AddressFilter:
    """Artemis' ``address-filter``: a comma list of prefixes; ``!prefix`` excludes,
    and an exclusion wins. Without includes, everything not excluded matches.
    No wildcards."""

    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, text: str | None) -> AddressFilter:
        inc: list[str] = []
        exc: list[str] = []
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            if item.startswith("!"):
                if item[1:]:
                    exc.append(item[1:])
            else:
                inc.append(item)
        return cls(tuple(inc), tuple(exc))

    def matches(self, address: str) -> bool:
        for prefix in self.excludes:
            if address.startswith(prefix):
                return False
        if not self.includes:
            return True
        return any(address.startswith(prefix) for prefix in self.includes)


def mirror_config(element: PluginElement, strict: bool = False,
                  report: Report | None = None) -> MirrorConfig:
    """`<mirror>` converted and checked; errors raise `ConfigError` (or go to `report`)."""
    own = report if report is not None else Report(strict=strict)
    config = convert(MirrorConfig, element, strict=strict, report=own,
                     ignore=[c.tag for c in element.children])
    where = at(element.origin)
    if config.window < 1:
        own.error(f"<mirror window=\"{config.window}\">{where}: the window is the number of "
                  "events sent and not yet accepted; it must be at least 1")
    for item in (config.address_filter or "").split(","):
        prefix = item.strip().lstrip("!")
        if any(w in prefix for w in _WILDCARDS):
            own.warn(f"<mirror address-filter=\"{config.address_filter}\">{where}: '{prefix}' is "
                     "matched as a literal prefix: an address filter has no wildcards (as Artemis)")
    if report is None:
        own.raise_if_errors()
    return config
