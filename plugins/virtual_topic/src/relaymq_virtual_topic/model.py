"""What a ``<virtualDestinationInterceptor>`` element says, typed and validated.

The element tree is ActiveMQ's::

    <virtualDestinationInterceptor>
      <virtualDestinations>
        <virtualTopic name=">" prefix="VirtualTopicConsumers.*." selectorAware="false"/>
        <compositeQueue name="MY.QUEUE" forwardOnly="true">
          <forwardTo>
            <queue physicalName="FOO"/>
            <topic physicalName="BAR"/>
            <filteredDestination selector="odd = 'yes'" queue="FOO"/>
          </forwardTo>
        </compositeQueue>
      </virtualDestinations>
    </virtualDestinationInterceptor>

Attributes go through the kernel's `convert`, so unknown attributes are warned
about (errors under ``--strict``) and bad values name file:line exactly like
every other element. Everything is checked here, before the broker starts:
a bad selector or a forwarding loop is a configuration error, not a failed send.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from relaymq.config.model import Origin, PluginElement
from relaymq.config.report import Report, at
from relaymq.config.typed import convert
from relaymq.errors import ConfigError
from relaymq.model.destination import Destination, InvalidDestination
from relaymq.selector import InvalidSelector, Selector

#: ActiveMQ's out-of-the-box virtual topic (BrokerService.createDefaultDestinationInterceptor).
DEFAULT_TOPIC_NAME = "VirtualTopic.>"
DEFAULT_PREFIX = "Consumer.*."

#: Field metadata: filled from the element's tag or children, not from an attribute.
_NOT_AN_ATTRIBUTE = {"attribute": False}


@dataclass(slots=True)
class VirtualTopic:
    """``<virtualTopic>``: topics matching `name` also feed their consumer queues.

    The consumer queues of topic ``T`` are the existing queues matching
    ``prefix + T + postfix`` (``Consumer.*.VirtualTopic.Orders``).
    """

    name: str = ">"
    prefix: str = DEFAULT_PREFIX
    postfix: str = ""
    selector_aware: bool = False
    local: bool = False
    concurrent_send: bool = False
    transacted_send: bool = False
    drop_on_resource_limit: bool = False
    set_original_destination: bool = True
    origin: Origin = field(default_factory=Origin)

    @property
    def topic(self) -> Destination:
        return Destination.topic(self.name)

    def covers(self, topic: Destination) -> bool:
        return self.topic.matches(topic)

    def consumer_queues(self, topic: Destination) -> str:
        """The (wildcard) queue name pattern of `topic`'s consumer queues."""
        return self.prefix + topic.name + self.postfix

    def describe(self) -> str:
        flags = [n for n in ("selector_aware", "local", "concurrent_send", "transacted_send",
                             "drop_on_resource_limit") if getattr(self, n)]
        if not self.set_original_destination:
            flags.append("set_original_destination=false")
        extra = f" ({', '.join(flags)})" if flags else ""
        return f"topic://{self.name} -> queue://{self.prefix}<topic>{self.postfix}{extra}"


@dataclass(slots=True)
class ForwardTarget:
    """One child of ``<forwardTo>``; `selector` is set for ``<filteredDestination>``."""

    destination: Destination
    selector: Selector | None = None
    origin: Origin = field(default_factory=Origin)

    def describe(self) -> str:
        return f"{self.destination}" + (f" [{self.selector.text}]" if self.selector else "")


@dataclass(slots=True)
class CompositeDestination:
    """``<compositeQueue>`` / ``<compositeTopic>``: a name that forwards to others.

    `forward_only` (default true) means nothing stays on the composite name;
    false makes it a physical destination too (a wire tap). `send_when_not_matched`
    keeps a message on the composite name when no forward target took it.
    """

    name: str
    forward_only: bool = True
    concurrent_send: bool = False
    copy_message: bool = True
    send_when_not_matched: bool = False
    origin: Origin = field(default_factory=Origin)
    #: "queue" for <compositeQueue>, "topic" for <compositeTopic> (from the tag)
    kind: str = field(default="queue", metadata=_NOT_AN_ATTRIBUTE)
    forward_to: list[ForwardTarget] = field(default_factory=list, metadata=_NOT_AN_ATTRIBUTE)

    @property
    def destination(self) -> Destination:
        return Destination.queue(self.name) if self.kind == "queue" else Destination.topic(self.name)

    def covers(self, dest: Destination) -> bool:
        return self.destination.matches(dest)

    def describe(self) -> str:
        targets = ", ".join(t.describe() for t in self.forward_to) or "nothing"
        mode = "" if self.forward_only else " (forwardOnly=false)"
        return f"{self.destination} -> {targets}{mode}"


