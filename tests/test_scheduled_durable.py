"""Durable scheduled messages: `schedulerSupport="true"` on kahaDB, STOMP and AMQP
(python-qpid-proton) producers, kill -9 and restart. A persistent scheduled
message that was acknowledged survives the crash and is delivered after the
restart (at once when its time passed while the broker was down); a repeating
one is delivered exactly as often as it asked."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("relaymq_kahadb", reason="relaymq-kahadb is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")
pytest.importorskip("relaymq_amqp", reason="relaymq-amqp is not installed")

from proton import Delivery, Message, symbol  # noqa: E402 (after the skips)
from proton.utils import BlockingConnection  # noqa: E402
from relaymq.client import connect_broker  # noqa: E402
from relaymq.testing.barriers import MARKER_PROPERTY, new_marker  # noqa: E402
from relaymq.testing.store_brokers import (  # noqa: E402
    STORE_PLUGINS,
    STORES,
    StoreBrokerProcess,
    needs_store,
)
from relaymq_stomp.testing import BlockingStomp  # noqa: E402


class Broker(StoreBrokerProcess):
    """kahaDB or JDBC (SQLite) with the scheduler, STOMP and AMQP."""

    def __init__(self, tmp: Path, store: str = "kahadb") -> None:
        super().__init__(tmp, store, "sched", attributes='schedulerSupport="true"')


@pytest.fixture(params=STORES)
def broker(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    b = Broker(tmp_path, needs_store(request.param)).start()
    yield b
    b.kill()


def collect(port: int, dest: str, want: int, after_ms: int, timeout: float = 20.0,
            arrivals: dict[str, int] | None = None) -> list[str]:
    """Subscribe and collect bodies until `want` arrived (raises after `timeout`),
    then schedule a marker to `dest` `after_ms` from now and collect up to it: the
    scheduler fires in order of due time, so any extra copy due before the marker
    (a repeat too many, a firing recovered twice) arrives before it and is
    returned too. `after_ms` must reach past the latest time a wrong copy could be
    due. `arrivals` gets each body's arrival time (epoch ms)."""
    c = BlockingStomp(port)
    c.frame("SUBSCRIBE", {"destination": dest, "id": "1", "ack": "auto"})
    out: list[str] = []

    def read_until(done: Callable[[], bool], what: str, bound: float) -> bytes | None:
        deadline = time.monotonic() + bound
        while not done():
            c.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                cmd, headers, body = c.read()
            except TimeoutError:
                raise AssertionError(f"{what} on {dest} within {bound:g} s; got {out}") from None
            assert cmd == "MESSAGE", f"{cmd} {headers} {body!r}"
            if MARKER_PROPERTY in headers:
                return body
            out.append(body.decode())
            if arrivals is not None:
                arrivals[body.decode()] = int(time.time() * 1000)
        return None

    try:
        read_until(lambda: len(out) >= want, f"only {len(out)} of {want} messages", timeout)
        marker = new_marker()
        producer = BlockingStomp(port)
        try:
            cmd, headers, _ = producer.send(dest, marker.encode(),
                                            AMQ_SCHEDULED_DELAY=str(after_ms),
                                            **{MARKER_PROPERTY: marker})
        finally:
            producer.close()
        assert cmd == "RECEIPT", headers
        seen = read_until(lambda: False, "no scheduled marker",
                          timeout + after_ms / 1000)
        assert seen == marker.encode(), seen
    finally:
        c.close()
    return out


def sleep_until(epoch_ms: int) -> None:
    """Let the wall clock pass `epoch_ms` (a condition on the clock, not a guess)."""
    while time.time() * 1000 < epoch_ms:
        time.sleep(0.05)


