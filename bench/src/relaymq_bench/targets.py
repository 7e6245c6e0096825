"""Broker targets: URLs, credentials, broker pid, and per-broker address syntax.

Why address styles: the same "queue X" is spelled differently per broker and
protocol, and some brokers need extra terminus settings:

=========  ======================  ======================  ===================
style      AMQP queue / topic      STOMP queue / topic     notes
=========  ======================  ======================  ===================
relaymq    queue://X / topic://X   /queue/X / /topic/X     ActiveMQ convention
activemq   queue://X / topic://X   /queue/X / /topic/X     ActiveMQ Classic
artemis    X (+capability)         X (+destination-type)   routing by capability
rabbitmq   /queue/X / /topic/X     /queue/X / /topic/X     3.x AMQP 1.0 plugin;
                                                           durable terminus so the
                                                           queue is durable
=========  ======================  ======================  ===================

A target spec is ``key=value`` pairs separated by commas, e.g.
``label=rabbit,url=amqp://guest:guest@127.0.0.1:5673,url=stomp://127.0.0.1:61614,pid=123,style=rabbitmq``;
a bare URL is shorthand for ``url=<URL>``.  ``pidfile=PATH`` is read at every
run so a restarted broker is still found.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

DEFAULT_PORTS = {"amqp": 5672, "stomp": 61613}
STYLES = ("relaymq", "activemq", "artemis", "rabbitmq")


class TargetError(ValueError):
    """A malformed URL/target spec, or a target that is not reachable."""


@dataclass(frozen=True)
class Endpoint:
    protocol: str
    host: str
    port: int
    user: str | None = None
    password: str | None = None
    vhost: str | None = None

    @property
    def url(self) -> str:
        """The URL without credentials (safe to print and to store in results)."""
        return f"{self.protocol}://{self.host}:{self.port}"


def parse_url(url: str) -> Endpoint:
    parts = urlsplit(url)
    proto = parts.scheme.lower()
    if proto not in DEFAULT_PORTS:
        raise TargetError(f"unsupported URL scheme in {url!r}: use amqp:// or stomp://")
    if not parts.hostname:
        raise TargetError(f"no host in {url!r}")
    vhost = unquote(parts.path[1:]) if parts.path and parts.path != "/" else None
    return Endpoint(proto, parts.hostname, parts.port or DEFAULT_PORTS[proto],
                    unquote(parts.username) if parts.username else None,
                    unquote(parts.password) if parts.password else None, vhost)


@dataclass
class Target:
    """One broker under test; ``endpoints`` maps protocol to its endpoint."""

    label: str
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    pid: int | None = None
    pidfile: str | None = None
    style: str = "relaymq"
    user: str | None = None
    password: str | None = None

    def endpoint(self, protocol: str) -> Endpoint:
        try:
            ep = self.endpoints[protocol]
        except KeyError:
            raise TargetError(f"target {self.label!r} has no {protocol} URL") from None
        if ep.user is None and self.user is not None:
            ep = Endpoint(ep.protocol, ep.host, ep.port, self.user, self.password, ep.vhost)
        if ep.user is None and self.style == "rabbitmq":
            ep = Endpoint(ep.protocol, ep.host, ep.port, "guest", "guest", ep.vhost)
        return ep

    def broker_pid(self) -> int | None:
        if self.pidfile:
            try:
                with open(self.pidfile) as fh:
                    return int(fh.read().strip())
            except (OSError, ValueError) as exc:
                raise TargetError(f"cannot read broker pid from {self.pidfile}: {exc}") from exc
        return self.pid

    @property
    def protocols(self) -> list[str]:
        return list(self.endpoints)


def parse_target(spec: str, default_label: str | None = None) -> Target:
    """Parse a target spec (see module docstring)."""
    target = Target(label="")
    for item in [s for s in spec.split(",") if s.strip()]:
        item = item.strip()
        if "://" in item and not item.startswith("url="):
            key, value = "url", item
            if "=" in item.split("://", 1)[0]:  # label=amqp://...
                key_label, value = item.split("=", 1)
                target.label = key_label
        else:
            key, _, value = item.partition("=")
        key = key.strip().lower()
        if key == "url":
            ep = parse_url(value)
            target.endpoints[ep.protocol] = ep
        elif key in ("label", "name"):
            target.label = value
        elif key == "pid":
            target.pid = int(value)
        elif key == "pidfile":
            target.pidfile = value
        elif key == "style":
            if value not in STYLES:
                raise TargetError(f"unknown style {value!r}; choose from {', '.join(STYLES)}")
            target.style = value
        elif key == "user":
            target.user = value
        elif key == "password":
            target.password = value
        else:
            raise TargetError(f"unknown key {key!r} in target spec {spec!r}")
    if not target.endpoints:
        raise TargetError(f"target spec {spec!r} has no url")
    if not target.label:
        ep = next(iter(target.endpoints.values()))
        target.label = default_label or (target.style if target.style != "relaymq"
                                         else f"{ep.host}:{ep.port}")
    return target


def link_config(style: str, protocol: str, pattern: str, name: str,
                persistent: bool) -> dict[str, Any]:
    """Worker config for addressing ``name`` as a queue or topic on a broker style."""
    topic = pattern == "topic"
    if protocol == "amqp":
        if style in ("relaymq", "activemq"):
            return {"address": f"{'topic' if topic else 'queue'}://{name}"}
        if style == "artemis":
            return {"address": name, "capabilities": ["topic" if topic else "queue"]}
        # RabbitMQ 3.x: /queue/X is declared with the terminus' durability; a durable
        # (2 = unsettled-state) terminus makes it a durable queue, which persistent
        # messages need and which matches the queue STOMP declares.
        if topic:
            return {"address": f"/topic/{name}"}
        return {"address": f"/queue/{name}", "durable": 2}
    if style == "artemis":
        return {"address": name,
                "headers": {"destination-type": "MULTICAST" if topic else "ANYCAST"}}
    return {"address": f"/{'topic' if topic else 'queue'}/{name}"}


def check_reachable(ep: Endpoint, label: str, timeout: float = 2.0) -> None:
    """Fail early, with advice, when nothing listens where the bench should connect."""
    try:
        with socket.create_connection((ep.host, ep.port), timeout=timeout):
            pass
    except OSError as exc:
        env = f"RELAYMQ_BENCH_{ep.protocol.upper()}_URL"
        raise TargetError(
            f"nothing is listening on {ep.host}:{ep.port} ({ep.protocol}, target {label!r}): "
            f"{exc.strerror or exc}.\n"
            f"  Start the broker first (RelayMQ: `make run`; RabbitMQ: `bench/rabbitmq.sh start`),"
            f"\n  or point the bench elsewhere with --{ep.protocol}-url / --target / ${env}."
        ) from exc


def env_default(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value else default
