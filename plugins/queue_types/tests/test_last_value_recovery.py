"""After a restart a last value queue keeps only the newest stored message of each
slot (the queue, or its partition), also when the store holds more than the queue
reads into memory at once: the older values still in the store are replaced too.
A `relaymq run` process on kahaDB, killed and started again, reached by stomp.py."""

from __future__ import annotations

import zlib

import pytest
from relaymq.testing import wait_until

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
pytest.importorskip("relaymq_stomp", reason="relaymq-stomp is not installed")

from .support import Broker, Client, broker_xml  # noqa: E402


def config(window: str) -> str:
    """`window`: each queue's memory window for stored messages (storeCursorMemoryLimit)."""
    return broker_xml("lvq-recovery", f"""
    <policyEntry queue="lvr.>" queueType="lastValue" storeCursorMemoryLimit="{window}"/>
    <policyEntry queue="lvrp.>" queueType="lastValue" partitionCount="2"
                 storeCursorMemoryLimit="{window}"/>""")

PADDING = "x" * 2048
VALUES = 20


def test_values_stored_beyond_the_memory_window_are_replaced_at_recovery(tmp_path) -> None:
    """A consumer holds every value unacknowledged (so none is replaced while the
    broker runs) when the broker is killed: all of them are stored. After the restart the
    consumer gets the newest value of the queue, and the newest of each partition,
    not the older ones left in the store beyond the first page: the broker starts
    again with a memory window of a few messages, so recovery reads only a few."""
    keys = ("a", "d")
    assert len({zlib.crc32(k.encode()) % 2 for k in keys}) == 2  # one per partition
    b = Broker(tmp_path, config(window="32 mb"))
    b.start()
    try:
        c = Client(b, "holder")
        c.subscribe("/queue/lvr.q", id="1", ack="client-individual",
                    **{"activemq.prefetchSize": "1000"})
        c.subscribe("/queue/lvrp.q", id="2", ack="client-individual",
                    **{"activemq.prefetchSize": "1000"})
        for i in range(VALUES):
            c.send("/queue/lvr.q", f"v{i} {PADDING}", persistent="true")
            c.send("/queue/lvrp.q", f"{keys[i % 2]}{i} {PADDING}", persistent="true",
                   JMSXGroupID=keys[i % 2])
        c.wait(2 * VALUES)  # all delivered, none acknowledged, all stored
        b.kill()  # a crash: the held values stay stored (a consumer that leaves gives them back)
    except BaseException:
        b.kill()
        raise
    b.write_config(config(window="8192"))
    b.start()
    try:
        c = Client(b, "after")
        c.subscribe("/queue/lvr.q", id="1")
        c.subscribe("/queue/lvrp.q", id="2")
        c.wait(3)  # the recovered values
        c.send("/queue/lvr.q", "marker", persistent="true")  # read after any stored value
        c.send("/queue/lvrp.q", "marker", persistent="true", JMSXGroupID="a")
        wait_until(lambda: "marker" in c.bodies_of("1") and "marker" in c.bodies_of("2"),
                   "both markers")
        assert [m.split()[0] for m in c.bodies_of("1")] == [f"v{VALUES - 1}", "marker"]
        assert sorted(m.split()[0] for m in c.bodies_of("2")) == [
            f"a{VALUES - 2}", f"d{VALUES - 1}", "marker"]
        assert c.bodies_of("2")[-1] == "marker"
        assert f"{VALUES - 1} older values found stored at recovery" in b.output()
        assert f"{VALUES - 2} older values found stored at recovery" in b.output()
        c.close()
    finally:
        b.stop()
