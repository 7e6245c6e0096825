"""Turning management snapshots into JSON-ready dicts and safe previews."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from typing import Any

from relaymq.model.body_views import decoded_body
from relaymq.model.destination import Destination

PREVIEW_BYTES = 4096
#: the fields a destination listing sorts by (`-field`: descending)
SORTABLE = ("name", "depth", "enqueued", "dequeued", "dispatched", "in_flight", "expired",
            "dead_lettered", "consumers", "producers", "memory_used", "store_used", "duplicates",
            "replaced", "discarded")


def body_preview(body: bytes, limit: int = PREVIEW_BYTES) -> dict[str, Any]:
    """Text when the body is UTF-8, hex otherwise; at most `limit` bytes either way.
    The console shows it as text, never as HTML."""
    cut = body[:limit]
    try:
        text = cut.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(body) > limit and exc.start >= len(cut) - 3 and exc.reason == "unexpected end of data":
            # the cut split a character of a text body: end the preview before it
            return body_preview(body, exc.start)
        return {"encoding": "hex", "preview": cut.hex(" "), "size": len(body),
                "truncated": len(body) > limit}
    return {"encoding": "text", "preview": text, "size": len(body), "truncated": len(body) > limit}


def plain(value: Any) -> Any:
    """JSON-ready: dataclasses to dicts, bytes to previews, sets to lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, bytes):
        return body_preview(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def message_view(info: Any) -> dict[str, Any]:
    out = plain(info)
    decoded, value = decoded_body(getattr(info, "body_type", ""), info.body)
    out["body"] = value_preview(value, len(info.body)) if decoded else body_preview(info.body)
    return out


def value_preview(value: Any, size: int, limit: int = PREVIEW_BYTES) -> dict[str, Any]:
    """A body that encodes a value (an AMQP map, list, number) as JSON text; binary
    parts as hex, other types (timestamps, UUIDs, symbols) as their text."""
    text = json.dumps(_jsonable(value), ensure_ascii=False)
    return {"encoding": "json", "preview": text[:limit], "size": size,
            "truncated": len(text) > limit}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(_jsonable(k)): _jsonable(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex(" ")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    described = getattr(value, "descriptor", None)
    if described is not None and hasattr(value, "value"):
        return {"descriptor": _jsonable(described), "value": _jsonable(value.value)}
    return str(value)


def visible_only(items: list[Any], visible: Callable[[Destination], bool] | None,
                 key: str = "key") -> list[Any]:
    """The items whose destination (the key in attribute `key`) `visible` lets
    through; all of them when it is None."""
    if visible is None:
        return items
    return [i for i in items if visible(Destination.parse(getattr(i, key)))]


def connections_seen(items: list[Any], user: str,
                     visible: Callable[[Destination], bool] | None) -> list[Any]:
    """Connections for a user whose view the map narrows (`visible` not None):
    their own only. A connection is not a destination the map could grant."""
    return items if visible is None else [c for c in items if c.user == user]


def page_of(items: list[Any], *, filter_text: str | None, sort: str | None, page: int,
            size: int) -> dict[str, Any]:
    """Filter by name substring, sort by a field (`-field` descending), one page."""
    rows = [i for i in items if not filter_text or filter_text.lower() in i.name.lower()]
    if sort:
        key = sort[1:] if sort.startswith("-") else sort
        if key not in SORTABLE:
            raise ValueError(f"cannot sort by '{key}' (one of {', '.join(SORTABLE)})")
        rows.sort(key=lambda r: getattr(r, key), reverse=sort.startswith("-"))
    size = max(1, min(size, 1000))
    page = max(1, page)
    total = len(rows)
    chunk = rows[(page - 1) * size: page * size]
    return {"total": total, "page": page, "size": size, "items": [plain(r) for r in chunk]}
