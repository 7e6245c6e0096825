"""Admin commands on a running broker's console REST API (`relaymq queue ...`).

```
relaymq queue list|stat NAME|browse NAME|purge NAME|move NAME --to Q|delete NAME
relaymq dlq retry [NAME] [--selector S]
relaymq connection list|close ID
relaymq dstat
```
Every command takes `--url` (default http://127.0.0.1:8161, env RELAYMQ_CONSOLE_URL),
`--user`/`--password` (env RELAYMQ_USER / RELAYMQ_PASSWORD), `--config FILE` (TOML with
url, user, password; see cli_config) and `--json`.
"""

from __future__ import annotations

import json
import sys
from typing import Any
from urllib.parse import quote

import click
from relaymq.cli_remote import remote_options

from relaymq_console.cli_config import resolve

#: how long the commands that work through a whole queue (purge, move, DLQ retry)
#: wait for the broker's answer by default; `--timeout` changes it
LONG_TIMEOUT = 600.0


class ConsoleClient:
    def __init__(self, url: str, user: str | None, password: str | None,
                 timeout: float = 30) -> None:
        import httpx  # here, not at module level: `relaymq --help` imports this module

        auth = (user, password or "") if user else None
        self.timeout = timeout
        self.http = httpx.Client(base_url=url.rstrip("/"), auth=auth, timeout=timeout)

    def call(self, method: str, path: str, **kw: Any) -> Any:
        import httpx

        try:
            r = self.http.request(method, path, **kw)
        except httpx.ReadTimeout as exc:
            raise click.ClickException(
                f"no answer from {self.http.base_url} within {self.timeout:g} s; the broker "
                "goes on with the request (a purge, move or retry of a large queue takes "
                "time): `relaymq queue stat NAME` shows where it is, and --timeout waits "
                "longer") from exc
        except httpx.HTTPError as exc:
            raise click.ClickException(f"cannot reach the console at {self.http.base_url}: {exc}") from exc
        if r.status_code >= 400:
            try:
                message = r.json().get("error", r.text)
            except ValueError:
                message = r.text
            raise click.ClickException(f"{r.status_code}: {message}")
        return r.json()


def _client(url: str | None, user: str | None, password: str | None,
            timeout: float = 30) -> ConsoleClient:
    return ConsoleClient(*resolve(url, user, password), timeout=timeout)


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max([len(c)] + [len(str(r.get(c, ""))) for r in rows]) for c in columns}
    click.echo("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        click.echo("  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns))


def _out(data: Any, as_json: bool, rows: list[dict[str, Any]] | None = None,
         columns: list[str] | None = None) -> None:
    if as_json or rows is None or columns is None:
        click.echo(json.dumps(data, indent=2))
    else:
        _table(rows, columns)


def _all_queues(c: ConsoleClient) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    page = 1
    while True:
        data = c.call("GET", "/api/v1/queues", params={"page": page, "size": 1000, "sort": "name"})
        items += data["items"]
        if len(items) >= data["total"] or not data["items"]:
            return items
        page += 1


QUEUE_COLUMNS = ["name", "depth", "consumers", "enqueued", "dequeued", "in_flight", "expired"]


@click.group()
def queue() -> None:
    """Queues of a running broker."""


@queue.command("list")
@remote_options
def queue_list(url: str, user: str | None, password: str | None, as_json: bool) -> None:
    """Every queue with its statistics."""
    rows = _all_queues(_client(url, user, password))
    _out(rows, as_json, rows, QUEUE_COLUMNS)


@queue.command("stat")
@click.argument("name")
@remote_options
def queue_stat(name: str, url: str, user: str | None, password: str | None, as_json: bool) -> None:
    """One queue's statistics and consumers."""
    data = _client(url, user, password).call("GET", f"/api/v1/queues/{quote(name, safe='')}")
    if as_json:
        _out(data, True)
        return
    for k in QUEUE_COLUMNS + ["dead_lettered", "replaced", "discarded", "queue_type", "paused"]:
        click.echo(f"{k}: {data.get(k)}")


@queue.command("browse")
@click.argument("name")
@click.option("--limit", default=20, show_default=True)
@click.option("--selector")
@remote_options
def queue_browse(name: str, limit: int, selector: str | None, url: str, user: str | None,
                 password: str | None, as_json: bool) -> None:
    """Messages of a queue (from the store), without consuming them."""
    params: dict[str, Any] = {"limit": limit}
    if selector:
        params["selector"] = selector
    data = _client(url, user, password).call(
        "GET", f"/api/v1/queues/{quote(name, safe='')}/messages", params=params)
    rows = [{"seq": m["seq"], "message_id": m["message_id"], "body": m["body"]["preview"][:60]}
            for m in data["messages"]]
    _out(data, as_json, rows, ["seq", "message_id", "body"])


