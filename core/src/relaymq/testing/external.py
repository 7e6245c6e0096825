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
#: session fixtures that start a peer (relaymq.testing.peers, relaymq_jdbc.testing,
#: relaymq-spark's conftest)
PEER_FIXTURES = frozenset({"activemq", "rabbitmq", "postgres", "postgres_url", "spark"})


def configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: talks to a system other than RelayMQ (PostgreSQL, ActiveMQ, "
                   "RabbitMQ, Spark, a browser); left out of `make test-pure`")


def is_external(item: pytest.Item) -> bool:
    if item.get_closest_marker(MARKER) is not None or item.get_closest_marker("spark") is not None:
        return True
    return not PEER_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


def mark_items(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker(MARKER) is None and is_external(item):
            item.add_marker(MARKER)


_UNMARKED = pytest.StashKey[list[str]]()


def note_fixture(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> None:
    """Remember a peer fixture set up for a test not marked `external`
    (`unmarked_peers` fails the test once it is torn down: failing inside a fixture's
    setup would leave a session fixture half made for the tests after it)."""
    if fixturedef.argname not in PEER_FIXTURES:
        return
    item = getattr(request, "_pyfuncitem", None)
    if item is not None and item.get_closest_marker(MARKER) is None:
        item.stash.setdefault(_UNMARKED, []).append(fixturedef.argname)


def unmarked_peers(item: pytest.Item) -> str | None:
    names = item.stash.get(_UNMARKED, [])
    if not names:
        return None
    return (f"{item.nodeid} uses the peer(s) {', '.join(sorted(set(names)))} but is not marked "
            f"@pytest.mark.{MARKER} (relaymq.testing.external)")
