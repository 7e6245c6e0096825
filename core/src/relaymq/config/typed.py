"""Typed conversion of config elements into dataclasses: `convert(Config, element)`.

ActiveMQ configuration is strings: `queuePrefetch="100"`, `limit="64 mb"`,
`persistent="false"`. Plugins and the kernel want typed objects, validated
*before* anything is constructed, with errors that point at file:line. This
module is the one place that does it, for the kernel's own config model and for
every plugin's ``Config`` dataclass (the registry calls `convert` for plugins
without ``from_element``), so plugin authors get the same rules and messages.

Rules, in brief (docs/plugin-author-guide.md has the long form):

* an attribute maps to the field whose snake_case name it spells in camelCase
  (``queuePrefetch`` -> ``queue_prefetch``, ``inactiveTimoutBeforeGC`` ->
  ``inactive_timout_before_gc``) or kebab-case (Artemis: ``retry-interval``);
* ``int``, ``float``, ``bool`` (true/false, yes/no, on/off), ``str``, ``Path``,
  ``Literal[...]``, enums, ``X | None`` and ``list[X]`` (comma separated) are
  understood; an ``int`` field marked as bytes (``field(metadata=BYTES)``,
  ``Annotated[int, Bytes]``, or an ActiveMQ size name such as ``memoryLimit``)
  also takes sizes: ``64 mb``, ``1 gb``, ``32mb``, ``1024``;
* a child element fills a field of dataclass type (``<child>`` -> ``child``), a
  ``list[Dataclass]`` field is filled from a wrapper element's children
  (``<entries><entry/>...</entries>``), and ``PluginElement`` fields keep the raw
  subtree;
* a field named ``origin`` of type `Origin` receives the element's file:line, and
  a ``dict`` field named ``extra`` receives attributes it does not know (they are
  still warned about);
* unknown attributes and children are warnings (errors under ``strict``); bad
  values and missing required attributes are errors naming file:line.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import re
import types
import typing
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union

from relaymq.config.model import PluginElement
from relaymq.config.report import Report, at
from relaymq.errors import ConfigError

T = TypeVar("T")


class Bytes:
    """Marker: ``Annotated[int, Bytes]`` accepts sizes such as ``64 mb``."""


#: Field metadata that marks an ``int`` field as a size in bytes:
#: ``limit: int = field(default=0, metadata=BYTES)``.
BYTES: Mapping[str, Any] = types.MappingProxyType({"unit": "bytes"})

#: ActiveMQ attributes that are sizes in bytes wherever they appear, so the
#: kernel's model (and plugins mirroring ActiveMQ names) need no marker for them.
SIZE_FIELD_NAMES = frozenset(
    {
        "limit",
        "memory_limit",
        "journal_max_file_length",
        "max_file_length",
        "journal_max_write_batch_size",
        "write_batch_size",
        "max_frame_size",
        "cursor_memory_high_water_mark_bytes",
        "store_cursor_memory_limit",
    }
)

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}  # fmt: skip
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


# ---------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------


def camel_to_snake(name: str) -> str:
    """``queuePrefetch`` -> ``queue_prefetch``; ``inactiveTimoutBeforeGC`` ->
    ``inactive_timout_before_gc``; ``retry-interval`` -> ``retry_interval``."""
    name = name.replace("-", "_").replace(".", "_")
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    name = re.sub(r"(?<=[A-Z])([A-Z])(?=[a-z])", r"_\1", name)
    return name.lower()


def snake_to_camel(name: str) -> str:
    """``queue_prefetch`` -> ``queuePrefetch`` (the spelling users write in XML)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


#: ActiveMQ spellings camelCase cannot produce (acronyms); any spelling that maps
#: to the same snake_case name is accepted on input, these are what docs show.
ACTIVEMQ_SPELLINGS = {"inactive_timout_before_gc": "inactiveTimoutBeforeGC"}


def attribute_name(f: dataclasses.Field[Any]) -> str:
    """The XML attribute spelling of a field: its ``xml`` metadata or camelCase."""
    return str(f.metadata.get("xml") or ACTIVEMQ_SPELLINGS.get(f.name) or snake_to_camel(f.name))


def attribute_names(config_cls: type) -> list[str]:
    """The attribute spellings `convert` accepts for ``config_cls`` (for docs); fields
    filled from child elements (dataclasses, lists of them) are not attributes."""
    hints = typing.get_type_hints(config_cls, include_extras=True)
    return [
        attribute_name(f) for f in _settable_fields(config_cls)
        if _dataclass_of(hints[f.name]) is None and _list_item_of(hints[f.name]) is None
        or _list_item_of(hints[f.name]) in (str, int, float)
    ]


