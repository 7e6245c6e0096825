"""``relaymq bridge list|status|start|stop|pause|resume``: the bridges of a running
broker, through its console's REST API (relaymq-console, ``/api/v1/bridges``).

Every command takes ``--url`` (default http://127.0.0.1:8161, env
RELAYMQ_CONSOLE_URL), ``--user``/``--password`` (env RELAYMQ_USER /
RELAYMQ_PASSWORD, a relaymq-auth user; changes need the console's admin group),
``--config`` (the admin CLI's TOML file, env RELAYMQ_CLI_CONFIG, else
~/.config/relaymq/cli.toml) and ``--json``. A refusal prints the console's error
and exits 1.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import click
from relaymq.cli_config import DEFAULT_URL, config_option, resolve

LIST_COLUMNS = ["name", "state", "quality_of_service", "forwarded", "failures", "retries",
                "last_error"]
STATUS_FIELDS = ["name", "state", "quality_of_service", "source", "target", "forwarded",
                 "acknowledged", "batches", "pending", "failures", "retries", "lost", "skipped",
                 "source_connection", "target_connection", "exactly_once_by", "last_error"]


def remote_options(f: Any) -> Any:
    """--url, --user, --password, --json and --config, as the admin CLI takes them."""
    f = click.option("--json", "as_json", is_flag=True, help="JSON output.")(f)
    f = click.option("--password", envvar="RELAYMQ_PASSWORD", help="Console password.")(f)
    f = click.option("--user", envvar="RELAYMQ_USER", help="Console user (relaymq-auth).")(f)
    f = click.option("--url", envvar="RELAYMQ_CONSOLE_URL",
                     help=f"The broker's console (relaymq-console; default {DEFAULT_URL}).")(f)
    return config_option(f)


def call(url: str | None, user: str | None, password: str | None, method: str, path: str) -> Any:
    """One request to the console, with the option > environment > config file
    precedence of `relaymq.cli_config`."""
    url, user, password = resolve(url, user, password)
    import httpx  # here, not at module level: `relaymq --help` imports this module

    auth = (user, password or "") if user else None
    try:
        with httpx.Client(base_url=url.rstrip("/"), auth=auth, timeout=30) as http:
            r = http.request(method, path)
    except httpx.HTTPError as exc:
        raise click.ClickException(f"cannot reach the console at {url}: {exc}") from exc
    try:
        data = r.json()
    except ValueError:
        data = None
    if r.status_code >= 400:
        message = data.get("error", r.text) if isinstance(data, dict) else r.text
        if r.status_code == 404 and data is None:
            message = f"{url} has no bridge API (is it a RelayMQ console?)"
        raise click.ClickException(f"{r.status_code}: {message}")
    if data is None:
        raise click.ClickException(f"{url} answered {path} with something that is not JSON")
    return data


def _table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def _path(name: str, action: str = "") -> str:
    return f"/api/v1/bridges/{quote(name, safe='')}" + (f"/{action}" if action else "")


def add_remote_commands(group: click.Group) -> None:
    @group.command("list")
    @remote_options
    def bridge_list(url: str | None, user: str | None, password: str | None, as_json: bool) -> None:
        """The bridges of a running broker with their state and counts."""
        items = call(url, user, password, "GET", "/api/v1/bridges")["items"]
        if as_json:
            click.echo(json.dumps(items, indent=2))
        elif not items:
            click.echo("no bridges")
        else:
            _table(items, LIST_COLUMNS)

    @group.command("status")
    @click.argument("name")
    @remote_options
    def bridge_status(name: str, url: str | None, user: str | None, password: str | None,
                      as_json: bool) -> None:
        """One bridge's state, counts, connections and last error."""
        info = call(url, user, password, "GET", _path(name))
        if as_json:
            click.echo(json.dumps(info, indent=2))
            return
        for key in STATUS_FIELDS:
            value = info.get(key)
            click.echo(f"{key}: {'' if value is None else value}")

    def action_command(action: str, doc: str) -> None:
        @group.command(action, help=doc)
        @click.argument("name")
        @remote_options
        def command(name: str, url: str | None, user: str | None, password: str | None,
                    as_json: bool) -> None:
            info = call(url, user, password, "POST", _path(name, action))
            if as_json:
                click.echo(json.dumps(info, indent=2))
            else:
                click.echo(f"{info['name']}: {info['state']}")

    action_command("start", "Start a bridge (also one with auto-start=\"false\", or failed).")
    action_command("stop", "Stop a bridge; it stays configured and may be started again.")
    action_command("pause", "Pause forwarding; consumed messages wait unacknowledged.")
    action_command("resume", "Resume a paused bridge.")
