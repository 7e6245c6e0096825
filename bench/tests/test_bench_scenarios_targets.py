"""Scenario validation, the standard YAML matrix, target specs and address styles."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from relaymq_bench import scenarios as sc
from relaymq_bench import targets as tg

STANDARD = Path(__file__).resolve().parents[1] / "scenarios" / "standard.yaml"


def test_standard_suite_is_the_documented_matrix():
    suite = sc.load_suite(str(STANDARD))
    assert len(suite) == 8
    assert {(s.protocol, s.persistent, s.mode) for s in suite} == {
        (p, d, m) for p in ("amqp", "stomp") for d in (False, True)
        for m in ("sequential", "concurrent")}
    assert all(s.size == 1024 and s.count == 20000 and s.runs >= 1 for s in suite)
    assert suite[0].label == "amqp-sequential-transient-queue-1024B-20000"


def test_expand_matrix_plus_explicit_scenarios():
    doc = {"defaults": {"count": 10}, "matrix": {"protocol": ["amqp", "stomp"]},
           "scenarios": [{"name": "fanout", "pattern": "topic", "consumers": 3}]}
    out = sc.expand(doc)
    assert [s.label for s in out] == ["amqp-concurrent-transient-queue-1024B-10",
                                      "stomp-concurrent-transient-queue-1024B-10", "fanout"]
    assert out[2].consumers == 3 and out[2].count == 10


@pytest.mark.parametrize("bad", [
    {"mode": "parallel"}, {"protocol": "mqtt"}, {"size": 10}, {"producers": 0},
    {"count": None}, {"duration": 5, "count": 10}, {"ack": "never"}, {"rate": 0},
    {"ack_receipt_every": 10}, {"protocol": "stomp", "ack": "auto", "ack_receipt_every": 10},
    {"protocol": "stomp", "ack_receipt_every": -1},
])
def test_invalid_scenarios_are_rejected(bad):
    with pytest.raises(sc.ScenarioError):
        sc.make_scenario(bad)


def test_unknown_keys_are_rejected():
    with pytest.raises(sc.ScenarioError):
        sc.make_scenario({"sizee": 5})
    with pytest.raises(sc.ScenarioError):
        sc.expand({"matrx": {}})


def test_duration_replaces_count_and_label_shows_shape():
    s = sc.make_scenario({"duration": 2.5, "producers": 2, "consumers": 3, "rate": 500})
    assert s.count is None
    assert s.label == "amqp-concurrent-transient-queue-1024B-2.5s-2p3c-500/s"
    assert sc.override([s], count=100)[0].duration is None


def test_parse_url_defaults_and_credentials():
    ep = tg.parse_url("amqp://us%40r:p%3Ass@broker:5673/vh")
    assert (ep.host, ep.port, ep.user, ep.password, ep.vhost) == ("broker", 5673, "us@r",
                                                                  "p:ss", "vh")
    assert ep.url == "amqp://broker:5673"  # no credentials in reports
    assert tg.parse_url("stomp://h").port == 61613
    assert tg.parse_url("amqp://h").port == 5672
    with pytest.raises(tg.TargetError):
        tg.parse_url("mqtt://h")


def test_parse_target_spec_forms():
    t = tg.parse_target("label=rabbit,url=amqp://127.0.0.1:5673,url=stomp://127.0.0.1:61614,"
                        "pid=42,style=rabbitmq")
    assert t.label == "rabbit" and t.pid == 42 and t.style == "rabbitmq"
    assert set(t.endpoints) == {"amqp", "stomp"}
    assert t.endpoint("amqp").user == "guest"  # RabbitMQ default account
    short = tg.parse_target("amq=amqp://h:1")
    assert short.label == "amq" and short.endpoints["amqp"].port == 1
    assert tg.parse_target("amqp://h:2").label == "h:2"
    creds = tg.parse_target("url=stomp://h,user=u,password=p")
    assert (creds.endpoint("stomp").user, creds.endpoint("stomp").password) == ("u", "p")
    for bad in ("pid=3", "url=amqp://h,colour=red", "url=amqp://h,style=kafka"):
        with pytest.raises(tg.TargetError):
            tg.parse_target(bad)
    with pytest.raises(tg.TargetError):
        short.endpoint("stomp")


def test_pidfile_is_read_each_time(tmp_path):
    f = tmp_path / "broker.pid"
    f.write_text("123\n")
    t = tg.parse_target(f"url=amqp://h,pidfile={f}")
    assert t.broker_pid() == 123
    f.write_text("456")
    assert t.broker_pid() == 456
    f.unlink()
    with pytest.raises(tg.TargetError):
        t.broker_pid()


@pytest.mark.parametrize("style, proto, pattern, expected", [
    ("relaymq", "amqp", "queue", {"address": "queue://q"}),
    ("relaymq", "amqp", "topic", {"address": "topic://q"}),
    ("activemq", "stomp", "topic", {"address": "/topic/q"}),
    ("rabbitmq", "amqp", "queue", {"address": "/queue/q", "durable": 2}),
    ("rabbitmq", "amqp", "topic", {"address": "/topic/q"}),
    ("rabbitmq", "stomp", "queue", {"address": "/queue/q"}),
    ("artemis", "amqp", "topic", {"address": "q", "capabilities": ["topic"]}),
    ("artemis", "stomp", "queue", {"address": "q", "headers": {"destination-type": "ANYCAST"}}),
])
def test_address_styles(style, proto, pattern, expected):
    assert tg.link_config(style, proto, pattern, "q", persistent=True) == expected


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_check_reachable_explains_what_to_do():
    ep = tg.Endpoint("amqp", "127.0.0.1", _closed_port())
    with pytest.raises(tg.TargetError) as err:
        tg.check_reachable(ep, "relaymq", timeout=1)
    msg = str(err.value)
    assert f"127.0.0.1:{ep.port}" in msg and "make run" in msg and "rabbitmq.sh" in msg
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        tg.check_reachable(tg.Endpoint("stomp", "127.0.0.1", srv.getsockname()[1]), "x")


def test_every_shipped_suite_file_parses():
    files = sorted(STANDARD.parent.glob("*.yaml"))
    assert len(files) >= 2
    for f in files:
        suite = sc.load_suite(str(f))
        assert suite and len({s.label for s in suite}) == len(suite), f


def test_ack_modes_and_the_ack_suite():
    s = sc.make_scenario({"protocol": "stomp", "ack": "client-individual", "ack_receipt_every": 50})
    assert s.label.endswith("-indivack-ackrcpt50")
    acks = sc.load_suite(str(Path(__file__).resolve().parents[1] / "scenarios" / "acks.yaml"))
    modes = {(x.protocol, x.persistent, x.ack, x.ack_receipt_every) for x in acks}
    for protocol in ("stomp", "amqp"):
        for persistent in (False, True):
            for ack in sc.ACK_MODES:
                assert (protocol, persistent, ack, 0) in modes
    assert ("stomp", False, "client-individual", 100) in modes