@dataclass(slots=True)
class InterceptorConfig:
    """Everything one ``<virtualDestinationInterceptor>`` configures, in config order."""

    topics: list[VirtualTopic] = field(default_factory=list)
    composites: list[CompositeDestination] = field(default_factory=list)
    origin: Origin = field(default_factory=Origin)

    @property
    def empty(self) -> bool:
        return not self.topics and not self.composites


_ENTRY_TAGS = ("virtualTopic", "compositeQueue", "compositeTopic")


def parse_interceptor(element: PluginElement, *, strict: bool = False,
                      report: Report | None = None) -> InterceptorConfig:
    """Build the typed config of one ``<virtualDestinationInterceptor>`` (its warnings
    go to `report`; logged when there is none).

    :raises ConfigError: listing every problem, each with its file:line.
    """
    report = report if report is not None else Report(strict=strict)
    errors: list[str] = []
    config = InterceptorConfig(origin=element.origin)
    for attr in element.attributes:
        report.warn(f"<{element.tag}>{at(element.origin)}: attribute '{attr}' is ignored: "
                    "RelayMQ does not support it")
    for entry in _entries(element, report):
        try:
            if entry.tag == "virtualTopic":
                config.topics.append(_virtual_topic(entry, report))
            else:
                config.composites.append(_composite(entry, report))
        except ConfigError as exc:
            errors.extend(exc.errors or [str(exc)])
    errors.extend(report.errors)
    if not errors:
        errors.extend(_forwarding_loops(config.composites))
    if errors:
        raise ConfigError("\n".join(errors), errors)
    return config


def _entries(element: PluginElement, report: Report) -> list[PluginElement]:
    """The children of ``<virtualDestinations>`` (or, leniently, of the element itself)."""
    out: list[PluginElement] = []
    for child in element.children:
        if child.tag == "virtualDestinations":
            for entry in child.children:
                if entry.tag in _ENTRY_TAGS:
                    out.append(entry)
                else:
                    report.warn(f"<{entry.tag}>{at(entry.origin)} inside <virtualDestinations> is "
                                f"ignored: expected one of {', '.join(_ENTRY_TAGS)}")
        elif child.tag in _ENTRY_TAGS:
            out.append(child)
        else:
            report.warn(f"<{child.tag}>{at(child.origin)} inside <{element.tag}> is ignored: "
                        "expected <virtualDestinations>")
    return out


def _virtual_topic(entry: PluginElement, report: Report) -> VirtualTopic:
    vt = convert(VirtualTopic, entry, report=report)
    problems = []
    if not vt.name.strip():
        problems.append(f"<virtualTopic>{at(entry.origin)}: name must not be empty")
    if vt.prefix.strip(".") == "" and vt.postfix.strip(".") == "":
        # Consumer queues would be named exactly like the topic: every queue of
        # that name would receive a copy of each publication (ActiveMQ allows it,
        # but nobody means it).
        problems.append(f"<virtualTopic name=\"{vt.name}\">{at(entry.origin)}: prefix and postfix "
                        "are both empty; consumer queues need a distinct name such as "
                        "prefix=\"Consumer.*.\"")
    if problems:
        raise ConfigError("\n".join(problems), problems)
    return vt


