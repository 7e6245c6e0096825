"""kill -9 of a standalone bridge process (`relaymq bridge run CONFIG`) at a random
moment of the stream, for each quality of service and each direction issue 20
names: RelayMQ -> RelayMQ over AMQP and over STOMP, RelayMQ -> ActiveMQ 5.17 and
back over STOMP, RelayMQ -> RabbitMQ 3.10 and back over AMQP 1.0 (the peers are
the session fixtures). A second bridge process then finishes the job; what
arrived on the target keeps the quality of service's promise (docs/bridge.md):
ONCE_AND_ONLY_ONCE every message exactly once, DUPLICATES_OK none lost,
AT_MOST_ONCE none twice. ONCE_AND_ONLY_ONCE to RabbitMQ over AMQP is not a case:
the bridge refuses it (test_peers.py)."""

from __future__ import annotations

import asyncio
import collections
import json
import random
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from bridge_helpers import RELAYMQ, Drain, produce, until
from relaymq.testing import running_broker

FIRST = 400  # produced before the first bridge process; it is killed within these
COUNT = 600  # the rest is produced while the first one is dead
BATCH = 20
QOS = ["ONCE_AND_ONLY_ONCE", "DUPLICATES_OK", "AT_MOST_ONCE"]
#: (direction, the peer whose fixture `ends` asks for)
DIRECTIONS = [("relaymq-amqp-relaymq", None), ("relaymq-stomp-relaymq", None)] + [
    (d, peer) for peer in ("activemq", "rabbitmq") for d in (f"relaymq-{peer}", f"{peer}-relaymq")]
CASES = [pytest.param(d, qos, marks=[pytest.mark.external(peer)] if peer else [])
         for d, peer in DIRECTIONS for qos in QOS
         # refused by the bridge: no duplicate detection, no AMQP transactions (test_peers.py)
         if (d, qos) != ("relaymq-rabbitmq", "ONCE_AND_ONLY_ONCE")]


@dataclass
class End:
    """One side of the bridge: what the bridge connects to, and how the test
    produces to it or drains it."""

    uri: str  # for the bridge and the test's own client
    destination: str

    async def produce(self, count: int, start: int) -> None:
        await produce(self.uri, self.destination, count, start=start)

    async def drain(self) -> Drain:
        return await Drain().start(self.uri, self.destination)


@asynccontextmanager
async def ends(direction: str, name: str,
               request: pytest.FixtureRequest) -> AsyncIterator[tuple[End, End]]:
    """(source, target) for a direction."""
    async with running_broker(None, "amqp://127.0.0.1:0", "stomp://127.0.0.1:0") as relay:
        def local(scheme: str, queue: str) -> End:
            return End(f"{scheme}://{relay.connector_address(scheme)}", f"queue://{queue}")

        if direction.startswith("relaymq-") and direction.endswith("-relaymq"):
            scheme = direction.split("-")[1]
            yield local(scheme, f"{name}.in"), local(scheme, f"{name}.out")
        elif "activemq" in direction:
            amq = request.getfixturevalue("activemq")
            remote = End(f"stomp://127.0.0.1:{amq.stomp_port}", f"/queue/{name}")
            if direction == "relaymq-activemq":
                yield local("amqp", f"{name}.in"), remote  # a STOMP transaction + marker
            else:
                yield remote, local("amqp", f"{name}.out")
        else:
            rmq = request.getfixturevalue("rabbitmq")
            remote = End(f"amqp://guest:guest@127.0.0.1:{rmq.amqp_port}", f"/queue/{name}")
            if direction == "relaymq-rabbitmq":
                yield local("amqp", f"{name}.in"), remote
            else:
                yield remote, local("amqp", f"{name}.out")


class BridgeProcess:
    """A `relaymq bridge run` process and the JSON status lines it prints."""

    def __init__(self) -> None:
        self.lines: list[dict] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self, cfg: Path) -> BridgeProcess:
        self.lines = []
        self.proc = await asyncio.create_subprocess_exec(
            RELAYMQ, "bridge", "run", str(cfg), "--status-every", "0.05",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for raw in self.proc.stdout:
            try:
                self.lines.append(json.loads(raw))
            except ValueError:
                pass

    @property
    def last(self) -> dict:
        return self.lines[-1] if self.lines else {}

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        if self._reader is not None:
            self._reader.cancel()

    async def terminate(self) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.proc.wait(), 30)
        if self._reader is not None:
            self._reader.cancel()
        return code


@pytest.mark.slow
@pytest.mark.parametrize(("direction", "qos"), CASES)
async def test_standalone_bridge_killed_at_a_random_moment(
        tmp_path: Path, request: pytest.FixtureRequest, direction: str, qos: str) -> None:
    name = f"kill.{direction}.{qos.lower()}"
    async with ends(direction, name, request) as (source, target):
        cfg = tmp_path / "bridges.xml"
        cfg.write_text(f"""<?xml version="1.0"?>
<bridges>
  <bridge name="{name}" source-uri="{source.uri}" source-destination="{source.destination}"
          target-uri="{target.uri}" target-destination="{target.destination}"
          quality-of-service="{qos}" max-batch-size="{BATCH}" max-batch-time="50"
          failure-retry-interval="200"/>
</bridges>""")
        await source.produce(FIRST, 0)
        bridge = await BridgeProcess().start(cfg)
        drain: Drain | None = None
        try:
            moment = random.randint(FIRST // 10, FIRST * 3 // 4)
            await until(lambda: bridge.last.get("forwarded", 0) >= moment, timeout=60,
                        what=f"{moment} forwarded before the kill")
            await bridge.kill()
            killed_at = bridge.last["forwarded"]
            await source.produce(COUNT - FIRST, FIRST)  # the last one is m-{COUNT-1}
            await bridge.start(cfg)
            drain = await target.drain()
            # What the source redelivers need not come first: ActiveMQ hands the dead
            # consumer's prefetched messages back only when it has noticed the dead
            # connection, possibly after the new consumer got everything else. So wait
            # for all that the quality of service promises, then check what came.
            expected = {f"m-{i}" for i in range(COUNT)}
            promised = {f"m-{i}" for i in range(FIRST if qos == "AT_MOST_ONCE" else 0, COUNT)}
            try:
                await until(lambda: promised <= set(drain.bodies), timeout=90,
                            what=f"{len(promised)} promised messages on the target")
            except AssertionError as exc:
                lost = sorted(promised - set(drain.bodies))
                raise AssertionError(f"{exc} (killed at {killed_at} forwarded): "
                                     f"{len(lost)} missing, from {lost[:10]}") from None
            counts = collections.Counter(drain.bodies)
            assert set(counts) <= expected
            dups = sorted(b for b, n in counts.items() if n > 1)
            missing = expected - set(counts)
            why = f"killed at {killed_at} forwarded: {len(dups)} duplicates, {len(missing)} missing"
            if qos == "AT_MOST_ONCE":
                assert dups == [], why
                # what was produced after the restart all came
                assert {f"m-{i}" for i in range(FIRST, COUNT)} <= set(counts), why
            elif qos == "DUPLICATES_OK":
                assert not missing, why
            else:
                assert not missing and dups == [], why
            await until(lambda: bridge.last.get("state") == "running", what="a running status")
        finally:
            if drain is not None:
                await drain.close()
            code = await bridge.terminate()
        assert code == 0