@pytest.mark.slow  # a long run or a restart: compiled build only (docs/testing.md)
def test_persistent_scheduled_messages_survive_kill_9(broker: Broker) -> None:
    s = BlockingStomp(broker.stomp)
    sent_at = int(time.time() * 1000)
    cmd, _, _ = s.send("/queue/LATER", b"stomp delayed", AMQ_SCHEDULED_DELAY="1500")
    assert cmd == "RECEIPT"
    cmd, _, _ = s.send("/queue/LATER", b"stomp far", AMQ_SCHEDULED_DELAY="6000")
    assert cmd == "RECEIPT"
    s.close()
    a = BlockingConnection(f"amqp://127.0.0.1:{broker.amqp}", timeout=10)
    snd = a.create_sender("queue://LATER")
    d = snd.send(Message(body="amqp delay property", durable=True,
                         properties={"AMQ_SCHEDULED_DELAY": 1500}))
    assert d.remote_state == Delivery.ACCEPTED
    d = snd.send(Message(body="amqp delivery-time", durable=True,
                         annotations={symbol("x-opt-delivery-time"): sent_at + 1500}))
    assert d.remote_state == Delivery.ACCEPTED
    d = snd.send(Message(body="amqp delivery-delay", durable=True,
                         annotations={symbol("x-opt-delivery-delay"): 1500}))
    assert d.remote_state == Delivery.ACCEPTED
    a.close()
    broker.kill()  # nothing was due yet: all five are only in the scheduler's store
    sleep_until(sent_at + 1600)  # the 1.5 s ones are late by the time the broker is back
    broker.start()
    arrivals: dict[str, int] = {}
    # every job was due by the time the last one arrived: a marker due later follows
    # any copy fired twice
    got = collect(broker.stomp, "/queue/LATER", 5, 500, arrivals=arrivals)
    assert sorted(got) == sorted(["stomp delayed", "stomp far", "amqp delay property",
                                  "amqp delivery-time", "amqp delivery-delay"])
    # none came before its time (the far one may still be ahead when the broker is back)
    assert arrivals["stomp far"] >= sent_at + 6000
    assert all(t >= sent_at + 1500 for t in arrivals.values())
    assert "scheduled message(s) recovered" in broker.output()


def test_repeating_schedule_is_delivered_exactly_as_asked_across_kill_9(broker: Broker) -> None:
    s = BlockingStomp(broker.stomp)
    cmd, _, _ = s.send("/queue/REPEAT", b"tick", AMQ_SCHEDULED_DELAY="200",
                       AMQ_SCHEDULED_PERIOD="700", AMQ_SCHEDULED_REPEAT="3")
    assert cmd == "RECEIPT"
    s.close()
    # let the first firings happen (they are stored in the queue), then crash
    probe = BlockingStomp(broker.stomp)
    probe.frame("SUBSCRIBE", {"destination": "/queue/REPEAT", "id": "p", "ack": "client",
                              "activemq.prefetchSize": "1"})
    cmd, _, body = probe.read()  # the first firing arrived: do not acknowledge it
    assert cmd == "MESSAGE" and body == b"tick"
    broker.kill()
    probe.close()
    broker.start()
    # a fifth firing would be due one period (700 ms) after the fourth: the marker is
    # due two periods after it arrived
    got = collect(broker.stomp, "/queue/REPEAT", 4, 1400)
    assert got == ["tick"] * 4  # 1 + AMQ_SCHEDULED_REPEAT, none lost, none twice


def test_non_persistent_scheduled_message_is_delivered_without_a_crash(broker: Broker) -> None:
    s = BlockingStomp(broker.stomp)
    s.frame("SEND", {"destination": "/queue/NP", "persistent": "false", "receipt": "r",
                     "AMQ_SCHEDULED_DELAY": "300"}, b"np")
    assert s.read()[0] == "RECEIPT"
    s.close()
    assert collect(broker.stomp, "/queue/NP", 1, 500) == ["np"]


