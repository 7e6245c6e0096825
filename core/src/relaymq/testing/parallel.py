"""Running the suite on several pytest-xdist workers (`make test` runs two).

Work goes to the workers one *unit* at a time, as each runs short of it:

- a unit is a test module, so module fixtures (a broker process shared by a
  module's tests) are made once;
- the modules that use one of the run's shared peers (PostgreSQL, ActiveMQ,
  RabbitMQ, Spark, the console's broker, the plugin sites) form one unit per
  peer, so each peer still starts once per run, on one worker. Modules that use
  two peers join their units into one;
- the peers' units go out first, longest (Spark) first, then the modules in
  reverse collection order: the top-level process tests before the plugins'
  and the kernel's many short in-process tests, which fill the end of the run
  evenly.

The workers find the peers' modules (by the fixtures their tests use) and write
them down as JSON in a directory the controller made (`RELAYMQ_XDIST_UNITS`); the
controller's `GroupFirstScheduling` reads them once every worker has collected
(`pytest -n 2 --dist loadgroup` with this plugin loaded). Test ids stay as they are.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from relaymq.testing import external

#: session fixtures made once per run besides the peers (`external.item_peers`), and
#: the unit of the modules that use them
SHARED_FIXTURES = {
    "console": "console",
    "example_site": "plugin-sites",
    "troubled_site": "plugin-sites",
}
#: the directory where workers write {module: unit} for the controller
UNITS_ENV = "RELAYMQ_XDIST_UNITS"
#: units sent first, in this order (the longest first); others follow by name
FIRST = ("spark", "activemq", "rabbitmq", "postgres")


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _peers(item: pytest.Item) -> set[str]:
    shared = {SHARED_FIXTURES[n] for n in getattr(item, "fixturenames", ()) if n in SHARED_FIXTURES}
    return external.item_peers(item) | shared


def unit_names(items: Iterable[pytest.Item]) -> dict[str, str]:
    """{module: unit name} for the modules whose tests use a shared peer; peers used
    by one module together are one unit ("activemq+rabbitmq")."""
    by_module: dict[str, set[str]] = {}
    for item in items:
        peers = _peers(item)
        if peers:
            by_module.setdefault(_module(item.nodeid), set()).update(peers)
    parent: dict[str, str] = {}

    def root(p: str) -> str:
        while parent.setdefault(p, p) != p:
            p = parent[p]
        return p

    for peers in by_module.values():
        first, *rest = sorted(peers)
        root(first)
        for p in rest:
            parent[root(p)] = root(first)
    members: dict[str, list[str]] = {}
    for p in parent:
        members.setdefault(root(p), []).append(p)
    name = {r: "+".join(sorted(ps)) for r, ps in members.items()}
    return {module: name[root(next(iter(peers)))] for module, peers in by_module.items()}


def start_controller(config: pytest.Config) -> None:
    """On the controller of `--dist loadgroup`: the directory the workers (started after
    this, with this environment) write their units into."""
    if config.getoption("dist", "no") != "loadgroup" or hasattr(config, "workerinput"):
        return
    directory = tempfile.mkdtemp(prefix="relaymq-xdist-units-")
    os.environ[UNITS_ENV] = directory
    config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))


def write_units(items: list[pytest.Item]) -> None:
    """On a worker: {module: unit} of this collection, for the controller."""
    directory = os.environ.get(UNITS_ENV)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not directory or not worker:
        return
    target = Path(directory) / f"{worker}.json"
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(unit_names(items)))
    partial.replace(target)


def read_units() -> dict[str, str]:
    """What the workers wrote (their collections are the same, so are their units)."""
    directory = os.environ.get(UNITS_ENV)
    units: dict[str, str] = {}
    if directory:
        for path in sorted(Path(directory).glob("*.json")):
            units.update(json.loads(path.read_text()))
    return units


def _rank(unit: str) -> int:
    parts = unit.split("+")
    return min((FIRST.index(p) for p in parts if p in FIRST), default=len(FIRST))


def scope_of(nodeid: str, units: dict[str, str]) -> str:
    """A test's unit: its peers' ("@spark"), else its module."""
    module = _module(nodeid)
    unit = units.get(module)
    return module if unit is None else "@" + unit


def unit_order(units: list[str]) -> list[str]:
    """Units (`scope_of`, in collection order) in the order they go out."""
    groups = sorted((u for u in units if u.startswith("@")), key=lambda u: (_rank(u[1:]), u))
    return groups + [u for u in reversed(units) if not u.startswith("@")]


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    from collections import OrderedDict

    from xdist.scheduler import LoadScopeScheduling

    class GroupFirstScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """LoadScopeScheduling with `scope_of`'s units, sent in `unit_order`."""

        def __init__(self, config: pytest.Config, log: Any) -> None:
            super().__init__(config, log)
            self.config.option.loadscopereorder = False  # units in collection order
            self._in_order = False
            self._units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._units is None:  # called once every worker has collected
                self._units = read_units()
            return scope_of(nodeid, self._units)

        def _assign_work_unit(self, node: Any) -> None:
            if not self._in_order:  # the first assignment: the queue is complete
                queue: OrderedDict[str, dict[str, bool]] = self.workqueue  # type: ignore[has-type]
                self.workqueue = OrderedDict((u, queue[u]) for u in unit_order(list(queue)))
                self._in_order = True
            super()._assign_work_unit(node)

    return GroupFirstScheduling(config, log)


__all__ = ["SHARED_FIXTURES", "make_scheduler", "read_units", "scope_of", "start_controller",
           "unit_names", "unit_order", "write_units"]
