"""The `external` marker: tests that talk to a system other than RelayMQ.

PostgreSQL, ActiveMQ, RabbitMQ, Spark and a browser are real peers the suite starts
once per run (docs/testing.md). Their tests check RelayMQ against that other
system, and run on the compiled build (`make test`); the interpreted run
(`make test-pure`) leaves them out with `-m "not slow and not external"`: what
differs between the builds is RelayMQ's per-message modules, and every test that
exercises them without a peer runs on both.

A test is marked when it asks for a peer's fixture by argument, or when it is a
Spark test (`spark` marker). A test that reaches a peer another way
(`request.getfixturevalue`, a browser it launches itself) says
`@pytest.mark.external`; a peer fixture set up for an unmarked test fails that
test, so the marking cannot drift."""

from __future__ import annotations

from typing import Any

import pytest

MARKER = "external"
#: fixtures that start a peer, and the peer (relaymq.testing.peers, relaymq_jdbc.testing,
#: relaymq-spark's conftest)
PEERS = {"activemq": "activemq", "rabbitmq": "rabbitmq", "postgres": "postgres",
         "postgres_url": "postgres", "spark": "spark"}
PEER_FIXTURES = frozenset(PEERS)


def configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(*peers): talks to a system other than RelayMQ (PostgreSQL, "
                   "ActiveMQ, RabbitMQ, Spark, a browser); left out of `make test-pure`. "
                   "Name the peers a test reaches through request.getfixturevalue "
                   "(external(\"postgres\")).")


def item_peers(item: pytest.Item) -> set[str]:
    """The peers a test uses: by the fixtures it asks for, the `spark` marker, and the
    names its `external` markers give."""
    peers = {PEERS[name] for name in getattr(item, "fixturenames", ()) if name in PEERS}
    if item.get_closest_marker("spark") is not None:
        peers.add("spark")
    for mark in item.iter_markers(MARKER):
        peers.update(name for name in mark.args if name in PEERS.values())
    return peers


def is_external(item: pytest.Item) -> bool:
    if item.get_closest_marker(MARKER) is not None or item.get_closest_marker("spark") is not None:
        return True
    return not PEER_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


def mark_items(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker(MARKER) is None and is_external(item):
            item.add_marker(MARKER)


_UNMARKED = pytest.StashKey[list[str]]()
_UNDECLARED = pytest.StashKey[list[str]]()


def note_fixture(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> None:
    """Remember a peer fixture set up for a test not marked `external`, or for one
    that does not name that peer (it asked for it through `request.getfixturevalue`):
    `unmarked_peers` fails the test once it is torn down (failing inside a fixture's
    setup would leave a session fixture half made for the tests after it). A peer
    the test does not name would start a second time on another pytest-xdist worker
    (relaymq.testing.parallel)."""
    if fixturedef.argname not in PEER_FIXTURES:
        return
    item = getattr(request, "_pyfuncitem", None)
    if item is None:
        return
    if item.get_closest_marker(MARKER) is None:
        item.stash.setdefault(_UNMARKED, []).append(fixturedef.argname)
    elif PEERS[fixturedef.argname] not in item_peers(item):
        item.stash.setdefault(_UNDECLARED, []).append(PEERS[fixturedef.argname])


def unmarked_peers(item: pytest.Item) -> str | None:
    names = item.stash.get(_UNMARKED, [])
    if names:
        return (f"{item.nodeid} uses the peer(s) {', '.join(sorted(set(names)))} but is not "
                f"marked @pytest.mark.{MARKER} (relaymq.testing.external)")
    undeclared: list[str] = item.stash.get(_UNDECLARED, [])
    peers = sorted(set(undeclared))
    if peers:
        named = ", ".join(f'"{p}"' for p in peers)
        return (f"{item.nodeid} starts the peer(s) {', '.join(peers)} through "
                f"request.getfixturevalue: name them, @pytest.mark.{MARKER}({named}), so "
                f"each peer's tests share one pytest-xdist worker (relaymq.testing.parallel)")
    return None
