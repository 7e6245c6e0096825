"""The tables: ActiveMQ's names and columns, plus what RelayMQ needs beyond them.

* ``ACTIVEMQ_MSGS`` — one row per stored message copy. ActiveMQ's columns
  (``ID``, ``CONTAINER``, ``MSGID_PROD``, ``MSGID_SEQ``, ``EXPIRATION``, ``MSG``,
  ``PRIORITY``, ``XID``) and ``SEQ``, the per-destination sequence number the
  kernel assigns (reads page by ``CONTAINER, SEQ``). ``MSG`` holds the kernel's
  stored form of the message (`relaymq.model.codec`): the bytes received, never
  executable serialization.
* ``ACTIVEMQ_ACKS`` — one row per durable subscription (ActiveMQ's columns;
  ``SUB_DEST`` holds RelayMQ's subscription key, ``LAST_ACKED_ID`` its last sequence).
* ``ACTIVEMQ_LOCK`` — the lease row (``ID`` 1) of the master broker.
* ``RELAYMQ_KEYS`` — per destination / subscription key: declared or not, the
  last sequence ever used, live message count and bytes (kept in the same
  transaction as the rows, so statistics need no table scan), subscription options.
* ``RELAYMQ_DUPLICATE_IDS`` — duplicate-detection ids (``_AMQ_DUPL_ID``) per
  address, written in the transaction of the message that carried them.
* ``RELAYMQ_SCHEMA`` — the schema version, checked and upgraded at start.

Every name takes the configured ``tablePrefix``.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from relaymq.spi.persistence import KeyUnit

#: 1: the first; 2: the EXPIRATION index is partial (rows that expire only)
SCHEMA_VERSION = 2
#: the width of the key and name columns, `VARCHAR(250)` (ActiveMQ's)
NAME_LEN = 250
#: what `VARCHAR(NAME_LEN)` counts on each database. PostgreSQL counts characters,
#: in every server encoding. SQLite enforces no width at all: keys are held to the
#: declared one, in characters, so that a name fits both databases alike.
KEY_UNITS = {"postgresql": KeyUnit.CHARACTERS, "sqlite": KeyUnit.CHARACTERS}


def key_limit(backend: str) -> tuple[int, str]:
    """The longest key the store holds on database `backend` (a SQLAlchemy backend
    name), and what that length counts: `NAME_LEN` in the unit the database counts
    `VARCHAR(n)` in (bytes for a database not known to count characters)."""
    return NAME_LEN, KEY_UNITS.get(backend, KeyUnit.BYTES)

#: An INTEGER PRIMARY KEY is SQLite's rowid (no second index); BIGINT elsewhere.
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


@dataclass(frozen=True, slots=True)
class Schema:
    metadata: sa.MetaData
    msgs: sa.Table
    acks: sa.Table
    lock: sa.Table
    keys: sa.Table
    dups: sa.Table
    version: sa.Table

    @property
    def tables(self) -> list[sa.Table]:
        return [self.msgs, self.acks, self.lock, self.keys, self.dups, self.version]


def make_schema(prefix: str = "") -> Schema:
    md = sa.MetaData()
    p = prefix
    msgs = sa.Table(
        f"{p}ACTIVEMQ_MSGS", md,
        sa.Column("ID", _ID, primary_key=True, autoincrement=False),
        sa.Column("CONTAINER", sa.String(NAME_LEN), nullable=False),
        sa.Column("SEQ", sa.BigInteger, nullable=False),
        sa.Column("MSGID_PROD", sa.String(NAME_LEN)),
        sa.Column("MSGID_SEQ", sa.BigInteger),
        sa.Column("EXPIRATION", sa.BigInteger),
        sa.Column("MSG", sa.LargeBinary),
        sa.Column("PRIORITY", sa.BigInteger),
        sa.Column("XID", sa.String(NAME_LEN)),
        sa.Index(f"{p}ACTIVEMQ_MSGS_CSEQ", "CONTAINER", "SEQ", unique=True),
    )
    # Only rows that expire are in the EXPIRATION index (the expiry sweep asks for
    # `EXPIRATION > 0`): most messages never expire, and each of them would cost an
    # index entry written and deleted for nothing.
    expires = msgs.c.EXPIRATION > 0
    sa.Index(f"{p}ACTIVEMQ_MSGS_EIDX", msgs.c.EXPIRATION, sqlite_where=expires,
             postgresql_where=expires)
    acks = sa.Table(
        f"{p}ACTIVEMQ_ACKS", md,
        sa.Column("CONTAINER", sa.String(NAME_LEN), nullable=False),
        sa.Column("SUB_DEST", sa.String(NAME_LEN)),
        sa.Column("CLIENT_ID", sa.String(NAME_LEN), nullable=False),
        sa.Column("SUB_NAME", sa.String(NAME_LEN), nullable=False),
        sa.Column("SELECTOR", sa.Text),
        sa.Column("LAST_ACKED_ID", sa.BigInteger),
        sa.Column("PRIORITY", sa.BigInteger, nullable=False, server_default="5"),
        sa.Column("XID", sa.String(NAME_LEN)),
        sa.PrimaryKeyConstraint("CONTAINER", "CLIENT_ID", "SUB_NAME", "PRIORITY"),
        sa.Index(f"{p}ACTIVEMQ_ACKS_XIDX", "XID"),
    )
    lock = sa.Table(
        f"{p}ACTIVEMQ_LOCK", md,
        sa.Column("ID", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("TIME", sa.BigInteger),
        sa.Column("BROKER_NAME", sa.String(NAME_LEN)),
    )
    keys = sa.Table(
        f"{p}RELAYMQ_KEYS", md,
        sa.Column("CONTAINER", sa.String(NAME_LEN), primary_key=True),
        sa.Column("DECLARED", sa.Boolean, nullable=False, default=False),
        sa.Column("LAST_SEQ", sa.BigInteger, nullable=False, default=0),
        sa.Column("MSG_COUNT", sa.BigInteger, nullable=False, default=0),
        sa.Column("MSG_BYTES", sa.BigInteger, nullable=False, default=0),
        sa.Column("SUB_OPTIONS", sa.Text),
    )
    dups = sa.Table(
        f"{p}RELAYMQ_DUPLICATE_IDS", md,
        sa.Column("ADDRESS", sa.String(NAME_LEN), primary_key=True),
        sa.Column("SEQ", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("DUP_ID", sa.LargeBinary, nullable=False),
    )
    version = sa.Table(
        f"{p}RELAYMQ_SCHEMA", md,
        sa.Column("NAME", sa.String(64), primary_key=True),
        sa.Column("VERSION", sa.Integer, nullable=False),
    )
    return Schema(md, msgs, acks, lock, keys, dups, version)


class SchemaError(RuntimeError):
    """The database holds tables RelayMQ cannot use (another program's, or newer)."""


def prepare(engine: sa.Engine, schema: Schema, create: bool) -> None:
    """Create missing tables (with `create`), then check that every table has the
    columns RelayMQ uses and that the schema version is one it knows."""
    if create:
        schema.metadata.create_all(engine, checkfirst=True)
    insp = sa.inspect(engine)
    have = {n.lower(): n for n in insp.get_table_names()}
    for table in schema.tables:
        found = have.get(table.name.lower())
        if found is None:
            raise SchemaError(
                f"table {table.name} does not exist in {engine.url.render_as_string()} and "
                "createTablesOnStartup is false; start one broker once with "
                "createTablesOnStartup=\"true\" (the default) to create it")
        cols = {c["name"].lower() for c in insp.get_columns(found)}
        missing = [c.name for c in table.columns if c.name.lower() not in cols]
        if missing:
            raise SchemaError(
                f"table {found} lacks the column(s) {', '.join(missing)}: it was made by another "
                "program (ActiveMQ's own JDBC store?) or an incompatible version; give RelayMQ "
                "its own database or a tablePrefix")
    with engine.begin() as conn:
        v = conn.execute(sa.select(schema.version.c.VERSION)
                         .where(schema.version.c.NAME == "relaymq")).scalar()
        if v is None:
            conn.execute(schema.version.insert().values(NAME="relaymq", VERSION=SCHEMA_VERSION))
        elif v > SCHEMA_VERSION:
            raise SchemaError(
                f"the tables were written by a newer RelayMQ (schema version {v}; this one "
                f"knows {SCHEMA_VERSION}); upgrade relaymq-jdbc")
        elif v < SCHEMA_VERSION:
            upgrade(conn, schema, v)
            conn.execute(schema.version.update().where(schema.version.c.NAME == "relaymq")
                         .values(VERSION=SCHEMA_VERSION))


def upgrade(conn: sa.Connection, schema: Schema, version: int) -> None:
    """Bring tables of schema `version` to SCHEMA_VERSION (in the start's transaction)."""
    if version < 2:  # the EXPIRATION index becomes partial
        (index,) = [i for i in schema.msgs.indexes if i.name and i.name.endswith("_EIDX")]
        index.drop(conn, checkfirst=True)
        index.create(conn)
