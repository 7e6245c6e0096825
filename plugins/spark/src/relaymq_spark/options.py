"""Reading the data sources' options (strings, as Spark passes them)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping

from relaymq_spark.endpoint import Endpoint, address_of


class OptionError(ValueError):
    """A missing or malformed option; the message names it and what is expected."""


#: the options of each data source (Spark passes them case-insensitively)
ENDPOINT_OPTIONS = frozenset({"url", "user", "username", "password", "sslCaFile", "ssl.ca",
                              "sslVerify", "timeout", "retryTimeout"})
READ_OPTIONS = ENDPOINT_OPTIONS | {
    "destination", "destinations", "startingOffsets", "endingOffsets",
    "maxMessagesPerTrigger", "messagesPerPartition", "minPartitions", "propertyColumns",
    "releaseOnCommit", "failOnDataLoss"}
WRITE_OPTIONS = ENDPOINT_OPTIONS | {"destination", "destinations", "writeId", "maxRate",
                                    "sendWindow"}
JOURNAL_OPTIONS = frozenset({"path", "what", "destination", "propertyColumns"})
JDBC_OPTIONS = frozenset({"url", "tablePrefix", "destination", "propertyColumns", "partitions"})
#: Spark's own options, which it may hand a source or sink with the source's
SPARK_OPTIONS = frozenset({"checkpointlocation", "path", "queryname", "mode"})


def check_names(options: Iterable[str], known: Iterable[str], source: str) -> None:
    """Refuse an option that is not one of `known` but close to one (a misspelling:
    `startingOffset`, `destinations` where only `destination` is read), naming the
    option meant. A name far from every option passes: Spark hands a source its
    own options too (`checkpointLocation`, `path`)."""
    by_lower = {k.lower(): k for k in known}
    for name in options:
        key = str(name).lower()
        if key in by_lower or key in SPARK_OPTIONS:
            continue
        close = difflib.get_close_matches(key, list(by_lower), n=1, cutoff=0.75)
        if close:
            raise OptionError(f"{source}: unknown option {name!r}; did you mean "
                              f"{by_lower[close[0]]!r}?")


def endpoint(options: Mapping[str, str]) -> Endpoint:
    url = options.get("url")
    if not url:
        raise OptionError("option 'url' is required, e.g. .option('url', 'amqp://broker:5672')")
    return Endpoint(
        url=url,
        user=options.get("user") or options.get("username"),
        password=options.get("password"),
        ssl_ca=options.get("sslCaFile") or options.get("ssl.ca"),
        ssl_verify=str(options.get("sslVerify", "true")).lower() != "false",
        timeout=float(options.get("timeout", "60")),
        retry=float(options.get("retryTimeout", "60")),
    )


def destinations(options: Mapping[str, str], required: bool = True) -> list[str]:
    """Option `destination` (or `destinations`): comma-separated queues
    (`queue://X` or a bare name) and durable subscriptions (`durable://C:N`)."""
    raw = options.get("destination") or options.get("destinations") or ""
    out = [address_of(d.strip()) for d in raw.split(",") if d.strip()]
    for d in out:
        if d.startswith("topic://"):
            raise OptionError(f"destination {d}: a topic holds no messages; read a durable "
                              "subscription of it (durable://CLIENT-ID:NAME)")
    if required and not out:
        raise OptionError("option 'destination' is required (a queue, several "
                          "comma-separated, or durable://CLIENT-ID:NAME)")
    return out


def sink_destination(value: str) -> str:
    """Where a sink sends: a queue (`queue://X` or a bare name) or a topic
    (`topic://X`). A durable subscription is read, not written to."""
    d = address_of(value.strip())
    if d.startswith("durable://"):
        raise OptionError(f"destination {d}: a durable subscription is read, not written to; "
                          "send to its topic (topic://NAME) or to a queue")
    return d


def flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    """A true/false option."""
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"option {name}={raw!r}: use true or false")
    return value == "true"


def positive_int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {name!r} must be a whole number, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option {name!r} must be positive, got {value}")
    return value


def starting_offsets(raw: str | None, dests: list[str], *, default: str = "earliest",
                     name: str = "startingOffsets") -> dict[str, str | int]:
    """`earliest`, `latest`, or JSON ``{"queue://X": 41, ...}`` (a sequence number:
    the stream starts after it; -2 earliest, -1 latest as in Kafka); a destination
    the JSON leaves out gets `default` (``endingOffsets``: ``latest``)."""
    raw = (raw or default).strip()
    if raw in ("earliest", "latest"):
        return {d: raw for d in dests}
    try:
        given = json.loads(raw)
    except json.JSONDecodeError:
        raise OptionError(f"{name} must be 'earliest', 'latest' or JSON like "
                          f'{{"queue://ORDERS": 41}}, got {raw!r}') from None
    if not isinstance(given, dict):
        raise OptionError(f"{name} JSON must be an object of destination -> number")
    out: dict[str, str | int] = {}
    keyed = {address_of(k): v for k, v in given.items()}
    for d in dests:
        v = keyed.get(d, default)
        if v == -2:
            v = "earliest"
        elif v == -1:
            v = "latest"
        if not (v in ("earliest", "latest") or (isinstance(v, int) and v >= 0)):
            raise OptionError(f"{name}[{d}]: {v!r} is not a sequence number")
        out[d] = v
    unknown = set(keyed) - set(dests)
    if unknown:
        raise OptionError(f"{name} names {sorted(unknown)}, not in option 'destination'")
    return out
