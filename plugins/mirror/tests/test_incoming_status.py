"""The target side's view of the mirrors that feed it, on `relaymq run` processes
read through the console (its API and its broker-connections page) and
`relaymq mirror` as an operator reads them: each
source broker (its node id, `x-opt-amq-bkr-id`), the address it connects from,
whether it is connected, the events applied, the repeats dropped, when the last
event came and the last error."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from mirrortools import BrokerProcess, mirror_event, mirror_xml, send
from relaymq.testing.waits import wait_until, wait_until_async

pytest.importorskip("relaymq_console", reason="relaymq-console is not installed (the tests "
                    "read the brokers' management listings through it)")

RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


@pytest.fixture
def target(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path, "b", console=True).start()
    try:
        yield b
    finally:
        b.stop()


def incoming(b: BrokerProcess) -> dict[str, dict[str, Any]]:
    """B's incoming broker connections by name (a mirror's: the source's node id)."""
    return {item["name"]: item for item in b.api("incoming-broker-connections")["items"]}


def test_the_target_lists_each_source_with_its_counts_and_state(
        tmp_path: Path, target: BrokerProcess) -> None:
    b = target
    assert incoming(b) == {}  # nothing mirrors into B yet
    a = BrokerProcess(tmp_path, "a", mirror_xml(b.port, "B"), console=True).start()
    try:
        wait_until(lambda: any(i["connected"] for i in incoming(b).values()),
                   "B lists A's mirror as connected", timeout=60,
                   detail=lambda: repr(incoming(b)))
        node_a = (a.dir / "node-id").read_text().strip()  # made when the mirror started
        assert list(incoming(b)) == [node_a]
        q = f"in.{uuid.uuid4().hex[:8]}"
        send(a.url, f"queue://{q}", ["one", "two", "three"])
        wait_until(lambda: b.queue_depth(q) == 3, f"{q} mirrored to B", timeout=60)
        wait_until(lambda: incoming(b)[node_a]["detail"]["applied"] >= 3
                   and incoming(b)[node_a]["detail"]["last_event"] is not None,
                   "B counts A's events", timeout=30, detail=lambda: repr(incoming(b)))
        row = incoming(b)[node_a]
        assert row["kind"] == "mirror" and row["remote_node"] == node_a
        assert row["remote_address"].startswith("127.0.0.1:"), row
        detail = row["detail"]
        assert detail["source"] == node_a and detail["connection_name"] == "B", detail
        assert detail["duplicates"] == 0 and detail["rejected"] == 0, detail
        assert detail["last_error"] is None, detail

        # the same listing from a shell
        url = f"http://127.0.0.1:{b.http_port}"
        # and for monitoring: B's /metrics says what feeds it
        metrics = urllib.request.urlopen(f"{url}/metrics", timeout=30).read().decode()
        labels = f'{{connection="{node_a}",kind="mirror"}}'
        assert f"relaymq_incoming_broker_connection_up{labels} 1" in metrics, metrics
        events = [line for line in metrics.splitlines()
                  if line.startswith(f"relaymq_incoming_broker_connection_events_total{labels}")]
        assert len(events) == 1 and int(float(events[0].split()[-1])) >= 3, events
        out = subprocess.run([RELAYMQ, "mirror", "incoming", "--url", url, "--json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout)
        assert [r["source"] for r in rows] == [node_a] and rows[0]["connected"] is True, rows
        table = subprocess.run([RELAYMQ, "mirror", "list", "--url", url],
                               capture_output=True, text=True, timeout=60)
        assert table.returncode == 0, table.stderr
        assert "incoming" in table.stdout and node_a in table.stdout, table.stdout
    finally:
        a.stop()
    wait_until(lambda: incoming(b)[node_a]["connected"] is False,
               "B shows A's mirror as gone", timeout=30, detail=lambda: repr(incoming(b)))
    assert incoming(b)[node_a]["detail"]["applied"] >= 3  # kept after the link went


async def test_repeats_and_refused_events_of_a_source_are_counted(target: BrokerProcess) -> None:
    """A source playing Artemis' sender: an event sent twice is applied once and
    counted as a duplicate; an event the target cannot read is counted as
    rejected with its reason as the last error."""
    from relaymq_amqp.outgoing import AmqpConnection

    b = target
    node = str(uuid.uuid4())
    q = f"dup.{uuid.uuid4().hex[:8]}"
    snf = "$ACTIVEMQ_ARTEMIS_MIRROR_other"
    conn = AmqpConnection(f"tcp://127.0.0.1:{b.port}", retry_interval=0.1, container_id=node,
                          properties={"broker-connection-info": {"connectionName": "other",
                                                                 "nodeId": node}})
    await conn.connect()
    try:
        sender = await conn.open_sender(
            snf, name=f"{snf}:{uuid.uuid4()}", source_address=snf,
            properties={"x-opt-amq-bkr-id": node}, desired_capabilities=["amq.mirror"],
            rcv_settle_first=True)
        event = mirror_event("payload", {"x-opt-amq-mr-id": 77, "x-opt-amq-mr-dst": q})
        for _ in range(2):  # the event and its replay
            assert (await sender.send(event)).state == "accepted"
        bad = mirror_event("payload", {"x-opt-amq-mr-id": "not a long",
                                       "x-opt-amq-mr-dst": q})
        assert (await sender.send(bad)).state == "rejected"
        await wait_until_async(lambda: incoming(b).get(node, {}).get("detail", {}).get(
            "last_event") is not None, "B's listing of the second source", timeout=30)
        row = incoming(b)[node]
        assert row["connected"] is True
        detail = row["detail"]
        assert detail["connection_name"] == "other", detail
        assert (detail["applied"], detail["duplicates"], detail["rejected"]) == (1, 1, 1), detail
        assert "x-opt-amq-mr-id" in (detail["last_error"] or ""), detail
        assert b.queue_depth(q) == 1
    finally:
        await conn.close()
    await wait_until_async(lambda: incoming(b)[node]["connected"] is False,
                           "the second source shown as gone", timeout=30)


class _Tables(HTMLParser):
    """The tables of a page by id: each row's attributes and its cells' text (as a
    browser shows it: character references read back)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[dict[str, Any]]] = {}
        self._table: list[dict[str, Any]] | None = None
        self._row: dict[str, Any] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(a.get("id") or "", [])
        elif tag == "tr" and self._table is not None:
            self._row = {"attrs": a, "cells": []}
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row["cells"].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def incoming_page(b: BrokerProcess) -> tuple[str, dict[str, list[str]]]:
    """B's broker-connections page (real HTTP): its HTML, and the rows of its table
    of incoming broker connections by name (`data-name`), the header as "head"."""
    url = f"http://127.0.0.1:{b.http_port}/broker-connections"
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200
        html = r.read().decode()
    parser = _Tables()
    parser.feed(html)
    rows = parser.tables.get("incoming", [])
    out = {str(row["attrs"].get("data-name", "head")): row["cells"] for row in rows}
    return html, out


def page_cells(row: dict[str, Any]) -> list[str]:
    """What the page shows of a row of `incoming_broker_connections()`, column by column."""
    d = row["detail"]

    def text(value: Any) -> str:
        return "" if value is None else str(value)

    return [row["remote_node"], row["kind"], text(d["connection_name"]),
            text(row["remote_address"]), "yes" if row["connected"] else "no",
            *(text(d[k]) for k in ("applied", "duplicates", "rejected", "acks_pending",
                                   "acks_not_found", "last_event", "last_error", "since"))]


async def test_the_consoles_broker_connections_page_lists_the_sources(
        tmp_path: Path, target: BrokerProcess) -> None:
    """The console's HTML page of broker connections has a table of the sources that
    mirror into this broker, as the API lists them; what a source names itself (its
    node id, its connection's name) and the reasons of its refusals are text on the
    page, never markup."""
    from relaymq_amqp.outgoing import AmqpConnection

    b = target
    html, rows = incoming_page(b)
    assert rows == {} and "No other broker connects to this one" in html  # nothing feeds B yet
    a = BrokerProcess(tmp_path, "a", mirror_xml(b.port, "B"), console=True).start()
    node = f'<script>alert("{uuid.uuid4().hex[:6]}")</script>&amp;'
    conn = AmqpConnection(f"tcp://127.0.0.1:{b.port}", retry_interval=0.1,
                          container_id=str(uuid.uuid4()),
                          properties={"broker-connection-info": {
                              "connectionName": "<i>other</i>", "nodeId": node}})
    try:
        q = f"page.{uuid.uuid4().hex[:8]}"
        send(a.url, f"queue://{q}", ["one", "two"])
        wait_until(lambda: b.queue_depth(q) == 2, f"{q} mirrored to B", timeout=60)
        wait_until(a.mirror_idle, "A's mirror idle", timeout=30)
        node_a = (a.dir / "node-id").read_text().strip()

        await conn.connect()
        snf = "$ACTIVEMQ_ARTEMIS_MIRROR_other"
        sender = await conn.open_sender(
            snf, name=f"{snf}:{uuid.uuid4()}", source_address=snf,
            properties={"x-opt-amq-bkr-id": node}, desired_capabilities=["amq.mirror"],
            rcv_settle_first=True)
        event = mirror_event("payload", {"x-opt-amq-mr-id": 5, "x-opt-amq-mr-dst": q})
        for _ in range(2):  # the event and its replay
            assert (await sender.send(event)).state == "accepted"
        bad = mirror_event("payload", **{"x-opt-amq-mr-ev-type": "<b>evil</b>"})
        assert (await sender.send(bad)).state == "rejected"  # an unknown event type
        await wait_until_async(lambda: incoming(b).get(node, {}).get("detail", {}).get(
            "last_event") is not None, "B's listing of the second source", timeout=30)

        listed = incoming(b)
        html, rows = incoming_page(b)
        assert rows["head"] == [
            "Source node", "Kind", "Connection", "Remote address", "Connected", "Applied",
            "Duplicates", "Rejected", "PostAcks pending", "PostAcks not found", "Last event",
            "Last error", "Since"]
        assert set(rows) == {"head", node_a, node}, rows
        for name in (node_a, node):  # each source as the API lists it
            assert rows[name] == page_cells(listed[name]), (rows[name], listed[name])
        assert rows[node_a][1:5] == ["mirror", "B", listed[node_a]["remote_address"], "yes"]
        assert rows[node][5:8] == ["1", "1", "1"]  # applied, duplicates, rejected
        assert "'<b>evil</b>'" in rows[node][11]  # the reason, as text
        # what the sources sent is escaped: no markup of theirs on the page
        for raw in (node, "<i>other</i>", "<b>evil</b>"):
            assert raw not in html
        assert "&lt;script&gt;alert(" in html and "&amp;amp;" in html
    finally:
        await conn.close()
        a.stop()
    await wait_until_async(lambda: incoming_page(b)[1][node_a][4] == "no"
                           and incoming_page(b)[1][node][4] == "no",
                           "the sources shown as gone", timeout=30)
