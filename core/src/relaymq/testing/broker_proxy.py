"""A `relaymq run` child process standing in for an in-process `Broker` in a test:
the test's `BrokerConfig` written as activemq.xml (`config_writer`), its connectors
on free ports, and relaymq-console's REST API (`/api/v1`, docs/console.md) on a
free port for what a scenario reads of the broker's state.

    b = ProcessBroker(cfg, tmp_path).start()
    client = await connect_over("stomp", b)       # b.connector_address("stomp")
    b.queue_size("ORDERS"); b.destination_stats()["queue://ORDERS"]["dequeued"]
    b.stop()

The reads answer like `Broker.queue_size` and `Broker.destination_stats` (a
destination that does not exist has size 0 and no entry). They are blocking HTTP
requests to another process, so a scenario's condition polls use them unchanged.
Needs relaymq-console installed in the child's environment (`console_missing`).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from relaymq.config.model import BrokerConfig, PluginElement, TransportConnectorConfig
from relaymq.testing.config_writer import config_xml
from relaymq.testing.net import free_port_below_ephemeral as free_port
from relaymq.testing.processes import RelaymqProcess
from relaymq.testing.waits import wait_until

#: the per-destination counters `Broker.destination_stats` gives (DestinationStatistics)
STAT_FIELDS = ("enqueued", "dequeued", "dispatched", "in_flight", "expired", "dead_lettered",
               "consumers", "producers", "memory_used", "duplicates", "replaced", "discarded")
_PORT_ZERO = re.compile(r"^([a-z+0-9]+://[^/:?]+):0(?=$|[/?])")


def console_missing() -> str | None:
    """Why a process broker cannot be read here (None: it can)."""
    if importlib.util.find_spec("relaymq_console") is None:
        return "relaymq-console is not installed: a broker process's state is read over its REST API"
    return None


class ProcessBroker:
    """The broker of `config` in a child process (see the module's docstring)."""

    def __init__(self, config: BrokerConfig, directory: Path) -> None:
        # ports below the ephemeral range: between the pick and the child's bind, no
        # client connection's local port can take one (a start failed that way)
        self.directory = directory
        self.http_port = free_port()
        self.url = f"http://127.0.0.1:{self.http_port}/api/v1"
        self.ports: dict[str, int] = {}
        cfg = copy.copy(config)
        connectors = []
        for tc in config.transport_connectors:
            uri = tc.uri
            if _PORT_ZERO.match(uri):  # a free port the test can be told
                port = free_port()
                uri = _PORT_ZERO.sub(lambda m, p=port: f"{m.group(1)}:{p}", uri)  # type: ignore[misc]
            scheme = uri.partition("://")[0]
            self.ports.setdefault(scheme, int(re.split(r"[/?]", uri.rpartition(":")[2])[0]))
            connectors.append(TransportConnectorConfig(tc.name, uri))
        cfg.transport_connectors = connectors
        cfg.plugins = [*config.plugins, PluginElement(
            "console", {"host": "127.0.0.1", "port": str(self.http_port)})]
        cfg.data_directory = str(directory / "data")
        self.config = cfg
        self.management = _Management(self)
        path = directory / "activemq.xml"
        path.write_text(config_xml(cfg))
        self.process = RelaymqProcess(path, directory / "broker.log",
                                      ports=[*self.ports.values(), self.http_port])

    def start(self, timeout: float = 60.0) -> ProcessBroker:
        """Start it; return once its connectors listen and its REST API answers."""
        self.process.start(timeout=timeout)
        try:
            wait_until(self._api_up, "the broker's REST API", timeout,
                       detail=lambda: self.process.output()[-2000:])
        except AssertionError:
            self.process.kill()
            raise
        return self

    def stop(self) -> None:
        self.process.stop()

    def _api_up(self) -> bool:
        if not self.process.alive():
            raise AssertionError(self.process.describe_death())
        try:
            self._get("/broker")
            return True
        except (urllib.error.URLError, OSError):
            return False

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def _delete(self, path: str) -> Any:
        """The answer to a DELETE; `{"deleted": False}` when there was nothing (404)."""
        req = urllib.request.Request(self.url + path, method="DELETE")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return {"deleted": False}
            raise

    def connections(self) -> list[dict[str, Any]]:
        """The client connections the broker lists (REST `/connections`)."""
        return list(self._get("/connections")["items"])

    def durable_subscriptions(self) -> list[dict[str, Any]]:
        """The durable subscriptions the broker lists (REST `/subscriptions`)."""
        return list(self._get("/subscriptions")["items"])

    def delete_destination(self, key: str) -> bool:
        """Delete queue or topic `key` (`queue://NAME`, `topic://NAME`)."""
        kind, _, name = key.partition("://")
        return bool(self._delete(f"/{kind}s/{urllib.parse.quote(name, safe='')}")["deleted"])

    def delete_durable_subscription(self, client_id: str, name: str) -> bool:
        return bool(self._delete(f"/subscriptions/{urllib.parse.quote(client_id, safe='')}/"
                                 f"{urllib.parse.quote(name, safe='')}")["deleted"])

    def memory_used(self) -> int:
        return int(self._get("/broker")["memory_used"])

    # -- what scenarios read of an in-process Broker --------------------------------------

    def connector_address(self, scheme: str) -> str:
        """`host:port` of the connector for `scheme`."""
        if scheme not in self.ports:
            raise KeyError(f"no {scheme} connector")
        return f"127.0.0.1:{self.ports[scheme]}"

    def queue_size(self, name: str) -> int:
        """Messages in queue `name` not yet acknowledged (0 when it does not exist)."""
        try:
            info = self._get(f"/queues/{urllib.parse.quote(name, safe='')}")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return 0
            raise
        return int(info["depth"])

    def consumers(self, key: str) -> list[SimpleNamespace]:
        """The consumers of queue `key` (`queue://NAME`) with the fields of
        `relaymq.management.ConsumerInfo` (`in_flight`, `exclusive`, `active`, ...)."""
        kind, _, name = key.partition("://")
        if kind != "queue":
            raise ValueError(f"the REST API lists the consumers of queues, not {key}")
        info = self._get(f"/queues/{urllib.parse.quote(name, safe='')}")
        return [SimpleNamespace(**c) for c in info["consumer_list"]]

    def destination_stats(self) -> dict[str, dict[str, int]]:
        """Each queue's and topic's counters by key (`queue://NAME`), as `Broker` gives
        them (`pending` is the depth)."""
        out: dict[str, dict[str, int]] = {}
        for kind in ("queues", "topics"):
            page = 1
            while True:
                listing = self._get(f"/{kind}?size=1000&page={page}")
                for info in listing["items"]:
                    stats = {f: int(info[f]) for f in STAT_FIELDS}
                    stats["pending"] = int(info["depth"])
                    out[info["key"]] = stats
                if page * 1000 >= listing["total"]:
                    break
                page += 1
        return out


class _Management:
    """The part of `Broker.management` scenarios read: `consumers(key)`."""

    def __init__(self, broker: ProcessBroker) -> None:
        self._broker = broker

    def consumers(self, key: str) -> list[SimpleNamespace]:
        return self._broker.consumers(key)
