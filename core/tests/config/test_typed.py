"""convert(): attributes -> typed dataclass fields, the rules plugin authors rely on."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import pytest
from relaymq.config import BYTES, Bytes, ConfigError, Origin, PluginElement, convert
from relaymq.config.typed import attribute_names, camel_to_snake, parse_size, snake_to_camel


class Sync(enum.Enum):
    ALWAYS = "always"
    NEVER = "never"


@dataclass
class Entry:
    queue: str
    limit: int = 0


@dataclass
class Locker:
    lease: int = 30


@dataclass
class Config:
    directory: Path = Path("data")
    journal_max_file_length: int = 32 << 20  # an ActiveMQ size name: sizes accepted
    cache_bytes: int = field(default=0, metadata=BYTES)
    index_bytes: Annotated[int, Bytes] = 0
    prefetch: int | None = None
    ratio: float = 1.0
    enabled: bool = True
    mode: Literal["fast", "safe"] = "safe"
    sync: Sync = Sync.ALWAYS
    hosts: list[str] = field(default_factory=list)
    retry_interval: int = 0
    locker: Locker | None = None
    entries: list[Entry] = field(default_factory=list)
    raw: PluginElement | None = None
    origin: Origin = field(default_factory=Origin)
    extra: dict[str, str] = field(default_factory=dict)


def el(attrs: dict[str, str], *children: PluginElement, tag: str = "store") -> PluginElement:
    return PluginElement(tag, attrs, list(children), origin=Origin("a.xml", 7))


def test_every_kind_of_field() -> None:
    config = convert(Config, el(
        {"directory": "/d", "journalMaxFileLength": "64 mb", "cacheBytes": "1 kb",
         "indexBytes": "2gb", "prefetch": "10", "ratio": "0.5", "enabled": "off",
         "mode": "fast", "sync": "NEVER", "hosts": "a, b,c", "retry-interval": "500"},
        el({"lease": "5"}, tag="locker"),
        el({}, el({"queue": "A", "limit": "1 mb"}, tag="entry"), el({"queue": "B"}, tag="entry"),
           tag="entries"),
        el({"x": "y"}, tag="raw"),
    ))
    assert config.directory == Path("/d")
    assert config.journal_max_file_length == 64 << 20
    assert (config.cache_bytes, config.index_bytes) == (1024, 2 << 30)
    assert (config.prefetch, config.ratio, config.enabled) == (10, 0.5, False)
    assert (config.mode, config.sync, config.hosts) == ("fast", Sync.NEVER, ["a", "b", "c"])
    assert config.retry_interval == 500  # Artemis kebab-case
    assert config.locker == Locker(lease=5)
    assert config.entries == [Entry("A", 1 << 20), Entry("B", 0)]
    assert config.raw is not None and config.raw.attributes == {"x": "y"}
    assert config.origin == Origin("a.xml", 7)


def test_plain_mapping_input() -> None:
    config = convert(Config, {"prefetch": 3, "enabled": True, "locker": {"lease": "9"}})
    assert (config.prefetch, config.enabled, config.locker) == (3, True, Locker(9))


def test_every_bad_value_is_reported_with_file_line() -> None:
    with pytest.raises(ConfigError) as info:
        convert(Config, el({"prefetch": "many", "enabled": "perhaps", "mode": "turbo",
                            "cacheBytes": "1 zb", "ratio": "x"}))
    assert info.value.errors == [
        '<store prefetch="many"> at a.xml:7: expected an integer',
        '<store enabled="perhaps"> at a.xml:7: expected true or false',
        '<store mode="turbo"> at a.xml:7: expected one of fast, safe',
        '<store cacheBytes="1 zb"> at a.xml:7: expected a size such as 64 mb, 1 gb or 1048576',
        '<store ratio="x"> at a.xml:7: expected a number',
    ]


def test_missing_required_attribute() -> None:
    with pytest.raises(ConfigError, match=r"<entry> at a.xml:7 needs the attribute 'queue'"):
        convert(Entry, el({}, tag="entry"))


def test_unknown_attributes_warn_and_land_in_extra(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = convert(Config, el({"prefech": "1"}, el({}, tag="journal")))
    assert config.extra == {"prefech": "1"}
    assert "attribute 'prefech' is ignored: RelayMQ does not support it; did you mean prefetch?" \
        in caplog.text
    assert "<journal> at a.xml:7 inside <store> is ignored" in caplog.text


def test_strict_turns_unknowns_into_errors() -> None:
    with pytest.raises(ConfigError) as info:
        convert(Config, el({"prefech": "1"}), strict=True)
    assert "(an error because of --strict)" in info.value.errors[0]


def test_not_a_dataclass() -> None:
    with pytest.raises(TypeError):
        convert(dict, {})  # type: ignore[type-var]


@pytest.mark.parametrize(("text", "size"), [
    ("64 mb", 64 << 20), ("1 gb", 1 << 30), ("32mb", 32 << 20), ("1024", 1024), ("10 KB", 10240),
    ("1.5 gb", 3 << 29), ("2 tb", 2 << 40), ("7 b", 7),
])
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(("camel", "snake"), [
    ("queuePrefetch", "queue_prefetch"), ("inactiveTimoutBeforeGC", "inactive_timout_before_gc"),
    ("percentOfJvmHeap", "percent_of_jvm_heap"), ("retry-interval", "retry_interval"),
    ("useJmx", "use_jmx"), ("processDLQ", "process_dlq"),
])
def test_names(camel: str, snake: str) -> None:
    assert camel_to_snake(camel) == snake


def test_snake_to_camel_and_attribute_names() -> None:
    assert snake_to_camel("send_fail_if_no_space_after_timeout") == "sendFailIfNoSpaceAfterTimeout"
    assert "journalMaxFileLength" in attribute_names(Config)
    assert "origin" not in attribute_names(Config) and "extra" not in attribute_names(Config)
