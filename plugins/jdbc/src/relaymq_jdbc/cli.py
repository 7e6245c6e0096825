"""`relaymq jdbc inspect URL`: what a JDBC store holds, without starting a broker.

Per destination and durable subscription: stored messages, bytes, the last
sequence used and when the oldest stored message was sent; and who holds the
lease, or on PostgreSQL the row lock of a `<transaction-database-locker>`.
Read-only: it takes no lease and changes nothing.
"""

from __future__ import annotations

import json
import time
from typing import Any

import click

# SQLAlchemy (over a second to import on a loaded machine) is imported by the
# command that reads a store, not by `relaymq --help`, which imports this module.


def inspect_store(url: str, table_prefix: str = "") -> dict[str, Any]:
    import sqlalchemy as sa
    from relaymq.model.codec import decode_message

    from relaymq_jdbc.datasource import parse_url
    from relaymq_jdbc.engines import db_now_ms, read_only_engine
    from relaymq_jdbc.schema import make_schema

    schema = make_schema(table_prefix)
    engine = read_only_engine(parse_url(url))
    k, m, lk = schema.keys, schema.msgs, schema.lock
    try:
        with engine.connect() as conn:
            keys = []
            for r in conn.execute(sa.select(k).order_by(k.c.CONTAINER)):
                oldest = None
                if r.MSG_COUNT:
                    data = conn.execute(sa.select(m.c.MSG).where(m.c.CONTAINER == r.CONTAINER)
                                        .order_by(m.c.SEQ).limit(1)).scalar()
                    if data is not None:
                        ts = decode_message(bytes(data)).timestamp
                        oldest = ts or None
                keys.append({"key": r.CONTAINER, "declared": bool(r.DECLARED),
                             "messages": int(r.MSG_COUNT), "bytes": int(r.MSG_BYTES),
                             "last_seq": int(r.LAST_SEQ), "oldest_timestamp": oldest})
            lease = conn.execute(sa.select(lk.c.BROKER_NAME, lk.c.TIME - db_now_ms(
                engine.dialect.name)).where(lk.c.ID == 1)).first()
            row_lock = (row_lock_holder(conn, lk.name) if engine.dialect.name == "postgresql"
                        else None)
    finally:
        engine.dispose()
    holder = None
    if lease is not None and lease[0] and row_lock is None:
        holder = {"holder": lease[0], "expires_in_ms": int(lease[1])}
    return {"url": parse_url(url).render_as_string(hide_password=True), "keys": keys,
            "lease": holder, "row_lock": row_lock}


def row_lock_holder(conn: Any, table: str) -> dict[str, Any] | None:
    """Who holds `table`'s row lock as a `<transaction-database-locker>` master (PostgreSQL):
    a lock connection (named ``relaymq-lock:<holder>``) with a lock on that table in a
    transaction that is still open. Its uncommitted row is invisible to this reader,
    so the lease row alone would say the lock is free."""
    import sqlalchemy as sa

    from relaymq_jdbc.txlock import APP_PREFIX

    row = conn.execute(sa.text(
        "SELECT a.application_name, "
        "CAST(EXTRACT(EPOCH FROM clock_timestamp() - a.xact_start) * 1000 AS BIGINT) "
        "FROM pg_stat_activity a WHERE a.datname = current_database() "
        "AND a.application_name LIKE :app "
        "AND coalesce(a.state, '') <> 'idle in transaction (aborted)' "
        "AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.granted "
        "AND l.locktype = 'relation' AND l.relation = to_regclass(quote_ident(:table))) "
        "ORDER BY a.xact_start LIMIT 1"), {"app": APP_PREFIX + "%", "table": table}).first()
    if row is None:
        return None
    return {"holder": str(row[0]).removeprefix(APP_PREFIX),
            "held_for_ms": int(row[1]) if row[1] is not None else None}


def format_report(rep: dict[str, Any]) -> str:
    lines = [f"JDBC store {rep['url']}"]
    lease = rep["lease"]
    row_lock = rep.get("row_lock")
    if row_lock is not None:
        held = (f", for {row_lock['held_for_ms']} ms" if row_lock["held_for_ms"] is not None
                else "")
        lines.append(f"lock: held by {row_lock['holder']} (transaction-database-locker: a row "
                     f"lock in an open transaction{held})")
    elif lease is None:
        lines.append("lease: free")
    elif lease["expires_in_ms"] > 0:
        lines.append(f"lease: held by {lease['holder']} (ends in {lease['expires_in_ms']} ms)")
    else:
        lines.append(f"lease: expired (last held by {lease['holder']})")
    lines.append(f"{'destination':<50} {'messages':>10} {'bytes':>12} {'last seq':>10}  oldest")
    for r in rep["keys"]:
        oldest = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["oldest_timestamp"] / 1000))
                  if r["oldest_timestamp"] else "-")
        lines.append(f"{r['key']:<50} {r['messages']:>10} {r['bytes']:>12} {r['last_seq']:>10}  {oldest}")
    return "\n".join(lines)


@click.group(name="jdbc")
def jdbc() -> None:
    """Look into a JDBC (SQLite/PostgreSQL) store."""


@jdbc.command(name="inspect")
@click.argument("url")
@click.option("--table-prefix", default="", help="the store's tablePrefix")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def inspect_cmd(url: str, table_prefix: str, as_json: bool) -> None:
    """Per-destination counts, sizes, oldest message and the lease holder of URL
    (postgresql+psycopg://user@host/db or sqlite:///path)."""
    import sqlalchemy as sa

    from relaymq_jdbc.datasource import DataSourceError

    try:
        rep = inspect_store(url, table_prefix)
    except (DataSourceError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from None
    except sa.exc.SQLAlchemyError as exc:
        orig = getattr(exc, "orig", None) or exc
        raise click.ClickException(f"cannot read the store at {url}: "
                                   f"{str(orig).splitlines()[0]}") from None
    click.echo(json.dumps(rep, indent=2) if as_json else format_report(rep))


if __name__ == "__main__":  # pragma: no cover
    jdbc()