def _composite(entry: PluginElement, report: Report) -> CompositeDestination:
    comp = convert(CompositeDestination, entry, report=report, ignore=("forwardTo",))
    comp.kind = "queue" if entry.tag == "compositeQueue" else "topic"
    problems: list[str] = []
    if not comp.name.strip():
        problems.append(f"<{entry.tag}>{at(entry.origin)}: name must not be empty")
    if not comp.copy_message:
        report.warn(f"<{entry.tag} name=\"{comp.name}\" copyMessage=\"false\">{at(entry.origin)}: "
                    "RelayMQ routes a message by its destination, so forwarded copies always "
                    "carry their target as destination (as with copyMessage=\"true\")")
    forward = entry.children_named("forwardTo")
    for other in entry.children:
        if other.tag != "forwardTo":
            report.warn(f"<{other.tag}>{at(other.origin)} inside <{entry.tag}> is ignored: "
                        "expected <forwardTo>")
    for wrapper in forward:
        for child in wrapper.children:
            try:
                comp.forward_to.append(_target(child, report))
            except ConfigError as exc:
                problems.extend(exc.errors or [str(exc)])
    if not forward or not comp.forward_to:
        report.warn(f"<{entry.tag} name=\"{comp.name}\">{at(entry.origin)} forwards to nothing"
                    + ("; messages sent to it are dropped" if comp.forward_only else ""))
    if problems:
        raise ConfigError("\n".join(problems), problems)
    return comp


def _target(child: PluginElement, report: Report) -> ForwardTarget:
    where = at(child.origin)
    attrs = child.attributes
    if child.tag in ("queue", "topic"):
        for name in attrs:
            if name != "physicalName":
                report.warn(f"<{child.tag}>{where}: attribute '{name}' is ignored")
        name = attrs.get("physicalName", "").strip()
        if not name:
            raise ConfigError(f"<{child.tag}>{where} needs physicalName=\"NAME\"")
        return ForwardTarget(_dest(child.tag, name, child), None, child.origin)
    if child.tag == "filteredDestination":
        for name in attrs:
            if name not in ("selector", "queue", "topic"):
                report.warn(f"<filteredDestination>{where}: attribute '{name}' is ignored")
        queue, topic = attrs.get("queue", "").strip(), attrs.get("topic", "").strip()
        if bool(queue) == bool(topic):
            raise ConfigError(f"<filteredDestination>{where} needs exactly one of queue=\"NAME\" "
                              "or topic=\"NAME\"")
        text = attrs.get("selector", "").strip()
        selector = None
        if text:
            try:
                selector = Selector.compile(text)
            except InvalidSelector as exc:
                raise ConfigError(f"<filteredDestination selector=\"{text}\">{where}: "
                                  f"invalid selector: {exc}") from exc
        dest = _dest("queue", queue, child) if queue else _dest("topic", topic, child)
        return ForwardTarget(dest, selector, child.origin)
    raise ConfigError(f"<{child.tag}>{where} inside <forwardTo> is not a forward target; "
                      "use <queue physicalName>, <topic physicalName> or <filteredDestination>")


def _dest(kind: str, name: str, child: PluginElement) -> Destination:
    try:
        return Destination.queue(name) if kind == "queue" else Destination.topic(name)
    except InvalidDestination as exc:
        raise ConfigError(f"<{child.tag}>{at(child.origin)}: {exc}") from exc


def _forwarding_loops(composites: list[CompositeDestination]) -> list[str]:
    """Composite names that (through other composites) forward to themselves.

    Only exact names are followed; a wildcard loop is caught at send time by a
    depth limit. Why check at all: ActiveMQ recurses until the stack overflows.
    """
    by_dest = {c.destination: c for c in composites if not c.destination.is_wildcard}
    errors: list[str] = []
    for start in by_dest.values():
        path = [start]
        seen = {start.destination}
        stack = [(start, iter(start.forward_to))]
        while stack:
            comp, targets = stack[-1]
            target = next(targets, None)
            if target is None:
                stack.pop()
                path.pop()
                continue
            nxt = by_dest.get(target.destination)
            if nxt is None:
                continue
            if nxt is start:
                chain = " -> ".join(str(c.destination) for c in path + [start])
                errors.append(f"<composite{start.kind.title()} name=\"{start.name}\">"
                              f"{at(start.origin)} forwards to itself: {chain}")
                break
            if nxt.destination in seen:
                continue
            seen.add(nxt.destination)
            path.append(nxt)
            stack.append((nxt, iter(nxt.forward_to)))
    return errors