# ---------------------------------------------------------------------------
# Scalars
# ---------------------------------------------------------------------------


def parse_size(raw: str | int) -> int:
    """``"64 mb"`` -> 67108864. Units are binary, as in ActiveMQ (1 kb = 1024)."""
    if isinstance(raw, bool):
        raise ValueError("expected a size such as 64 mb, 1 gb or 1048576")
    if isinstance(raw, int):
        return raw
    m = _SIZE_RE.match(str(raw))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _SIZE_UNITS:
        raise ValueError("expected a size such as 64 mb, 1 gb or 1048576")
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def parse_bool(raw: str | bool) -> bool:
    if isinstance(raw, bool):
        return raw
    value = str(raw).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("expected true or false")


def parse_int(raw: str | int) -> int:
    if isinstance(raw, bool):
        raise ValueError("expected an integer")
    if isinstance(raw, int):
        return raw
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError("expected an integer") from None


def parse_float(raw: str | float) -> float:
    try:
        return float(str(raw).strip())
    except ValueError:
        raise ValueError("expected a number") from None


def coerce(tp: Any, raw: Any, *, size: bool = False) -> Any:
    """Convert one raw value (normally a string) to the annotated type ``tp``.

    Raises ValueError with a short "expected ..." reason on a bad value.
    """
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        return coerce(base, raw, size=size or any(e is Bytes for e in extras))
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if raw is None or (isinstance(raw, str) and not raw.strip() and str not in args):
            if len(args) < len(typing.get_args(tp)):
                return None
        errors = []
        for arg in args:
            try:
                return coerce(arg, raw, size=size)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(" or ".join(dict.fromkeys(errors)))
    if origin is Literal:
        choices = typing.get_args(tp)
        for choice in choices:
            if str(choice) == str(raw).strip():
                return choice
        raise ValueError("expected one of " + ", ".join(str(c) for c in choices))
    if origin in (list, tuple, set, frozenset):
        (item_tp, *_) = typing.get_args(tp) or (str,)
        items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
        values = [coerce(item_tp, item.strip() if isinstance(item, str) else item, size=size)
                  for item in items if not (isinstance(item, str) and not item.strip())]
        return origin(values)
    if tp is bool:
        return parse_bool(raw)
    if tp is int:
        return parse_size(raw) if size else parse_int(raw)
    if tp is float:
        return parse_float(raw)
    if tp is str:
        return raw if isinstance(raw, str) else str(raw)
    if tp is Path:
        return Path(str(raw))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        text = str(raw).strip()
        for member in tp:
            if text.lower() in (str(member.value).lower(), member.name.lower()):
                return member
        raise ValueError("expected one of " + ", ".join(str(m.value) for m in tp))
    if tp is Any or tp is object:
        return raw
    raise ValueError(f"RelayMQ cannot convert a value to {tp!r}")


# ---------------------------------------------------------------------------
# Dataclasses
# ---------------------------------------------------------------------------


def _settable_fields(config_cls: type) -> list[dataclasses.Field[Any]]:
    return [
        f for f in dataclasses.fields(config_cls)
        if f.init and f.name not in ("origin", "extra") and f.metadata.get("attribute", True)
    ]


def _is_size_field(f: dataclasses.Field[Any]) -> bool:
    return f.metadata.get("unit") == "bytes" or f.name in SIZE_FIELD_NAMES


def _dataclass_of(tp: Any) -> type | None:
    """The dataclass a field holds (``X`` or ``X | None``), or None."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = inner[0] if len(inner) == 1 else None
    if tp is PluginElement:  # a dataclass too, but kept raw
        return None
    return tp if isinstance(tp, type) and dataclasses.is_dataclass(tp) else None


def _list_item_of(tp: Any) -> Any:
    if typing.get_origin(tp) is list:
        args = typing.get_args(tp)
        return args[0] if args else None
    return None


def _element_name(element: PluginElement, config_cls: type) -> str:
    return element.tag or config_cls.__name__


def suggest(name: str, known: Collection[str]) -> str:
    """`'; did you mean queuePrefetch?'` for a likely typo, else nothing."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f"; did you mean {close[0]}?" if close else ""


def as_element(source: PluginElement | Mapping[str, Any], tag: str = "") -> PluginElement:
    """Accept a plain mapping (tests, programmatic config) wherever an element goes."""
    if isinstance(source, PluginElement):
        return source
    attrs: dict[str, str] = {}
    children: list[PluginElement] = []
    for key, value in source.items():
        if isinstance(value, Mapping):
            children.append(as_element(value, key))
        elif isinstance(value, list) and all(isinstance(v, Mapping) for v in value):
            children.append(
                PluginElement(key, children=[as_element(body, k) for v in value for k, body in v.items()])
            )
        else:
            attrs[key] = value
    return PluginElement(tag, attrs, children)  # type: ignore[arg-type]


