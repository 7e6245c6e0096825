"""``relaymq mirror sync NAME``: copy a running broker's current state (its
destinations, durable subscriptions and messages) to the target of its mirror
``NAME``, through the broker's console REST API (relaymq-console,
``POST /api/v1/broker-connections/NAME/sync``). Messages that existed before
the mirror was configured are not mirrored by themselves (as in Artemis); this
command is how to bring a new target up to date. The target drops what it
already holds (duplicate ids), so running it twice is harmless.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import click


@click.group(help="Mirrors (<mirror> in <amqp-connection>) of a running broker.")
def mirror() -> None:
    pass


@mirror.command(help="Copy the current state to the mirror's target.")
@click.argument("name")
@click.option("--url", envvar="RELAYMQ_CONSOLE_URL", default="http://127.0.0.1:8161",
              show_default=True, help="The broker's console (relaymq-console).")
@click.option("--user", envvar="RELAYMQ_USER", help="Console user (relaymq-auth).")
@click.option("--password", envvar="RELAYMQ_PASSWORD", help="Console password.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
def sync(name: str, url: str, user: str | None, password: str | None, as_json: bool) -> None:
    import httpx  # here, not at module level: `relaymq --help` imports this module

    auth = (user, password or "") if user else None
    try:
        with httpx.Client(base_url=url.rstrip("/"), auth=auth, timeout=600) as http:
            r = http.post(f"/api/v1/broker-connections/{quote(name, safe='')}/sync")
    except httpx.HTTPError as exc:
        raise click.ClickException(f"cannot reach the console at {url}: {exc}") from None
    try:
        body = r.json()
    except ValueError:
        body = {"error": r.text}
    if r.status_code >= 400:
        raise click.ClickException(str(body.get("error") or body))
    results = body.get("result") or []
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    for res in results:
        click.echo(f"{name}: {res.get('destinations', 0)} destinations, "
                   f"{res.get('subscriptions', 0)} subscriptions, {res.get('messages', 0)} "
                   f"messages sent to {res.get('target')}")