@pytest.fixture(scope="module")
def cron_brokers(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A broker per store (those whose plugin is installed), each given the same
    `AMQ_SCHEDULED_CRON` "* * * * *" job, killed with -9 and restarted: the stores'
    tests then share one wait for the next minute instead of one each."""
    stores = [s for s in STORES if importlib.util.find_spec(STORE_PLUGINS[s]) is not None]
    brokers = {s: Broker(tmp_path_factory.mktemp(f"cron-{s}"), s) for s in stores}
    try:
        for b in brokers.values():
            b.start(wait=False)
        for b in brokers.values():
            b.wait_listening()
        now = int(time.time() * 1000)
        if now % 60000 > 55000:  # too close to a minute: let it pass, so no job is due
            sleep_until(now - now % 60000 + 60500)  # before the kill
        sent_ms = int(time.time() * 1000)
        for b in brokers.values():
            s = BlockingStomp(b.stomp)
            cmd, _, _ = s.send("/queue/CRON", b"cron", AMQ_SCHEDULED_CRON="* * * * *")
            assert cmd == "RECEIPT"
            s.close()
        for b in brokers.values():
            b.kill()
        for b in brokers.values():
            b.start(wait=False)
        for b in brokers.values():
            b.wait_listening()
        yield brokers, sent_ms
    finally:
        for b in brokers.values():
            b.kill()


@pytest.fixture(scope="module", autouse=True)
def cron_brokers_first(request: pytest.FixtureRequest) -> None:
    """When a cron test is selected, its brokers start with the module's first test:
    the module's other tests then run while the next minute comes."""
    if any("cron_brokers" in getattr(item, "fixturenames", ()) for item in request.session.items):
        request.getfixturevalue("cron_brokers")


@pytest.mark.slow
@pytest.mark.parametrize("store", STORES)
def test_a_cron_job_survives_kill_9(store: str, cron_brokers: tuple[dict[str, Broker], int]) -> None:
    """`AMQ_SCHEDULED_CRON` "* * * * *": stored, recovered, delivered at the next
    minute, once per minute."""
    brokers, sent_ms = cron_brokers
    broker = brokers[needs_store(store)]
    assert "1 stored scheduled message(s) recovered" in broker.output()
    now = int(time.time() * 1000)
    if now % 60000 > 57000:  # a firing due during the check would be a legitimate extra copy
        sleep_until(now - now % 60000 + 61000)
        now = int(time.time() * 1000)
    # one firing per minute started since the job was sent, at least the next one (the
    # module's other tests ran while it came); a copy too many, due before the marker
    # a second later, is collected too (the next minute's is most of a minute away)
    minutes = max(1, now // 60000 - sent_ms // 60000)
    got = collect(broker.stomp, "/queue/CRON", minutes, 1000, timeout=75)
    assert got == ["cron"] * minutes


async def test_a_duplicate_id_given_apart_stays_apart_across_a_restart(tmp_path: Path) -> None:
    """A mirror target schedules a mirrored message with its duplicate id given
    apart: the stored job keeps the id (not the message), a copy fired after a
    restart carries only its producer's properties, and the id still drops a
    replay of the event."""
    from relaymq.model.destination import Destination
    from relaymq.model.message import Message as KernelMessage
    from relaymq.testing import broker_config, plugin_element, running_broker
    from relaymq.testing.waits import wait_until_async

    def kaha() -> Any:
        c = broker_config(persistent=True, data_directory=str(tmp_path), scheduler_support=True)
        c.persistence_adapter = plugin_element("kahaDB")
        return c

    dest = Destination.queue("DUP.LATER")

    def message(delay: int) -> KernelMessage:
        m = KernelMessage(b"later", destination=dest, durable=True, properties={"k": "v"})
        m.scheduled_delay = delay
        return m

    async with running_broker(kaha()) as broker:
        stored = await broker.internal_connection().submit(message(1500), None, "mirror:1")
        assert stored is not None
        await stored
        assert broker.scheduler is not None and broker.scheduler.pending == 1
    async with running_broker(kaha()) as broker:
        assert broker.scheduler is not None
        await wait_until_async(lambda: broker.management.queue(dest) is not None
                               and broker.management.queue(dest).size() == 1,
                               what="the recovered job fired", timeout=20)
        vm = await connect_broker(broker)
        consumer = await vm.consumer(dest)
        got = await consumer.receive(timeout=5)
        assert got is not None
        assert got.message.properties == {"k": "v"}
        assert not got.message.annotations
        await vm.close()
        replay = await broker.internal_connection().submit(message(0), None, "mirror:1")
        if replay is not None:
            await replay
        assert broker.management.queue(dest).stats.duplicates == 1
        assert broker.management.queue(dest).size() == 0
