"""``relaymq selector-cache show|forget FILE``: inspect and prune a persisted cache.

ActiveMQ showed and pruned the cache over JMX; RelayMQ's file is JSON. ``show``
reads it without changing it (a corrupt file is reported, not moved aside), so
it is safe against a running broker's file; ``forget`` rewrites it (atomically)
and is meant for a stopped broker.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from relaymq.model.destination import Destination

from relaymq_selector_cache.cache import SelectorCache
from relaymq_selector_cache.storage import CorruptCache, document, read_cache, write_atomic


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


@selector_cache.command("forget")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.argument("queue")
@click.option("--selector", "text", default=None, metavar="TEXT",
              help="Forget only this selector (exactly as shown); default: all of QUEUE's.")
def forget(file: Path, queue: str, text: str | None) -> None:
    """Remove remembered selectors of QUEUE (queue://NAME or NAME) from FILE.

    Selectors stay cached after their consumers leave; this is how an obsolete
    one goes (ActiveMQ's deleteSelectorForDestination over JMX). Stop the broker
    first: a running broker rewrites the file from its memory on its next change.
    """
    try:
        found = read_cache(file)
    except CorruptCache as exc:
        raise click.ClickException(f"{file} is not a usable selector cache: {exc}") from exc
    assert found is not None  # exists=True
    destinations, _problems = found
    cache = SelectorCache()
    cache.load(destinations)
    dest = Destination.parse(queue)
    if not cache.forget(dest, text):
        what = f"selector {text!r}" if text is not None else "selectors"
        raise click.ClickException(f"{file} has no {what} for {dest}")
    write_atomic(file, document(cache.to_json()))
    left = cache.entries(dest)
    click.echo(f"{dest}: " + (", ".join(e.text for e in left) if left else "nothing remembered"))
