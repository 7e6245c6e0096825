"""What the plugins' admin commands on a running broker share (``relaymq bridge
list``, ``relaymq mirror list`` ...): the options that say where the console is
(`cli_config`), one request to its REST API, and a plain table.

A command takes ``--url`` (default http://127.0.0.1:8161, env
RELAYMQ_CONSOLE_URL), ``--user``/``--password`` (env RELAYMQ_USER /
RELAYMQ_PASSWORD), ``--config`` (the admin CLI's TOML file) and ``--json``. A
refusal prints the console's error and exits 1.
"""

from __future__ import annotations

import json
from typing import Any

import click

from relaymq.cli_config import DEFAULT_URL, config_option, resolve


def remote_options(f: Any) -> Any:
    """--url, --user, --password, --json and --config, as the admin CLI takes them."""
    f = click.option("--json", "as_json", is_flag=True, help="JSON output.")(f)
    f = click.option("--password", envvar="RELAYMQ_PASSWORD", help="Console password.")(f)
    f = click.option("--user", envvar="RELAYMQ_USER", help="Console user (relaymq-auth).")(f)
    f = click.option("--url", envvar="RELAYMQ_CONSOLE_URL",
                     help=f"The broker's console (relaymq-console; default {DEFAULT_URL}).")(f)
    return config_option(f)


def call(url: str | None, user: str | None, password: str | None, method: str, path: str,
         *, api: str = "console API", timeout: float = 30) -> Any:
    """One request to the console, with the option > environment > config file
    precedence of `relaymq.cli_config`; `api` names what a console without the
    path lacks in the error."""
    url, user, password = resolve(url, user, password)
    import httpx  # here, not at module level: `relaymq --help` imports the commands

    auth = (user, password or "") if user else None
    try:
        with httpx.Client(base_url=url.rstrip("/"), auth=auth, timeout=timeout) as http:
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
            message = f"{url} has no {api} (is it a RelayMQ console?)"
        raise click.ClickException(f"{r.status_code}: {message}")
    if data is None:
        raise click.ClickException(f"{url} answered {path} with something that is not JSON")
    return data


def listing(rows: list[dict[str, Any]], columns: list[str], as_json: bool, none: str) -> None:
    """A list command's output: the rows as JSON, `none` when there are none, else
    a table of `columns`."""
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    elif not rows:
        click.echo(none)
    else:
        table(rows, columns)


def fields(info: dict[str, Any], keys: list[str]) -> None:
    """`key: value` lines of `info` in the order of `keys`; None is blank."""
    for key in keys:
        value = info.get(key)
        click.echo(f"{key}: {'' if value is None else value}")


def table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """`rows` as left-aligned columns under a header line; None is blank."""
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
