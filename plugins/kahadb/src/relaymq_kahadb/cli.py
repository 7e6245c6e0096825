"""`relaymq kahadb ...`: commands the plugin adds to the `relaymq` CLI.

Registered through the entry-point group ``relaymq.cli``; also runnable as
``python -m relaymq_kahadb.cli``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from relaymq_kahadb.inspect import NotAKahaDBDirectory, format_report, inspect_store


@click.group(name="kahadb")
def kahadb() -> None:
    """Look into a KahaDB store directory."""


@kahadb.command(name="inspect")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--index-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where the index checkpoint lives, when indexDirectory is set")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--quick", is_flag=True,
              help="skip counting the records of every file (reads only the index and the "
                   "journal since the last checkpoint)")
def inspect_cmd(directory: Path, index_dir: Path | None, as_json: bool, quick: bool) -> None:
    """Explain every data file of the store in DIRECTORY: its size, what is live in
    it, which destination or subscription keeps it, and what cleanup will do.

    Read-only: safe on a running broker's directory (it shows a snapshot).
    """
    try:
        report = inspect_store(directory, index_dir=index_dir, scan_records=not quick)
    except NotAKahaDBDirectory as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        click.echo(format_report(report))


if __name__ == "__main__":  # pragma: no cover
    kahadb()
