"""A schema given by the reader's user (`.schema("sequence long, body binary")`)
picks the columns a reader builds.

Spark hands a Python data source the user's schema, and asks it for every column
of it; it does not pass a later `.select` down. So a job that names the few
columns it needs in `.schema(...)` saves building, handing over and converting
the others (the two 1 KiB body columns and the two maps cost the most). Each
named column must be one the source has, with the source's type; a wrong name
or type fails the job when it is planned, naming what the source offers.
"""

from __future__ import annotations

from typing import Any

#: the Spark SQL DDL type names as a `StructType` field prints them
_SIMPLE = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def ddl_columns(ddl: str) -> dict[str, str]:
    """`"a long, `b` map<string,string>"` -> {"a": "bigint", "b": "map<string,string>"}:
    each column of a DDL schema string with its type as `simpleString()` prints it."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(ddl):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(ddl[start:i])
            start = i + 1
    parts.append(ddl[start:])
    out: dict[str, str] = {}
    for part in parts:
        name, _, kind = part.strip().partition(" ")
        kind = kind.strip().lower()
        out[name.strip("`")] = _SIMPLE.get(kind, kind)
    return out


def check_projection(schema: Any, ddl: str, source: str) -> list[int]:
    """The positions, in the source's own schema `ddl`, of the columns of the
    `StructType` `schema` the job asked for; raises `ValueError` naming the source's
    columns when one is not among them or has another type."""
    offered = ddl_columns(ddl)
    names = list(offered)
    positions: list[int] = []
    for field in schema.fields:
        kind = offered.get(field.name)
        if kind is None:
            listing = ", ".join(f"{n} {t}" for n, t in offered.items())
            raise ValueError(f"{source}: the schema asks for column {field.name!r}, which this "
                             f"source does not have; its columns are: {listing}")
        given = field.dataType.simpleString()
        if given != kind:
            raise ValueError(f"{source}: column {field.name!r} is {kind} here, the schema asks "
                             f"for {given}")
        positions.append(names.index(field.name))
    return positions


def project_rows(rows: list[Any], positions: list[int], width: int) -> list[Any]:
    """Rows of the source's full schema (`width` columns) cut to `positions`
    (returned as they are when those are all the columns, in order)."""
    if len(positions) == width and positions == list(range(width)):
        return rows
    return [[row[p] for p in positions] for row in rows]
