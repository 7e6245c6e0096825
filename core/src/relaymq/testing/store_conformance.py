"""The store conformance suite: one set of tests every `PersistenceAdapter` passes.

A store plugin reuses it instead of inventing its own (dagster's
`TestRunStorage` idea). Subclass `StoreConformance` in your tests and override
the `store_factory` fixture with a callable that builds a *new, unstarted*
adapter on one fixed location, so the suite can stop a store and open another
one on the same data::

    import pytest
    from relaymq.testing.store_conformance import StoreConformance
    from relaymq_kahadb import KahaDBConfig, KahaDBPersistenceAdapter

    class TestKahaDBConformance(StoreConformance):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return lambda: KahaDBPersistenceAdapter(KahaDBConfig(directory=str(tmp_path)))

Fixtures the tests use:

* ``store`` — a started adapter from the factory (stopped after the test);
* ``reopen`` — ``await reopen(store)`` stops `store` and returns a new started
  adapter on the same location. Tests about surviving a restart skip on stores
  whose ``persistent`` is False.

The tests only use the public contract (`relaymq.spi.persistence`): batches of
operations, `read` by sequence, `stats`, listings. Every test is a coroutine run
by pytest-asyncio.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from relaymq.model.codec import register_property_loader
from relaymq.model.destination import Destination
from relaymq.model.message import MESSAGE_FIELDS, BodyType, Message
from relaymq.spi.persistence import (
    AddDestination,
    AddDuplicateId,
    AddMessage,
    AddSubscription,
    DuplicateIdRecord,
    PersistenceAdapter,
    RemoveDestination,
    RemoveDuplicateId,
    RemoveMessage,
    RemoveMessages,
    RemoveSubscription,
    StoredMessage,
    StoreOp,
    SubscriptionRecord,
    subscription_key,
)
from relaymq.testing.requirements import NOT_APPLICABLE

try:  # strict-mode pytest-asyncio needs its own decorator for async fixtures
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # pragma: no cover - auto mode or another runner
    _async_fixture = pytest.fixture  # type: ignore[assignment]

StoreFactory = Callable[[], PersistenceAdapter]
Reopen = Callable[[PersistenceAdapter], Awaitable[PersistenceAdapter]]

Q = "queue://conformance.A"
Q2 = "queue://conformance.B"
T = "topic://conformance.T"

#: An encoding whose "wire form" is JSON with the properties under "props", so
#: the suite can check that lazily parsed properties survive a store round trip.
LAZY_ENCODING = "relaymq-conformance-json"


def _lazy_loader(m: Message) -> dict[str, Any]:
    return dict(json.loads(m.encoded or b"{}").get("props", {}))


register_property_loader(LAZY_ENCODING, _lazy_loader)


def msg(n: int, dest: str = Q, size: int = 16) -> Message:
    """A small message whose id and body say which one it is."""
    body = (f"m{n}:".encode() + b"x" * size)[:max(size, len(str(n)) + 2)]
    return Message(body, destination=Destination.parse(dest), message_id=f"ID:conf-{n}",
                   durable=True)


def adds(dest: str, seqs: range | list[int], size: int = 16) -> list[AddMessage]:
    return [AddMessage(dest, s, msg(s, dest, size)) for s in seqs]


def seqs_of(stored: list[StoredMessage]) -> list[int]:
    return [s.seq for s in stored]


def assert_same_message(got: Message, want: Message) -> None:
    """Every field the kernel keeps, properties included (read through the
    lazy loader when the store kept them unparsed)."""
    for name in MESSAGE_FIELDS:
        if name in ("_properties", "_loader"):
            continue
        assert getattr(got, name) == getattr(want, name), f"field {name} differs"
    assert got.properties == want.properties


class _Stores:
    """Opens stores from the factory and closes whatever is left at teardown."""

    def __init__(self, factory: StoreFactory) -> None:
        self.factory = factory
        self.open: list[PersistenceAdapter] = []

    async def start(self) -> PersistenceAdapter:
        s = self.factory()
        await s.start()
        self.open.append(s)
        return s

    async def reopen(self, store: PersistenceAdapter) -> PersistenceAdapter:
        if not store.persistent:
            pytest.skip(f"{NOT_APPLICABLE}{type(store).__name__} is not persistent")
        await store.stop()
        self.open.remove(store)
        return await self.start()

    async def close(self) -> None:
        for s in reversed(self.open):
            await s.stop()
        self.open.clear()


@pytest.mark.asyncio
class StoreConformance:
    """Subclass and override `store_factory`; see the module docstring."""

    # -- fixtures -------------------------------------------------------------

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        raise NotImplementedError(
            "override the store_factory fixture: return a callable that builds a new, "
            "unstarted PersistenceAdapter on one fixed location")

    @_async_fixture
    async def stores(self, store_factory: StoreFactory) -> AsyncIterator[_Stores]:
        holder = _Stores(store_factory)
        try:
            yield holder
        finally:
            await holder.close()

    @_async_fixture
    async def store(self, stores: _Stores) -> PersistenceAdapter:
        return await stores.start()

    @pytest.fixture
    def reopen(self, stores: _Stores) -> Reopen:
        return stores.reopen

    # -- basics ---------------------------------------------------------------

    async def test_empty_store(self, store: PersistenceAdapter) -> None:
        assert await store.destinations() == []
        assert await store.subscriptions() == []
        assert await store.read(Q) == []
        st = await store.stats(Q)
        assert (st.count, st.last_seq) == (0, 0)
        assert isinstance(store.size(), int) and store.size() >= 0
        assert isinstance(store.describe(), str) and store.describe()

    async def test_empty_batch_is_a_no_op(self, store: PersistenceAdapter) -> None:
        await store.write([])
        assert await store.destinations() == []

    async def test_add_and_read_in_sequence_order(self, store: PersistenceAdapter) -> None:
        await store.write([AddDestination(Q)])
        await store.write(adds(Q, [1, 2, 3]))
        await store.write(adds(Q, [5]))
        await store.write(adds(Q, [4]))  # a batch that lost the race to the store
        await store.write(adds(Q, range(6, 11)))
        got = await store.read(Q)
        assert seqs_of(got) == list(range(1, 11))
        assert [s.message.message_id for s in got] == [f"ID:conf-{n}" for n in range(1, 11)]
        assert got[0].message.body == msg(1).body

    async def test_read_after_and_limit_page_through(self, store: PersistenceAdapter) -> None:
        await store.write(adds(Q, range(1, 26)))
        pages: list[list[int]] = []
        after = 0
        while True:
            page = await store.read(Q, after=after, limit=10)
            if not page:
                break
            pages.append(seqs_of(page))
            after = page[-1].seq
        assert pages == [list(range(1, 11)), list(range(11, 21)), list(range(21, 26))]
        assert seqs_of(await store.read(Q, after=24)) == [25]
        assert await store.read(Q, after=25) == []
        assert seqs_of(await store.read(Q, after=7, limit=1)) == [8]

    async def test_read_does_not_consume(self, store: PersistenceAdapter) -> None:
        await store.write(adds(Q, range(1, 4)))
        assert seqs_of(await store.read(Q)) == [1, 2, 3]
        assert seqs_of(await store.read(Q)) == [1, 2, 3]
        assert (await store.stats(Q)).count == 3

    async def test_remove_message(self, store: PersistenceAdapter) -> None:
        await store.write(adds(Q, range(1, 11)))
        await store.write([RemoveMessage(Q, 1), RemoveMessage(Q, 2)])
        await store.write([RemoveMessage(Q, 5)])  # out of order, as acks arrive
        await store.write([RemoveMessage(Q, 10)])
        assert seqs_of(await store.read(Q)) == [3, 4, 6, 7, 8, 9]
        assert seqs_of(await store.read(Q, after=4, limit=2)) == [6, 7]
        assert (await store.stats(Q)).count == 6

    async def test_remove_messages_in_runs(self, store: PersistenceAdapter) -> None:
        """A store with `removal_runs` takes `RemoveMessages` as one `RemoveMessage`
        per sequence, in a batch with other operations too."""
        if not store.removal_runs:
            pytest.skip(f"{NOT_APPLICABLE}{type(store).__name__} takes no RemoveMessages")
        await store.write([*adds(Q, range(1, 11)), *adds(Q2, range(1, 4))])
        await store.write([RemoveMessages(Q, (1, 2, 5)), RemoveMessages(Q2, (3,))])
        await store.write([*adds(Q, [11]), RemoveMessages(Q, (10, 11, 99, 1)),
                           RemoveMessages("queue://nowhere", (1, 2))])
        assert seqs_of(await store.read(Q)) == [3, 4, 6, 7, 8, 9]
        assert seqs_of(await store.read(Q2)) == [1, 2]
        assert (await store.stats(Q)).count == 6
        assert (await store.stats(Q)).last_seq == 11

    async def test_remove_unknown_is_harmless(self, store: PersistenceAdapter) -> None:
        await store.write(adds(Q, [1]))
        await store.write([RemoveMessage(Q, 99), RemoveMessage("queue://nowhere", 1)])
        await store.write([RemoveMessage(Q, 1)])
        await store.write([RemoveMessage(Q, 1)])  # twice: a redelivered ack
        await store.write([RemoveDestination("queue://nowhere"), RemoveSubscription("durable://x:y")])
        assert await store.read(Q) == []

    async def test_batch_applies_every_operation(self, store: PersistenceAdapter) -> None:
        await store.write(adds(Q, range(1, 6)))
        batch: list[StoreOp] = [
            AddDestination(Q2),
            *adds(Q2, range(1, 4)),
            RemoveMessage(Q, 1),
            RemoveMessage(Q, 2),
            *adds(Q, [6, 7]),
            RemoveMessage(Q2, 2),
        ]
        await store.write(batch)
        assert seqs_of(await store.read(Q)) == [3, 4, 5, 6, 7]
        assert seqs_of(await store.read(Q2)) == [1, 3]
        assert set(await store.destinations()) == {Q, Q2}

    async def test_add_then_remove_in_one_batch(self, store: PersistenceAdapter) -> None:
        await store.write([*adds(Q, [1, 2]), RemoveMessage(Q, 1)])
        assert seqs_of(await store.read(Q)) == [2]
        assert (await store.stats(Q)).last_seq == 2

    async def test_destinations_listing(self, store: PersistenceAdapter) -> None:
        sub = SubscriptionRecord("client", "sub", T)
        await store.write([AddDestination(Q), AddDestination(T), AddSubscription(sub)])
        await store.write(adds(sub.key, [1]))
        assert sorted(await store.destinations()) == sorted([Q, T])
        await store.write([AddDestination(Q)])  # declaring twice is harmless
        assert sorted(await store.destinations()) == sorted([Q, T])

    async def test_remove_destination_drops_its_messages(self, store: PersistenceAdapter) -> None:
        await store.write([AddDestination(Q), AddDestination(Q2), *adds(Q, range(1, 6)),
                           *adds(Q2, [1])])
        await store.write([RemoveDestination(Q)])
        assert await store.destinations() == [Q2]
        assert await store.read(Q) == []
        assert (await store.stats(Q)).count == 0
        assert seqs_of(await store.read(Q2)) == [1]

    # -- durable subscriptions -------------------------------------------------

    async def test_subscription_records(self, store: PersistenceAdapter) -> None:
        a = SubscriptionRecord("c1", "a", T, selector="color = 'red'", no_local=True,
                               extra={"origin": "test", "n": 3})
        b = SubscriptionRecord("c2", "b", "topic://conformance.>")
        await store.write([AddSubscription(a)])
        await store.write([AddSubscription(b)])
        subs = {s.key: s for s in await store.subscriptions()}
        assert subs == {a.key: a, b.key: b}
        assert a.key == subscription_key("c1", "a")
        changed = SubscriptionRecord("c1", "a", T, selector="color = 'blue'")
        await store.write([AddSubscription(changed)])  # same key: replaces the record
        subs = {s.key: s for s in await store.subscriptions()}
        assert subs[a.key] == changed and len(subs) == 2
        await store.write([RemoveSubscription(b.key)])
        assert [s.key for s in await store.subscriptions()] == [a.key]

    async def test_subscription_messages_and_unsubscribe(self, store: PersistenceAdapter) -> None:
        a = SubscriptionRecord("c1", "a", T)
        b = SubscriptionRecord("c1", "b", T)
        await store.write([AddDestination(T), AddSubscription(a), AddSubscription(b)])
        m = msg(1, T)
        await store.write([AddMessage(a.key, 1, m), AddMessage(b.key, 1, m)])  # fan-out
        await store.write([AddMessage(a.key, 2, msg(2, T))])
        assert seqs_of(await store.read(a.key)) == [1, 2]
        assert seqs_of(await store.read(b.key)) == [1]
        assert (await store.read(b.key))[0].message.body == m.body
        await store.write([RemoveMessage(a.key, 1)])
        assert seqs_of(await store.read(b.key)) == [1]  # the other subscription's copy stays
        await store.write([RemoveSubscription(a.key)])
        assert await store.read(a.key) == []
        assert (await store.stats(a.key)).count == 0
        assert [s.key for s in await store.subscriptions()] == [b.key]
        assert seqs_of(await store.read(b.key)) == [1]

    async def test_fan_out_of_one_message_to_many_keys(self, store: PersistenceAdapter) -> None:
        m = msg(7, T, size=1000)
        keys = [subscription_key("c", f"s{i}") for i in range(5)]
        await store.write([AddSubscription(SubscriptionRecord("c", f"s{i}", T)) for i in range(5)])
        await store.write([AddMessage(k, 1, m) for k in keys])
        await store.write([RemoveMessage(keys[0], 1), RemoveMessage(keys[3], 1)])
        for i, k in enumerate(keys):
            got = await store.read(k)
            if i in (0, 3):
                assert got == []
            else:
                assert seqs_of(got) == [1]
                assert_same_message(got[0].message, m)

    # -- stats ------------------------------------------------------------------

    async def test_stats(self, store: PersistenceAdapter) -> None:
        await store.write(adds(Q, range(1, 6), size=100))
        st = await store.stats(Q)
        assert (st.count, st.last_seq) == (5, 5)
        assert st.size >= 0
        await store.write([RemoveMessage(Q, s) for s in range(1, 6)])
        st = await store.stats(Q)
        assert (st.count, st.last_seq) == (0, 5)  # the last sequence is never forgotten
        await store.write(adds(Q, [6]))
        assert (await store.stats(Q)).last_seq == 6
        assert (await store.stats("queue://never")).last_seq == 0

    async def test_size_reports_usage(self, store: PersistenceAdapter) -> None:
        before = store.size()
        await store.write(adds(Q, range(1, 101), size=1024))
        after = store.size()
        assert isinstance(after, int) and after >= 0
        if store.persistent:
            assert after > before, "a persistent store reports the bytes it uses"

    # -- fidelity -----------------------------------------------------------------

    @staticmethod
    def full_message() -> Message:
        m = Message(
            b"\x00\x01binary\xffbody",
            destination=Destination.parse(Q),
            message_id="ID:host-1-2-3:4:-1:5:6",
            durable=True,
            priority=9,
            expiration=1_900_000_000_000,
            timestamp=1_700_000_000_123,
            correlation_id="corr-\u00e9",
            reply_to=Destination.parse("topic://replies.\u00fc"),
            type="JMSType-x",
            group_id="group-1",
            group_seq=42,
            user_id="alice",
            content_type="application/octet-stream",
            body_type=BodyType.BYTES,
            properties={
                "s": "text \u2603", "i": -7, "big": 2**62, "f": 1.5, "t": True, "n": None,
                "b": b"\x00\xffbytes", "nan": math.inf, "empty": "",
            },
            annotations={"x-opt-jms-dest": 0, "x-opt-bytes": b"\x01"},
            encoded=b"\x00Sp\xc0\x02\x01A wire bytes",
            encoding="amqp-conformance-opaque",
            origin="broker-1",
            producer_id="producer-9",
        )
        m.scheduled_delay, m.scheduled_period, m.scheduled_repeat = 1000, 500, 3
        return m

    async def test_message_fidelity(self, store: PersistenceAdapter, reopen: Reopen) -> None:
        m = self.full_message()
        text = Message("h\u00e9llo".encode(), body_type=BodyType.TEXT,
                       destination=Destination.parse(Q), message_id="ID:text")
        await store.write([AddMessage(Q, 1, m), AddMessage(Q, 2, text)])
        got = await store.read(Q)
        assert_same_message(got[0].message, m)
        assert_same_message(got[1].message, text)
        if store.persistent:
            store = await reopen(store)
            got = await store.read(Q)
            assert_same_message(got[0].message, m)
            assert_same_message(got[1].message, text)

    async def test_read_encoded_gives_the_stored_bytes(self, store: PersistenceAdapter,
                                                       reopen: Reopen) -> None:
        m = self.full_message()
        text = Message(b"plain", destination=Destination.parse(Q), message_id="ID:plain",
                       timestamp=1_700_000_000_002)
        await store.write([AddMessage(Q, 1, m), AddMessage(Q, 2, text), AddMessage(Q, 3, m)])
        for _ in range(2 if store.persistent else 1):
            got = await store.read_encoded(Q, 0, None, "amqp-conformance-opaque")
            assert [(s, t) for s, t, _ in got] == [(1, m.timestamp), (2, text.timestamp),
                                                 (3, m.timestamp)]
            # the bytes as stored for the asked encoding; the message for any other
            assert got[0][2] == m.encoded and got[2][2] == m.encoded
            assert isinstance(got[1][2], Message)
            assert_same_message(got[1][2], text)
            other = await store.read_encoded(Q, 1, 1, "another-encoding")
            assert len(other) == 1 and isinstance(other[0][2], Message)
            assert other[0][2].message_id == "ID:plain"
            if store.persistent:
                store = await reopen(store)

    async def test_lazy_properties_survive(self, store: PersistenceAdapter, reopen: Reopen) -> None:
        wire = json.dumps({"props": {"color": "red", "n": 3}}).encode()
        m = Message(b"body", destination=Destination.parse(Q), message_id="ID:lazy",
                    encoded=wire, encoding=LAZY_ENCODING, loader=_lazy_loader)
        await store.write([AddMessage(Q, 1, m)])
        got = (await store.read(Q))[0].message
        assert got.encoded == wire and got.encoding == LAZY_ENCODING
        assert got.properties == {"color": "red", "n": 3}
        if store.persistent:
            store = await reopen(store)
            got = (await store.read(Q))[0].message
            assert got.properties == {"color": "red", "n": 3}

    async def test_large_message(self, store: PersistenceAdapter) -> None:
        body = bytes(range(256)) * 4096  # 1 MiB
        await store.write([AddMessage(Q, 1, Message(body, message_id="ID:big"))])
        assert (await store.read(Q))[0].message.body == body

    async def test_unsynced_writes_are_readable(self, store: PersistenceAdapter) -> None:
        await store.write(adds(Q, range(1, 4)), sync=False)
        await store.write([RemoveMessage(Q, 2)], sync=False)
        assert seqs_of(await store.read(Q)) == [1, 3]

    # -- concurrency ------------------------------------------------------------

    async def test_concurrent_writes_from_many_tasks(self, store: PersistenceAdapter,
                                                     reopen: Reopen) -> None:
        dests = [f"queue://conformance.c{i}" for i in range(4)]
        counters = dict.fromkeys(dests, 0)

        async def producer(p: int) -> None:
            for i in range(20):
                d = dests[(p + i) % len(dests)]
                counters[d] += 1  # sequence assigned before the write, as the kernel does
                seq = counters[d]
                await store.write([AddMessage(d, seq, msg(seq, d, 200))])

        await asyncio.gather(*(producer(p) for p in range(50)))
        total = 0
        for d in dests:
            got = await store.read(d)
            assert seqs_of(got) == list(range(1, counters[d] + 1))
            total += len(got)
        assert total == 1000
        if store.persistent:
            store = await reopen(store)
            for d in dests:
                assert seqs_of(await store.read(d)) == list(range(1, counters[d] + 1))
                assert (await store.stats(d)).last_seq == counters[d]

    async def test_concurrent_adds_and_removes(self, store: PersistenceAdapter,
                                               reopen: Reopen) -> None:
        await store.write(adds(Q, range(1, 201)))

        async def consumer(start: int) -> None:
            for s in range(start, 201, 4):
                await store.write([RemoveMessage(Q, s)])

        async def producer() -> None:
            for s in range(201, 301):
                await store.write(adds(Q, [s]))

        await asyncio.gather(*(consumer(i) for i in range(1, 5)), producer())
        assert seqs_of(await store.read(Q)) == list(range(201, 301))
        if store.persistent:
            store = await reopen(store)
            assert seqs_of(await store.read(Q)) == list(range(201, 301))

    # -- duplicate-detection ids ---------------------------------------------------

    async def test_duplicate_ids_in_order_and_removed(self, store: PersistenceAdapter) -> None:
        assert await store.duplicate_ids() == []
        await store.write([AddDestination(Q), *adds(Q, [1]), AddDuplicateId(Q, 1, b"sa"),
                           AddDuplicateId(Q2, 1, b"b\x00\xff")])
        await store.write([AddDuplicateId(Q, 2, b"sb"), AddDuplicateId(Q, 3, b"sc"),
                           RemoveDuplicateId(Q, 1)])
        await store.write([RemoveDuplicateId(Q, 99)])  # unknown: harmless
        got = await store.duplicate_ids()
        want = [DuplicateIdRecord(Q, 2, b"sb"), DuplicateIdRecord(Q, 3, b"sc"),
                DuplicateIdRecord(Q2, 1, b"b\x00\xff")]
        assert sorted(got, key=lambda r: (r.address, r.seq)) == want
        assert [(r.address, r.seq) for r in got] == sorted((r.address, r.seq) for r in got)
        assert seqs_of(await store.read(Q)) == [1]  # ids are not messages

    async def test_duplicate_ids_survive_reopen(self, store: PersistenceAdapter,
                                                reopen: Reopen) -> None:
        if not store.persistent:
            pytest.skip(f"{NOT_APPLICABLE}{type(store).__name__} is not persistent")
        await store.write([AddDestination(Q), *adds(Q, [1]), AddDuplicateId(Q, 1, b"s1")])
        await store.write([AddDuplicateId(Q, s, f"s{s}".encode()) for s in range(2, 6)])
        await store.write([RemoveDuplicateId(Q, 1), RemoveDuplicateId(Q, 2)])
        store = await reopen(store)
        assert [(r.seq, r.dup_id) for r in await store.duplicate_ids()] == [
            (3, b"s3"), (4, b"s4"), (5, b"s5")]
        await store.write([RemoveDuplicateId(Q, 3), AddDuplicateId(Q, 6, b"s6")])
        store = await reopen(store)
        assert [r.seq for r in await store.duplicate_ids()] == [4, 5, 6]

    # -- persistence ------------------------------------------------------------

    async def test_everything_survives_reopen(self, store: PersistenceAdapter,
                                              reopen: Reopen) -> None:
        if not store.persistent:
            pytest.skip(f"{NOT_APPLICABLE}{type(store).__name__} is not persistent")
        sub = SubscriptionRecord("c", "s", T, selector="a > 1", extra={"k": "v"})
        await store.write([AddDestination(Q), AddDestination(T), AddSubscription(sub)])
        await store.write(adds(Q, range(1, 11)))
        await store.write([AddMessage(sub.key, 1, msg(1, T)), AddMessage(sub.key, 2, msg(2, T))])
        await store.write([RemoveMessage(Q, 3), RemoveMessage(sub.key, 1)])
        store = await reopen(store)
        assert sorted(await store.destinations()) == sorted([Q, T])
        assert await store.subscriptions() == [sub]
        assert seqs_of(await store.read(Q)) == [1, 2, 4, 5, 6, 7, 8, 9, 10]
        assert seqs_of(await store.read(Q, after=4, limit=3)) == [5, 6, 7]
        assert seqs_of(await store.read(sub.key)) == [2]
        st = await store.stats(Q)
        assert (st.count, st.last_seq) == (9, 10)
        # and it keeps working after the restart
        await store.write([*adds(Q, [11]), RemoveMessage(Q, 1)])
        store = await reopen(store)
        assert seqs_of(await store.read(Q)) == [2, 4, 5, 6, 7, 8, 9, 10, 11]

    async def test_last_seq_survives_restart_after_all_removed(
            self, store: PersistenceAdapter, reopen: Reopen) -> None:
        if not store.persistent:
            pytest.skip(f"{NOT_APPLICABLE}{type(store).__name__} is not persistent")
        await store.write([AddDestination(Q), *adds(Q, range(1, 8))])
        await store.write([RemoveMessage(Q, s) for s in range(1, 8)])
        store = await reopen(store)
        st = await store.stats(Q)
        assert (st.count, st.last_seq) == (0, 7)
        assert await store.destinations() == [Q]
        store = await reopen(store)  # twice: nothing that was read back is lost again
        assert (await store.stats(Q)).last_seq == 7

    async def test_removed_things_stay_removed_after_reopen(
            self, store: PersistenceAdapter, reopen: Reopen) -> None:
        if not store.persistent:
            pytest.skip(f"{NOT_APPLICABLE}{type(store).__name__} is not persistent")
        sub = SubscriptionRecord("c", "gone", T)
        await store.write([AddDestination(Q), AddDestination(Q2), AddSubscription(sub),
                           *adds(Q, range(1, 4)), AddMessage(sub.key, 1, msg(1, T))])
        await store.write([RemoveDestination(Q), RemoveSubscription(sub.key)])
        store = await reopen(store)
        assert await store.destinations() == [Q2]
        assert await store.subscriptions() == []
        assert await store.read(Q) == []
        assert await store.read(sub.key) == []