def _post(url: str, user: str | None, password: str | None, path: str,
          body: dict[str, Any] | None = None, timeout: float = 30) -> Any:
    return _client(url, user, password, timeout).call("POST", path, json=body or {})


def _with_note(line: str, data: dict[str, Any]) -> str:
    """What a move or retry did, and what it left where it was and why."""
    return f"{line}; {data['note']}" if data.get("note") else line


def _long(f: Any) -> Any:
    """`--timeout` of a command that works through a whole queue."""
    return click.option("--timeout", type=float, default=LONG_TIMEOUT, show_default=True,
                        help="Seconds to wait for the broker's answer; it goes on with "
                             "the request after that.")(f)


@queue.command("purge")
@click.argument("name")
@_long
@remote_options
def queue_purge(name: str, timeout: float, url: str, user: str | None, password: str | None,
                as_json: bool) -> None:
    """Remove every waiting message."""
    data = _post(url, user, password, f"/api/v1/queues/{quote(name, safe='')}/purge",
                 timeout=timeout)
    _out(data, as_json) if as_json else click.echo(f"purged {data['removed']} messages")


@queue.command("move")
@click.argument("name")
@click.option("--to", required=True, help="Target queue.")
@click.option("--selector", default="JMSMessageID IS NOT NULL", show_default=True)
@_long
@remote_options
def queue_move(name: str, to: str, selector: str, timeout: float, url: str, user: str | None,
               password: str | None, as_json: bool) -> None:
    """Move messages (by selector) to another queue."""
    data = _post(url, user, password, f"/api/v1/queues/{quote(name, safe='')}/move",
                 {"to": to, "selector": selector}, timeout=timeout)
    _out(data, as_json) if as_json else click.echo(_with_note(f"moved {data['moved']} messages to {to}",
                                                              data))


@queue.command("delete")
@click.argument("name")
@remote_options
def queue_delete(name: str, url: str, user: str | None, password: str | None, as_json: bool) -> None:
    """Delete a queue and its messages."""
    data = _client(url, user, password).call("DELETE", f"/api/v1/queues/{quote(name, safe='')}")
    _out(data, as_json) if as_json else click.echo(f"deleted {name}: {data['deleted']}")


@click.group()
def dlq() -> None:
    """Dead-letter queues."""


@dlq.command("retry")
@click.argument("name", default="ActiveMQ.DLQ")
@click.option("--selector", default="JMSMessageID IS NOT NULL", show_default=True)
@_long
@remote_options
def dlq_retry(name: str, selector: str, timeout: float, url: str, user: str | None,
              password: str | None, as_json: bool) -> None:
    """Send dead-lettered messages back to their original destinations."""
    data = _post(url, user, password, f"/api/v1/queues/{quote(name, safe='')}/retry",
                 {"selector": selector}, timeout=timeout)
    _out(data, as_json) if as_json else click.echo(_with_note(f"retried {data['retried']} messages",
                                                              data))


@click.group()
def connection() -> None:
    """Client connections."""


@connection.command("list")
@remote_options
def connection_list(url: str, user: str | None, password: str | None, as_json: bool) -> None:
    """Open client connections."""
    data = _client(url, user, password).call("GET", "/api/v1/connections")
    _out(data, as_json, data["items"], ["id", "client_id", "user", "transport",
                                        "remote_address", "consumers", "producers"])


@connection.command("close")
@click.argument("connection_id")
@remote_options
def connection_close(connection_id: str, url: str, user: str | None, password: str | None,
                     as_json: bool) -> None:
    """Close one connection."""
    data = _client(url, user, password).call(
        "DELETE", f"/api/v1/connections/{quote(connection_id, safe='')}")
    _out(data, as_json) if as_json else click.echo(f"closed {connection_id}")


@click.command()
@remote_options
def dstat(url: str, user: str | None, password: str | None, as_json: bool) -> None:
    """Destination statistics, like `activemq dstat`."""
    client = _client(url, user, password)
    rows = _all_queues(client)
    # ActiveMQ's MemoryPercentUsage: the destination's memory against its limit (the
    # broker's memoryUsage unless a policy sets one)
    limit = int(client.call("GET", "/api/v1/broker").get("memory_limit") or 0)
    table = [{"Name": r["name"], "Queue Size": r["depth"], "Producer #": r["producers"],
              "Consumer #": r["consumers"], "Enqueue #": r["enqueued"],
              "Dequeue #": r["dequeued"],
              "Memory %": round(100 * r["memory_used"] / limit) if limit else 0} for r in rows]
    _out(rows, as_json, table, ["Name", "Queue Size", "Producer #", "Consumer #", "Enqueue #",
                                "Dequeue #", "Memory %"])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(queue())
