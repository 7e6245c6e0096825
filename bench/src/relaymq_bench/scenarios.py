"""Scenario definitions and the YAML suite format.

Why a matrix in YAML: the standard comparison (1 KiB, 20k messages,
persistent or not, sequential or concurrent, AMQP and STOMP) is a cross
product; writing it as ``matrix`` keeps the file short and makes adding an
axis (say ``size: [128, 1024, 65536]``) a one-line change.

Suite file::

    defaults: {size: 1024, count: 20000, runs: 3}
    matrix:   {protocol: [amqp, stomp], persistent: [false, true],
               mode: [sequential, concurrent]}
    scenarios:               # optional, each merged over defaults (no matrix)
      - {name: fanout, pattern: topic, consumers: 4}
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import yaml

MODES = ("sequential", "concurrent")
PATTERNS = ("queue", "topic")
PROTOCOLS = ("amqp", "stomp")
#: auto: the broker settles on send (STOMP ack:auto, AMQP pre-settled);
#: client: one cumulative ack per batch (STOMP ack:client, AMQP one first..last
#: accepted disposition); client-individual: one ack per message (STOMP
#: ack:client-individual, AMQP one accepted disposition per delivery).
ACK_MODES = ("auto", "client", "client-individual")


class ScenarioError(ValueError):
    """A scenario with invalid or contradictory settings."""


@dataclass(frozen=True)
class Scenario:
    """One measured workload; every knob the CLI and the YAML files expose."""

    name: str = ""
    protocol: str = "amqp"
    size: int = 1024                 # body bytes (>= 28: the bench prefix)
    count: int | None = 20000        # messages per producer (None with duration)
    duration: float | None = None    # seconds of sending per producer
    persistent: bool = False
    mode: str = "concurrent"         # sequential: send all, then drain
    producers: int = 1
    consumers: int = 1
    pattern: str = "queue"           # topic: every consumer gets every message
    rate: float | None = None        # total msg/s over all producers (latency runs)
    destination: str | None = None   # default: relaymq-bench-<protocol>-<pattern>
    max_inflight: int = 2000         # unsettled/unreceipted messages per producer
    batch: int = 256                 # messages per write
    credit: int = 2000               # AMQP link credit / STOMP prefetch per consumer
    receipt_every: int = 100         # STOMP: receipt on every Nth SEND (and the last)
    ack: str = "client"              # see ACK_MODES
    ack_receipt_every: int = 0       # STOMP: a receipt on every Nth ACK frame (0: none)
    runs: int = 1
    warmup: int = 0                  # unreported runs before the measured ones
    drain_timeout: float = 10.0      # give up on missing messages after this idle time
    purge: bool = True               # queue runs: drain leftovers before starting
    nap_ms: float = 4.0              # idle consumer polls every nap_ms instead of waking per
                                     # arrival (throughput runs only; 0 with rate)

    def validate(self) -> Scenario:
        if self.protocol not in PROTOCOLS:
            raise ScenarioError(f"protocol must be one of {PROTOCOLS}, not {self.protocol!r}")
        if self.mode not in MODES:
            raise ScenarioError(f"mode must be one of {MODES}, not {self.mode!r}")
        if self.pattern not in PATTERNS:
            raise ScenarioError(f"pattern must be one of {PATTERNS}, not {self.pattern!r}")
        if self.size < 28:
            raise ScenarioError("size must be >= 28 bytes (sequence number + timestamp prefix)")
        if (self.count is None) == (self.duration is None):
            raise ScenarioError("give exactly one of count and duration")
        if self.producers < 1 or self.consumers < 1:
            raise ScenarioError("need at least one producer and one consumer")
        if self.ack not in ACK_MODES:
            raise ScenarioError(f"ack must be one of {ACK_MODES}, not {self.ack!r}")
        if self.ack_receipt_every < 0:
            raise ScenarioError("ack_receipt_every must be >= 0")
        if self.ack_receipt_every and (self.protocol != "stomp" or self.ack == "auto"):
            raise ScenarioError("ack_receipt_every needs protocol stomp and a client ack mode")
        if self.rate is not None and self.rate <= 0:
            raise ScenarioError("rate must be positive")
        return self

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        amount = f"{self.count}" if self.count is not None else f"{self.duration:g}s"
        parts = [self.protocol, self.mode, "persistent" if self.persistent else "transient",
                 self.pattern, f"{self.size}B", amount]
        if self.producers > 1 or self.consumers > 1:
            parts.append(f"{self.producers}p{self.consumers}c")
        if self.rate:
            parts.append(f"{self.rate:g}/s")
        if self.ack == "auto":
            parts.append("autoack")
        elif self.ack == "client-individual":
            parts.append("indivack")
        if self.ack_receipt_every:
            parts.append(f"ackrcpt{self.ack_receipt_every}")
        return "-".join(parts)

    def destination_name(self) -> str:
        return self.destination or f"relaymq-bench-{self.protocol}-{self.pattern}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


FIELD_NAMES = {f.name for f in fields(Scenario)}


def make_scenario(values: dict[str, Any]) -> Scenario:
    unknown = set(values) - FIELD_NAMES
    if unknown:
        raise ScenarioError(f"unknown scenario keys: {', '.join(sorted(unknown))}")
    values = dict(values)
    if values.get("duration") is not None and "count" not in values:
        values["count"] = None
    return Scenario(**values).validate()


def expand(doc: dict[str, Any]) -> list[Scenario]:
    """Scenarios of a suite document: defaults x matrix, then explicit scenarios."""
    if not isinstance(doc, dict):
        raise ScenarioError("suite file must be a mapping")
    extra = set(doc) - {"defaults", "matrix", "scenarios", "description", "name"}
    if extra:
        raise ScenarioError(f"unknown suite keys: {', '.join(sorted(extra))}")
    defaults = dict(doc.get("defaults") or {})
    matrix = doc.get("matrix") or {}
    out: list[Scenario] = []
    if matrix:
        keys = list(matrix)
        axes = [v if isinstance(v, list) else [v] for v in matrix.values()]
        for combo in itertools.product(*axes):
            out.append(make_scenario({**defaults, **dict(zip(keys, combo, strict=True))}))
    for item in doc.get("scenarios") or []:
        out.append(make_scenario({**defaults, **item}))
    if not out:
        out.append(make_scenario(defaults))
    return out


def load_suite(path: str) -> list[Scenario]:
    with open(path) as fh:
        return expand(yaml.safe_load(fh) or {})


def override(scenarios: list[Scenario], **changes: Any) -> list[Scenario]:
    """Apply CLI overrides (e.g. --runs, --count) to every scenario of a suite."""
    changes = {k: v for k, v in changes.items() if v is not None}
    if "duration" in changes:
        changes["count"] = None
    elif "count" in changes:
        changes["duration"] = None
    return [replace(s, **changes).validate() for s in scenarios]
