"""Broker processes shared by the scenarios of one pytest run.

Starting `relaymq run` costs seconds (2-4 s on a loaded machine); the semantics and
virtual-topic scenarios' process variants each used to start their own. A
`BrokerPool` (the session fixture `relaymq_process_brokers`) keeps the processes
of finished scenarios and hands one to the next scenario whose configuration is
the same:

    pool.acquire(config, directory_factory)   # a ProcessBroker, started or reused
    pool.release(broker, failed=...)          # cleaned and kept, or stopped

Two configurations are the same when the activemq.xml the child would be given
is the same, connector ports (free ports, `:0`) and the data directory aside
(`config_key`).

A released broker is kept only when it is back in the state of a fresh start,
read from the broker itself over its REST API: no client connection left (waited
for: a client's close reaches the broker a moment later), every durable
subscription and then every queue and topic deleted, and then the broker lists
no connection, no subscription, no destination and no memory in use. Anything
else, a scenario that failed, or a process that died, and the process is stopped
instead. A configuration whose leftovers the REST API cannot show (the
scheduler's jobs: `schedulerSupport`) is never shared. A scenario that reuses a
broker starts from what a fresh process would give it; a deleted queue drops its
pending redeliveries (`Queue._redeliver`), and plugins that cache destinations
follow deletions (`relaymq_destination_removed`).

At most `keep` idle processes stay (least recently used go first); `close()` stops
them all. `stats` counts processes started, reuses and discards.
"""

from __future__ import annotations

import copy
import logging
import urllib.error
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from relaymq.config.model import BrokerConfig
from relaymq.testing.broker_proxy import ProcessBroker
from relaymq.testing.config_writer import config_xml
from relaymq.testing.waits import wait_until

log = logging.getLogger(__name__)

#: how long a released broker may take to see its clients' connections close
CLOSE_BOUND = 20.0


@dataclass
class PoolStats:
    started: int = 0  #: `relaymq run` children started
    reused: int = 0  #: acquisitions served by a kept process
    discarded: int = 0  #: released processes stopped because they were not clean
    failed: int = 0  #: released processes stopped because their test failed


def config_key(config: BrokerConfig) -> str | None:
    """What makes two configurations interchangeable: the activemq.xml the child
    would run, with the data directory left out (each process has its own). None
    for a configuration that is never shared."""
    if config.scheduler_support:
        return None  # scheduled jobs are not listed by the REST API: no way to check them
    cfg = copy.copy(config)
    cfg.data_directory = BrokerConfig().data_directory
    return config_xml(cfg)


class BrokerPool:
    """Started `ProcessBroker`s kept between tests (see the module's docstring)."""

    def __init__(self, keep: int = 4, close_bound: float = CLOSE_BOUND) -> None:
        self.keep = keep
        self.close_bound = close_bound
        self._idle: OrderedDict[int, tuple[str, ProcessBroker]] = OrderedDict()
        self._keys: dict[int, str | None] = {}  # id(broker) -> key, for brokers in use
        self.stats = PoolStats()

    def acquire(self, config: BrokerConfig, directory: Callable[[], Path],
                timeout: float = 60.0) -> ProcessBroker:
        """A started broker running `config` (its connectors on free ports when they
        say `:0`); `directory()` gives the directory of a new one."""
        key = config_key(config)
        if key is not None:
            for ident, (idle_key, broker) in list(self._idle.items()):
                if idle_key == key:
                    del self._idle[ident]
                    if broker.process.alive():
                        self._keys[id(broker)] = key
                        self.stats.reused += 1
                        return broker
                    self._stop(broker)
        broker = ProcessBroker(config, directory())
        self.stats.started += 1
        broker.start(timeout)
        self._keys[id(broker)] = key
        return broker

    def release(self, broker: ProcessBroker, *, failed: bool) -> None:
        """The test is done with `broker`: keep it when it can be made clean, else stop it."""
        key = self._keys.pop(id(broker), None)
        if key is None or not broker.process.alive():
            self._stop(broker)
            return
        if failed:
            self.stats.failed += 1
            self._stop(broker)
            return
        problem = self._clean(broker, self.close_bound)
        if problem is not None:
            log.info("not reusing broker %s: %s", broker.directory, problem)
            self.stats.discarded += 1
            self._stop(broker)
            return
        self._idle[id(broker)] = (key, broker)
        while len(self._idle) > self.keep:
            _, (_, oldest) = self._idle.popitem(last=False)
            self._stop(oldest)

    def close(self) -> None:
        """Stop every kept process."""
        while self._idle:
            _, (_, broker) = self._idle.popitem(last=False)
            self._stop(broker)

    @staticmethod
    def _stop(broker: ProcessBroker) -> None:
        broker.process.stop(must_stop=False)

    @staticmethod
    def _clean(broker: ProcessBroker, close_bound: float) -> str | None:
        """Return `broker` to a fresh start's state; None when it is, else what is left."""
        try:
            try:
                wait_until(lambda: not broker.connections(), "the clients' connections to close",
                           close_bound)
            except AssertionError as exc:
                return str(exc)
            for sub in broker.durable_subscriptions():
                broker.delete_durable_subscription(sub["client_id"], sub["name"])
            for key in broker.destination_stats():
                broker.delete_destination(key)
            left = {
                "connections": broker.connections(),
                "durable subscriptions": broker.durable_subscriptions(),
                "destinations": sorted(broker.destination_stats()),
                "memory used": broker.memory_used(),
            }
        except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
            return f"its REST API failed: {exc!r}"
        if any(left.values()):
            return f"left after cleaning: {left}"
        return None


def describe(stats: PoolStats) -> str:
    return (f"{stats.started} started, {stats.reused} reuses, {stats.discarded} not clean, "
            f"{stats.failed} after a failed test")


__all__ = ["BrokerPool", "PoolStats", "config_key", "describe"]
