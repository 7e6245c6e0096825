"""``relaymq mirror list|status|start|stop|sync``: the mirrors of a running broker,
through its console's REST API (relaymq-console, ``/api/v1/broker-connections``).

``list`` and ``status`` show each mirror's state, target, SnF depth, lag and
last error (docs/mirror.md#management); ``incoming`` (and ``list``, below its
own mirrors) the mirrors other brokers run into this one, by source broker
(``/api/v1/incoming-broker-connections``); ``start``/``stop`` are Artemis'
``startBrokerConnection``/``stopBrokerConnection`` of its ``<amqp-connection>``.

``sync NAME`` copies the broker's current state (its destinations, durable
subscriptions and messages) to the target of mirror ``NAME``. Messages that
existed before the mirror was configured are not mirrored by themselves (as in
Artemis); this command is how to bring a new target up to date. The target
drops what it already holds (duplicate ids), so running it twice is harmless.

Every command takes ``--url``, ``--user``/``--password``, ``--config`` and
``--json`` as the other admin commands do (`relaymq.cli_remote`).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import click
from relaymq.cli_remote import call, fields, listing, remote_options

LIST_COLUMNS = ["name", "state", "target", "snf_depth", "unsettled", "accepted", "lag_ms",
                "retries", "last_error"]
STATUS_FIELDS = ["name", "state", "target", "connected", "target_node", "snf_queue",
                 "snf_depth", "unsettled", "sent", "accepted", "rejected",
                 "dropped_unsent_pairs", "lag_ms", "lag_p99_ms", "sync", "retries",
                 "last_error"]

INCOMING_COLUMNS = ["source", "connection_name", "remote_address", "connected", "applied",
                    "duplicates", "rejected", "last_event", "last_error"]


def mirrors(url: str | None, user: str | None, password: str | None) -> list[dict[str, Any]]:
    """One row per `<mirror>`: its own status with its connection's name, target
    host, whether the connection is open and how often it was retried. A
    connection's error is the mirror's when the mirror has none of its own."""
    items = call(url, user, password, "GET", "/api/v1/broker-connections",
                 api="broker-connections API")["items"]
    rows = []
    for item in items:
        detail = item.get("detail") if isinstance(item.get("detail"), dict) else {}
        for op in detail.get("operations") or []:
            if not isinstance(op, dict) or "snf_queue" not in op:
                continue  # not a mirror (federation, sender, receiver ...)
            row = dict(op)
            row.update(name=item.get("name"), target=detail.get("target"),
                       connected=detail.get("connected"), retries=detail.get("retries"))
            row["last_error"] = op.get("last_error") or detail.get("last_error")
            rows.append(row)
    return rows


def incoming(url: str | None, user: str | None, password: str | None) -> list[dict[str, Any]]:
    """One row per source broker that mirrors (or mirrored) into this one."""
    items = call(url, user, password, "GET", "/api/v1/incoming-broker-connections",
                 api="incoming-broker-connections API")["items"]
    rows = []
    for item in items:
        if item.get("kind") != "mirror":
            continue
        row = dict(item.get("detail") or {})
        row.setdefault("source", item.get("remote_node"))
        row["remote_address"] = item.get("remote_address")
        row["connected"] = item.get("connected")
        rows.append(row)
    return rows


def _one(name: str, url: str | None, user: str | None, password: str | None) -> dict[str, Any]:
    for row in mirrors(url, user, password):
        if row["name"] == name:
            return row
    raise click.ClickException(f"no mirror named {name!r} (relaymq mirror list shows them)")


def _path(name: str, action: str) -> str:
    return f"/api/v1/broker-connections/{quote(name, safe='')}/{action}"


@click.group(help="Mirrors (<mirror> in <amqp-connection>) of a running broker.")
def mirror() -> None:
    pass


@mirror.command("list")
@remote_options
def mirror_list(url: str | None, user: str | None, password: str | None, as_json: bool) -> None:
    """The mirrors of a running broker with their state, SnF depth and lag, then
    the mirrors other brokers run into it (`--json`: its own mirrors only; see
    `relaymq mirror incoming --json`)."""
    rows = mirrors(url, user, password)
    if as_json:
        listing(rows, LIST_COLUMNS, True, "")
        return
    try:
        into = incoming(url, user, password)
    except click.ClickException:  # a console without the listing: its own mirrors only
        into = []
    if rows or not into:
        listing(rows, LIST_COLUMNS, False, "no mirrors")
    if into:
        if rows:
            click.echo("")
        click.echo("incoming (mirrors of other brokers into this one):")
        listing(into, INCOMING_COLUMNS, False, "")


@mirror.command("incoming")
@remote_options
def mirror_incoming(url: str | None, user: str | None, password: str | None,
                    as_json: bool) -> None:
    """The mirrors other brokers run into this one: source broker, address,
    connected, events applied, duplicates dropped, last event and error."""
    listing(incoming(url, user, password), INCOMING_COLUMNS, as_json,
            "no incoming mirrors")


@mirror.command("status")
@click.argument("name")
@remote_options
def mirror_status(name: str, url: str | None, user: str | None, password: str | None,
                  as_json: bool) -> None:
    """One mirror's state, counts, target and last error."""
    row = _one(name, url, user, password)
    if as_json:
        click.echo(json.dumps(row, indent=2))
        return
    fields(row, STATUS_FIELDS)


def _action_command(action: str, doc: str) -> None:
    @mirror.command(action, help=doc)
    @click.argument("name")
    @remote_options
    def command(name: str, url: str | None, user: str | None, password: str | None,
                as_json: bool) -> None:
        _one(name, url, user, password)  # a connection without a mirror is not one of these
        call(url, user, password, "POST", _path(name, action), api="broker-connections API")
        row = _one(name, url, user, password)
        if as_json:
            click.echo(json.dumps(row, indent=2))
        else:
            click.echo(f"{name}: {row.get('state')}")


_action_command("start", "Start a mirror's connection (also one with auto-start=\"false\", "
                "or one whose reconnect attempts are used up).")
_action_command("stop", "Stop a mirror's connection; its SnF cursor keeps capturing, and the "
                "backlog is sent at the next start.")


@mirror.command(help="Copy the current state to the mirror's target.")
@click.argument("name")
@remote_options
def sync(name: str, url: str | None, user: str | None, password: str | None,
         as_json: bool) -> None:
    body = call(url, user, password, "POST", _path(name, "sync"), api="broker-connections API",
                timeout=600)
    results = body.get("result") or []
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    for res in results:
        click.echo(f"{name}: {res.get('destinations', 0)} destinations, "
                   f"{res.get('subscriptions', 0)} subscriptions, {res.get('messages', 0)} "
                   f"messages sent to {res.get('target')}")
