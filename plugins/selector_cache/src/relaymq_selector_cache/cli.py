"""``relaymq selector-cache show FILE``: what a persisted selector cache holds.

ActiveMQ showed the cache over JMX; RelayMQ's file is JSON, and this command
reads it without changing it (a corrupt file is reported, not moved aside),
so it is safe to run against the file of a running broker.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from relaymq_selector_cache.cache import SelectorCache
from relaymq_selector_cache.storage import CorruptCache, read_cache


@click.group("selector-cache")
def selector_cache() -> None:
    """Inspect the virtualSelectorCacheBrokerPlugin's persistFile."""


@selector_cache.command("show")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the selectors as JSON.")
def show(file: Path, as_json: bool) -> None:
    """List the selectors remembered per consumer queue in FILE."""
    try:
        found = read_cache(file)
    except CorruptCache as exc:
        raise click.ClickException(f"{file} is not a usable selector cache: {exc}") from exc
    if found is None:
        raise click.ClickException(f"{file} does not exist")
    destinations, problems = found
    cache = SelectorCache()
    cache.load(destinations)
    if as_json:
        click.echo(json.dumps(cache.to_json(), indent=2, sort_keys=True))
    else:
        lines = cache.describe()
        click.echo(f"{file}: {len(cache)} selector(s) for {len(lines)} queue(s)")
        for line in lines:
            click.echo(f"  {line}")
    for problem in problems:
        click.echo(f"skipped: {problem}", err=True)