def convert(
    config_cls: type[T],
    element: PluginElement | Mapping[str, Any],
    *,
    strict: bool = False,
    report: Report | None = None,
    ignore: Collection[str] = (),
) -> T:
    """Build ``config_cls`` (a dataclass) from an element's attributes and children.

    :param config_cls: the dataclass to build, e.g. a plugin's ``Config``.
    :param element: the configured element (a `PluginElement`) or a plain mapping.
    :param strict: unknown attributes/children are errors instead of warnings.
    :param report: where warnings go (the loader's report); by default they are logged.
    :param ignore: attribute or child names the caller handles itself.
    :raises ConfigError: listing every bad value and missing required attribute.
    """
    if not dataclasses.is_dataclass(config_cls):
        raise TypeError(f"convert() needs a dataclass, not {config_cls!r}")
    el = as_element(element)
    own = report if report is not None else Report(strict=strict)
    errors: list[str] = []
    name = _element_name(el, config_cls)
    where = at(el.origin)
    hints = typing.get_type_hints(config_cls, include_extras=True)
    fields = _settable_fields(config_cls)
    by_key = {camel_to_snake(attribute_name(f)): f for f in fields}
    by_key.update({f.name: f for f in fields})
    known_attrs = [attribute_name(f) for f in fields]
    all_fields = {f.name for f in dataclasses.fields(config_cls)}
    values: dict[str, Any] = {}
    extra: dict[str, str] = {}

    for attr, raw in el.attributes.items():
        if attr in ignore:
            continue
        f = by_key.get(camel_to_snake(attr))
        if f is None or _dataclass_of(hints[f.name]) or _list_item_of(hints[f.name]) is PluginElement:
            extra[attr] = raw
            # kebab-case attributes (Artemis' <amqp-connection>, <bridge>) get kebab-case advice
            spelled = [camel_to_snake(k).replace("_", "-") for k in known_attrs] if "-" in attr \
                else known_attrs
            own.warn(
                f"<{name}>{where}: attribute '{attr}' is ignored: RelayMQ does not support it"
                f"{suggest(attr, spelled)}"
            )
            continue
        try:
            values[f.name] = coerce(hints[f.name], raw, size=_is_size_field(f))
        except ValueError as exc:
            errors.append(f"<{name} {attr}=\"{raw}\">{where}: {exc}")

    for child in el.children:
        if child.tag in ignore:
            continue
        f = by_key.get(camel_to_snake(child.tag))
        tp = hints[f.name] if f is not None else None
        try:
            if tp is not None and (nested := _dataclass_of(tp)) is not None:
                values[f.name] = convert(nested, child, report=own)  # type: ignore[union-attr]
            elif tp is not None and (item := _list_item_of(tp)) is not None and (
                item is PluginElement or dataclasses.is_dataclass(item)
            ):
                values[f.name] = [  # type: ignore[union-attr]
                    c if item is PluginElement else convert(typing.cast(type, item), c, report=own)
                    for c in child.children
                ]
            elif tp is not None and typing.get_origin(tp) in (Union, types.UnionType, None) and (
                tp is PluginElement or PluginElement in typing.get_args(tp)
            ):
                values[f.name] = child  # type: ignore[union-attr]
            else:
                own.warn(
                    f"<{child.tag}>{at(child.origin)} inside <{name}> is ignored: RelayMQ does not "
                    f"support it{suggest(child.tag, [snake_to_camel(k) for k in by_key])}"
                )
        except ConfigError as exc:
            errors.extend(exc.errors)

    for f in fields:
        if (f.name not in values and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING):
            errors.append(f"<{name}>{where} needs the attribute '{attribute_name(f)}'")
    if "origin" in all_fields:
        values["origin"] = el.origin
    if "extra" in all_fields and extra:
        values["extra"] = extra

    if report is None:
        errors.extend(own.errors)
    if errors:
        raise ConfigError("\n".join(errors), errors)
    return config_cls(**values)


def dataclass_fields_doc(config_cls: type) -> list[tuple[str, str, Any]]:
    """(attribute, type, default) for each settable field; used by docs and tests."""
    hints = typing.get_type_hints(config_cls, include_extras=True)
    out = []
    for f in _settable_fields(config_cls):
        default: Any = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        out.append((attribute_name(f), str(hints[f.name]), default))
    return out

