"""Failures are logged once per change, visible in management, retried; the
source keeps serving its clients."""

from __future__ import annotations

import logging
from typing import Any

from mirrortools import free_port, mirror_element, receive, send
from relaymq.config.model import PluginElement
from relaymq.testing.waits import wait_until


def test_unreachable_target_then_up(brokers: Any, caplog: Any) -> None:
    port = free_port()
    caplog.set_level(logging.INFO, logger="relaymq.mirror")
    a = brokers(mirrors=[mirror_element(f"tcp://127.0.0.1:{port}", "B")])
    wait_until(lambda: a.connection_status("B").detail["retries"] >= 3, "retries counted")
    info = a.connection_status("B")
    assert info.detail["connected"] is False and info.detail["last_error"]
    assert a.mirror_status("B")["state"].startswith("target unreachable")
    # A keeps serving clients; its events wait in the SnF queue
    send(a.url, "queue://q", ["x"] * 5)
    wait_until(lambda: a.mirror_status("B")["snf_depth"] >= 5, "events stored and forwarded later")
    unreachable = [r for r in caplog.records if "target unreachable" in r.getMessage()]
    assert len(unreachable) == 1  # once per state change, not per retry
    b = brokers(port=port)
    wait_until(lambda: b.depth("queue://q") == 5, "the backlog drained in order")
    assert a.mirror_status("B")["state"] == "connected"
    assert a.connection_status("B").detail["connected"] is True


def test_self_target_is_refused_with_a_clear_error(brokers: Any) -> None:
    port = free_port()
    a = brokers(port=port, mirrors=[mirror_element(f"tcp://127.0.0.1:{port}", "me")])
    wait_until(lambda: "itself" in (a.mirror_status("me").get("last_error") or ""),
               "refusal visible in management")
    assert a.mirror_status("me")["state"] == "refused by the target"
    send(a.url, "queue://q", ["still serving"])
    assert len(receive(a.url, "queue://q", 1)) == 1


def test_wrong_credentials(brokers: Any) -> None:
    users = PluginElement("users", {}, [PluginElement("authenticationUser", {
        "username": "mirror", "password": "right", "groups": "admins"})])
    b = brokers(plugins=[PluginElement("simpleAuthenticationPlugin",
                                       {"anonymousAccessAllowed": "false"}, [users])])
    a = brokers(mirrors=[mirror_element(f"tcp://{b.address}", "B", user="mirror",
                                        password="wrong")])
    wait_until(lambda: a.connection_status("B").detail["retries"] >= 2, "refused and retried")
    detail = a.connection_status("B").detail
    assert detail["connected"] is False
    assert "auth" in (detail["last_error"] or "").lower()
    # the mirror says what is wrong, not only that the target cannot be reached
    assert a.mirror_status("B")["state"] == "authentication refused (retrying)"
    b2 = brokers(plugins=[PluginElement("simpleAuthenticationPlugin",
                                        {"anonymousAccessAllowed": "false"}, [users])])
    c = brokers(mirrors=[mirror_element(f"tcp://{b2.address}", "B", user="mirror",
                                        password="right")])
    wait_until(lambda: c.mirror_status("B").get("state") == "connected", "right credentials work")


def test_sync_send_waits_for_the_target(brokers: Any, tmp_path: Any) -> None:
    import threading

    port = free_port()
    a = brokers(store=tmp_path / "a",
                mirrors=[mirror_element(f"tcp://127.0.0.1:{port}", "B", sync="true")])
    done = threading.Event()

    def produce() -> None:
        send(a.url, "queue://sync", ["held"])
        done.set()

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    wait_until(lambda: a.mirror_status("B")["snf_depth"] >= 1, "the event is stored")
    assert not done.is_set()  # stored on A, not accepted by B: the send is held
    b = brokers(port=port)
    wait_until(done.is_set, "the send completes once B accepted it")
    assert b.depth("queue://sync") == 1
    t.join(10)


def test_failover_list_mirrors_to_the_second_host(brokers: Any) -> None:
    dead = free_port()
    b2 = brokers()
    a = brokers(mirrors=[mirror_element(f"tcp://127.0.0.1:{dead}#tcp://{b2.address}", "DR")])
    wait_until(lambda: a.mirror_status("DR").get("state") == "connected", "mirroring to B2")
    assert a.connection_status("DR").detail["target"] == f"tcp://{b2.address}"
    send(a.url, "queue://f", ["x", "y"])
    wait_until(lambda: b2.depth("queue://f") == 2, "on B2")


def test_a_restarted_source_does_not_count_what_the_target_had_as_pending(
        brokers: Any, tmp_path: Any) -> None:
    """The SnF depth after a restart is what is still stored for the target, not
    every event the mirror ever captured."""
    b = brokers()
    mirrors = [mirror_element(f"tcp://{b.address}", "B")]
    a = brokers(store=tmp_path / "a", mirrors=mirrors)
    wait_until(lambda: a.mirror_status("B").get("state") == "connected", "A's mirror connected")
    send(a.url, "queue://restart.q", [f"m{i}" for i in range(25)])
    wait_until(lambda: a.mirror_status("B")["snf_depth"] == 0, "the target has every event")
    assert b.depth("queue://restart.q") == 25
    a.stop()
    a = brokers(store=tmp_path / "a", mirrors=mirrors)  # the same store
    wait_until(lambda: a.mirror_status("B").get("state") == "connected", "A's mirror back")
    assert a.mirror_status("B")["snf_depth"] == 0
    assert a.connection_status("B").detail["operations"][0]["snf_depth"] == 0
    send(a.url, "queue://restart.q", ["after"])  # and the next event still goes
    wait_until(lambda: b.depth("queue://restart.q") == 26, "the next event mirrored")
    wait_until(lambda: a.mirror_status("B")["snf_depth"] == 0, "and accepted")


def test_non_persistent_sends_the_source_lost_in_a_restart_do_not_reach_the_target(
        brokers: Any, tmp_path: Any) -> None:
    """Sent while the target is down, then the source restarts: its
    non-persistent messages are gone there (memory only), and the target does not
    get them either; the persistent ones are mirrored, in order."""
    port = free_port()
    mirrors = [mirror_element(f"tcp://127.0.0.1:{port}", "B")]
    a = brokers(store=tmp_path / "a", mirrors=mirrors)
    send(a.url, "queue://np.q", ["np-0", "np-1"], durable=False)
    send(a.url, "queue://np.q", ["p-0"])
    send(a.url, "queue://np.q", ["np-2"], durable=False)
    send(a.url, "queue://np.q", ["p-1"])
    a.stop()
    a = brokers(store=tmp_path / "a", mirrors=mirrors)
    assert a.depth("queue://np.q") == 2  # the source kept the persistent ones only
    send(a.url, "queue://np.q", ["np-after"], durable=False)  # sent now: mirrored
    b = brokers(port=port)
    wait_until(lambda: a.mirror_status("B").get("state") == "connected"
               and a.mirror_status("B")["snf_depth"] == 0, "the backlog drained")
    got = receive(b.url, "queue://np.q", 4, timeout=5)
    assert [m.body for m in got] == ["p-0", "p-1", "np-after"]
