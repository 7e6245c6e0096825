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
from relaymq.cli_remote import call as remote_call
from relaymq.cli_remote import fields, listing, remote_options

LIST_COLUMNS = ["name", "state", "quality_of_service", "forwarded", "failures", "retries",
                "last_error"]
STATUS_FIELDS = ["name", "state", "quality_of_service", "source", "target", "forwarded",
                 "acknowledged", "batches", "pending", "failures", "retries", "lost", "skipped",
                 "source_connection", "target_connection", "exactly_once_by", "last_error"]


def call(url: str | None, user: str | None, password: str | None, method: str, path: str) -> Any:
    return remote_call(url, user, password, method, path, api="bridge API")


def _path(name: str, action: str = "") -> str:
    return f"/api/v1/bridges/{quote(name, safe='')}" + (f"/{action}" if action else "")


def add_remote_commands(group: click.Group) -> None:
    @group.command("list")
    @remote_options
    def bridge_list(url: str | None, user: str | None, password: str | None, as_json: bool) -> None:
        """The bridges of a running broker with their state and counts."""
        items = call(url, user, password, "GET", "/api/v1/bridges")["items"]
        listing(items, LIST_COLUMNS, as_json, "no bridges")

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
        fields(info, STATUS_FIELDS)

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
