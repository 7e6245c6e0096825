"""``<authorizationPlugin>``: who may read, write and create which destinations.

```xml
<authorizationPlugin><map><authorizationMap>
  <authorizationEntries>
    <authorizationEntry queue="orders.>" read="consumers" write="apps" admin="admins"/>
    <authorizationEntry topic="ActiveMQ.Advisory.>" read="everyone" write="everyone" admin="everyone"/>
  </authorizationEntries>
  <tempDestinationAuthorizationEntry>
    <tempDestinationAuthorizationEntry read="users" write="users" admin="users"/>
  </tempDestinationAuthorizationEntry>
</authorizationMap></map></authorizationPlugin>
```

Actions: ``read`` (consume, browse), ``write`` (send), ``admin`` (create a
destination, including the creation a first send or subscribe causes). As in
ActiveMQ (checked against ActiveMQ 5.17 by the parity tests), the groups of
every entry whose pattern matches the destination, and of ``<defaultEntry>``,
are granted together; with no entry at all, the action is refused.
``mostSpecificWins="true"`` on ``<authorizationMap>`` (RelayMQ) makes the
matching entry with the most specific pattern decide alone instead
(`Entry.specificity`), ``<defaultEntry>`` only when none matches. Temporary destinations follow
``<tempDestinationAuthorizationEntry>`` (allowed to every authenticated client
when there is none, as in ActiveMQ). A composite destination needs the action on
every part. Decisions are cached per (principal, action, destination) and the
cache is dropped whenever users, groups or entries change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from relaymq.broker.security import Principal
from relaymq.config.model import Origin, PluginElement
from relaymq.config.report import Report, at, warn_once
from relaymq.config.typed import convert
from relaymq.errors import ConfigError
from relaymq.model.destination import Destination, name_matches

from relaymq_auth.service import SecurityService

if TYPE_CHECKING:
    from relaymq.broker.broker import Broker

log = logging.getLogger("relaymq.auth")

ACTIONS = ("read", "write", "admin")
#: a group name in an ACL that every principal is in
ANY_GROUP = "*"
_CACHE_LIMIT = 100_000


@dataclass(slots=True)
class AuthorizationEntry:
    """``<authorizationEntry>`` (and ``<tempDestinationAuthorizationEntry>``)."""

    queue: str | None = None
    topic: str | None = None
    read: str = ""
    write: str = ""
    admin: str = ""
    #: ActiveMQ's principal class of the names in read/write/admin; ``...UserPrincipal``
    #: makes them user names instead of group names
    group_class: str = "org.apache.activemq.jaas.GroupPrincipal"
    origin: Origin = field(default_factory=Origin)


class Entry:
    """One entry, ready to decide."""

    __slots__ = ("pattern", "segments", "kind", "acl", "users", "specificity", "rank", "origin")

    def __init__(self, raw: AuthorizationEntry, kind: str, pattern: str) -> None:
        self.kind = kind
        self.pattern = pattern
        self.segments = pattern.split(".")
        self.acl = {a: frozenset(g.strip() for g in getattr(raw, a).split(",") if g.strip())
                    for a in ACTIONS}
        self.users = raw.group_class.endswith("UserPrincipal")
        self.origin = raw.origin
        segments = pattern.split(".")
        literal = sum(1 for s in segments if s not in ("*", ">", "#"))
        exact = literal == len(segments)
        #: larger is more specific: an exact name, then more literal segments, then
        #: more segments (``a.*.c`` over ``a.>``)
        self.specificity = (exact, literal, len(segments))
        #: specificity, then the earlier entry in the configuration (set by the map)
        self.rank: tuple[tuple[bool, int, int], int] = (self.specificity, 0)

    def covers(self, dest: Destination) -> bool:
        if (self.kind == "queue") != dest.is_queue:
            return False
        return name_matches(self.pattern, dest.name)

    def matches(self, segments: list[str]) -> bool:
        """ActiveMQ wildcards over a name already split at '.'."""
        pat = self.segments
        for i, p in enumerate(pat):
            if p in (">", "#"):
                return True
            if i >= len(segments) or (p != "*" and p != segments[i]):
                return False
        return len(pat) == len(segments)

    def contains(self, segments: list[str]) -> bool:
        """Every name the wildcard name `segments` stands for is covered by this
        entry (``pub.>`` contains ``pub.a.>``; ``pub.*`` does not contain ``pub.>``)."""
        for i, p in enumerate(self.segments):
            if p in (">", "#"):
                return True
            if i >= len(segments):
                return False
            s = segments[i]
            if s in (">", "#") or (p != "*" and p != s):
                return False
        return len(self.segments) == len(segments)

    def intersects(self, segments: list[str]) -> bool:
        """Some name the wildcard name `segments` stands for is covered by this entry."""
        pat = self.segments
        for i in range(max(len(pat), len(segments))):
            p = pat[i] if i < len(pat) else None
            s = segments[i] if i < len(segments) else None
            if p in (">", "#") or s in (">", "#"):
                return True
            if p is None or s is None:
                return False
            if p != "*" and s != "*" and p != s:
                return False
        return True

    def allows(self, principal: Principal, action: str) -> bool:
        names = self.acl[action]
        if ANY_GROUP in names:
            return True
        if self.users:
            return principal.name in names
        return not names.isdisjoint(principal.groups)

    def describe(self) -> str:
        return f"{self.kind}={self.pattern}"


class AuthorizationMap:
    def __init__(self, entries: list[Entry], temp: Entry | None = None,
                 default: Entry | None = None, most_specific_wins: bool = False) -> None:
        self.most_specific_wins = most_specific_wins
        for i, entry in enumerate(entries):
            entry.rank = (entry.specificity, -i)
        # most specific first; equally specific entries keep their configuration order
        self.entries = sorted(entries, key=lambda e: e.rank, reverse=True)
        self.temp = temp
        self.default = default
        self._cache: dict[tuple[Principal, str, Destination], bool] = {}
        # entries by (queue?, first segment), and those starting with a wildcard, each
        # in specificity order: a lookup reads two short lists, not every entry
        self._by_first: dict[tuple[bool, str], list[Entry]] = {}
        self._wild_first: dict[bool, list[Entry]] = {True: [], False: []}
        for entry in self.entries:
            queue = entry.kind == "queue"
            first = entry.segments[0]
            if first in ("*", ">", "#"):
                self._wild_first[queue].append(entry)
            else:
                self._by_first.setdefault((queue, first), []).append(entry)

    def matching(self, dest: Destination) -> list[Entry]:
        """Every entry covering `dest` (ActiveMQ grants their groups together)."""
        segments = dest.name.split(".")
        return [entry
                for candidates in (self._by_first.get((dest.is_queue, segments[0]), ()),
                                   self._wild_first[dest.is_queue])
                for entry in candidates if entry.matches(segments)]

    def entry_for(self, dest: Destination) -> Entry | None:
        """The most specific entry covering `dest`, else ``<defaultEntry>``."""
        segments = dest.name.split(".")
        best: Entry | None = None
        for candidates in (self._by_first.get((dest.is_queue, segments[0]), ()),
                           self._wild_first[dest.is_queue]):
            for entry in candidates:
                if entry.matches(segments):
                    if best is None or entry.rank > best.rank:
                        best = entry
                    break  # the rest of this list is no more specific
        return best if best is not None else self.default

    def allowed(self, principal: Principal, action: str, dest: Destination) -> bool:
        key = (principal, action, dest)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if dest.is_composite:
            verdict = all(self.allowed(principal, action, part) for part in dest.composite_parts())
        elif dest.is_temporary:
            verdict = self.temp is None or self.temp.allows(principal, action)
        elif dest.is_wildcard:
            verdict = self._allowed_on_every_match(principal, action, dest)
        elif self.most_specific_wins:
            entry = self.entry_for(dest)
            verdict = entry is not None and entry.allows(principal, action)
        else:
            entries = self.matching(dest)
            if self.default is not None:
                entries.append(self.default)
            verdict = any(entry.allows(principal, action) for entry in entries)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = verdict
        return verdict

    def _allowed_on_every_match(self, principal: Principal, action: str,
                                dest: Destination) -> bool:
        """A wildcard destination (a send to ``pub.>`` reaches every queue it
        matches, a consumer of it reads them all) is allowed only when every name it
        stands for would be: its wildcards are not literal names an entry's ``*``
        matches. Decided on the entries, not on the destinations that exist now, and
        on the safe side: a name covered only by several allowing entries together
        is not enough, one of them must contain the whole wildcard."""
        segments = dest.name.split(".")
        same = [e for e in self.entries if (e.kind == "queue") == dest.is_queue]
        default = self.default
        if self.most_specific_wins:
            # each name is decided by the most specific entry covering it. The most
            # specific entry containing the whole wildcard covers every name, so
            # entries less specific than it decide none; it and every more specific
            # entry covering some of the names must allow. Without such an entry a
            # name may fall to the default, which must allow too.
            touching = [e for e in same if e.intersects(segments)]
            containing = [e for e in touching if e.contains(segments)]
            floor = max(containing, key=lambda e: e.rank) if containing else None
            deciding = [e for e in touching if floor is None or e.rank >= floor.rank]
            if not all(e.allows(principal, action) for e in deciding):
                return False
            return floor is not None or (default is not None and default.allows(principal, action))
        if default is not None and default.allows(principal, action):
            return True
        return any(e.contains(segments) and e.allows(principal, action) for e in same)

    def forget(self) -> None:
        self._cache.clear()


def _entry(raw: AuthorizationEntry, report: Report, temp: bool = False) -> Entry | None:
    where = at(raw.origin)
    if temp:
        return Entry(raw, "temp", ">")
    if bool(raw.queue) == bool(raw.topic):
        report.error(f"<authorizationEntry>{where} needs exactly one of queue=\"...\" or "
                     "topic=\"...\"")
        return None
    kind, pattern = ("queue", raw.queue) if raw.queue else ("topic", raw.topic)
    assert pattern is not None
    if "," in pattern:
        report.error(f"<authorizationEntry {kind}=\"{pattern}\">{where}: one pattern per entry")
        return None
    return Entry(raw, kind, pattern)


#: what an <authorizationEntry> (or temp/default entry) may say
ENTRY_ATTRIBUTES = ("queue", "topic", "read", "write", "admin", "groupClass")


def _close(attr: str, known: tuple[str, ...]) -> str:
    import difflib

    found = difflib.get_close_matches(attr, known, n=1, cutoff=0.7)
    return f" (did you mean '{found[0]}'?)" if found else ""


def parse_authorization(element: PluginElement, *, strict: bool = False) -> tuple[AuthorizationMap, list[str]]:
    report = Report(strict=strict, quiet=True)  # returned: the caller reports them
    for attr in element.attributes:
        report.warn(f"<authorizationPlugin>{at(element.origin)}: attribute '{attr}' is ignored")
    maps: list[PluginElement] = []
    for child in element.children:
        if child.tag == "map":
            for inner in child.children:
                if inner.tag == "authorizationMap":
                    maps.append(inner)
                else:
                    report.error(
                        f"<{inner.tag}>{at(inner.origin)}: RelayMQ supports <authorizationMap> "
                        "inside <map> (not LDAP-backed maps)")
        elif child.tag == "authorizationMap":
            maps.append(child)
        else:
            report.warn(f"<{child.tag}>{at(child.origin)} inside <authorizationPlugin> is "
                        "ignored: expected <map>")
    if len(maps) != 1:
        report.error(f"<authorizationPlugin>{at(element.origin)} needs one <map><authorizationMap>"
                     f", found {len(maps)}")
        report.raise_if_errors()
    amap = maps[0]
    group_class = amap.attributes.get("groupClass")
    most_specific = amap.attributes.get("mostSpecificWins", "false").strip().lower()
    if most_specific not in ("true", "false"):
        report.error(f"<authorizationMap mostSpecificWins=\"{most_specific}\">"
                     f"{at(amap.origin)}: expected true or false")
    # an authorization setting that is not applied could grant more than meant
    # (`mostSpecificWin="true"` left the map on the rule that grants every match):
    # refused, not ignored
    for attr in amap.attributes:
        if attr not in ("groupClass", "mostSpecificWins"):
            report.error(f"<authorizationMap>{at(amap.origin)}: '{attr}' is not an attribute of "
                         f"it{_close(attr, ('groupClass', 'mostSpecificWins'))}; an "
                         "authorization setting that would not apply is refused")

    def raw(el: PluginElement) -> AuthorizationEntry:
        for attr in el.attributes:
            if attr not in ENTRY_ATTRIBUTES:
                report.error(f"<{el.tag}>{at(el.origin)}: '{attr}' is not an attribute of "
                             f"it{_close(attr, ENTRY_ATTRIBUTES)}; an authorization setting "
                             "that would not apply is refused")
        entry = convert(AuthorizationEntry, el, report=report)
        if group_class and "groupClass" not in el.attributes:
            entry.group_class = group_class
        return entry

    entries: list[Entry] = []
    temp: Entry | None = None
    default: Entry | None = None
    for child in amap.children:
        try:
            if child.tag == "authorizationEntries":
                for el in child.children:
                    if el.tag != "authorizationEntry":
                        report.warn(f"<{el.tag}>{at(el.origin)} inside <authorizationEntries> is "
                                    "ignored: expected <authorizationEntry>")
                        continue
                    built = _entry(raw(el), report)
                    if built is not None:
                        entries.append(built)
            elif child.tag in ("tempDestinationAuthorizationEntry", "defaultEntry"):
                inner = child.children[0] if child.children else child
                built = _entry(raw(inner), report, temp=child.tag != "defaultEntry") \
                    if child.tag != "defaultEntry" else Entry(raw(inner), "any", ">")
                if child.tag == "defaultEntry":
                    default = built
                else:
                    temp = built
            else:
                report.warn(f"<{child.tag}>{at(child.origin)} inside <authorizationMap> is "
                            "ignored")
        except ConfigError as exc:
            report.absorb(exc)
    report.raise_if_errors()
    return AuthorizationMap(entries, temp, default, most_specific == "true"), report.warnings


class AuthorizationPlugin:
    tag = "authorizationPlugin"

    def __init__(self, amap: AuthorizationMap, origin: Origin | None = None) -> None:
        self.map = amap
        self.origin = origin or Origin()

    @classmethod
    def from_element(cls, element: PluginElement, broker: Broker) -> AuthorizationPlugin:
        amap, warnings = parse_authorization(element, strict=bool(getattr(broker, "strict", False)))
        for warning in warnings:
            warn_once(log, warning)
        return cls(amap, element.origin)

    @classmethod
    def validate_element(cls, element: PluginElement, strict: bool = False) -> list[str]:
        return parse_authorization(element, strict=strict)[1]

    def install(self, broker: Broker) -> None:
        SecurityService.of(broker).set_authorization(self.map, self.origin, self)

    def reload(self, element: PluginElement, service: SecurityService) -> None:
        """New entries from a re-read configuration (SIGHUP)."""
        amap, warnings = parse_authorization(element)
        for warning in warnings:
            warn_once(log, warning)
        self.map = service.authorization = amap
