"""The console's REST API, /metrics, queues.jsp, Jolokia reads and the admin CLI,
against a real broker process fed by a real STOMP client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from relaymq.testing import wait_until

from .conftest import ADMIN, APP, VIEWER
from .console_clients import collecting, queue, send

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
RELAYMQ = str(Path(sys.executable).with_name("relaymq"))


def test_queues_are_listed_with_statistics_sorted_filtered_and_paged(console) -> None:
    send(console, "/queue/api.list.a", ["1", "2", "3"])
    send(console, "/queue/api.list.b", ["1"])
    r = console.client().get("/api/v1/queues", params={"filter": "api.list", "sort": "-depth"})
    assert r.status_code == 200
    data = r.json()
    assert [(q["name"], q["depth"], q["enqueued"]) for q in data["items"]] == \
        [("api.list.a", 3, 3), ("api.list.b", 1, 1)]
    one = console.client().get("/api/v1/queues", params={"filter": "api.list", "size": 1,
                                                         "page": 2, "sort": "name"}).json()
    assert one["total"] == 2 and [q["name"] for q in one["items"]] == ["api.list.b"]
    bad = console.client().get("/api/v1/queues", params={"sort": "nope"})
    assert bad.status_code == 400 and "cannot sort by 'nope'" in bad.json()["error"]


def test_browse_shows_escaped_previews_and_pages_by_sequence(console) -> None:
    send(console, "/queue/api.browse", [f"m{i}" for i in range(5)])
    first = console.client().get("/api/v1/queues/api.browse/messages", params={"limit": 3}).json()
    assert [m["body"]["preview"] for m in first["messages"]] == ["m0", "m1", "m2"]
    rest = console.client().get("/api/v1/queues/api.browse/messages",
                                params={"after": first["next_after"]}).json()
    assert [m["body"]["preview"] for m in rest["messages"]] == ["m3", "m4"] and rest["done"]
    assert queue(console, "api.browse")["depth"] == 5  # browsing consumes nothing


def test_send_move_copy_remove_and_purge(console) -> None:
    c = console.client()
    for i in range(4):
        r = c.post("/api/v1/queues/api.ops/messages",
                   json={"body": f"b{i}", "properties": {"n": i}, "persistent": True})
        assert r.status_code == 200, r.text
    assert c.post("/api/v1/queues/api.ops/move", json={"to": "api.ops.hold", "selector": "n >= 2"}
                  ).json() == {"moved": 2, "duplicates": 0}
    assert c.post("/api/v1/queues/api.ops.hold/copy", json={"to": "api.ops.copy", "selector": "n = 3"}
                  ).json() == {"copied": 1, "duplicates": 0}
    ids = [m["message_id"] for m in
           c.get("/api/v1/queues/api.ops/messages").json()["messages"]]
    assert c.post("/api/v1/queues/api.ops/remove",
                  json={"message_ids": ids[:1]}).json() == {"removed": 1}
    assert queue(console, "api.ops")["depth"] == 1
    assert c.post("/api/v1/queues/api.ops.hold/purge").json() == {"removed": 2}
    assert queue(console, "api.ops.hold")["depth"] == 0
    assert queue(console, "api.ops.copy")["depth"] == 1
    missing = c.post("/api/v1/queues/api.ops/move", json={"selector": "n = 1"})
    assert missing.status_code == 400 and "'to'" in missing.json()["error"]
    assert c.delete("/api/v1/queues/api.ops.copy").json() == {"deleted": True}


def test_retry_sends_dead_lettered_messages_back_to_their_queue(console) -> None:
    conn, received = collecting(console)
    conn.send("/queue/api.retry", "poison", headers={"persistent": "true"})
    conn.subscribe("/queue/api.retry", id="1", ack="client-individual")
    wait_until(lambda: received, "the message", 10)
    conn.nack(received[0].headers["ack"])  # to ActiveMQ.DLQ at once (no redelivery plugin)
    conn.unsubscribe("1")
    wait_until(lambda: queue(console, "ActiveMQ.DLQ")["depth"] >= 1, "the DLQ", 10)
    r = console.client().post("/api/v1/queues/ActiveMQ.DLQ/retry",
                              json={"selector": "JMSMessageID IS NOT NULL"})
    assert r.status_code == 200 and r.json()["retried"] >= 1
    wait_until(lambda: queue(console, "api.retry")["depth"] == 1, "the retried message", 10)
    conn.disconnect()


def test_a_viewer_may_look_but_not_change(console) -> None:
    send(console, "/queue/api.viewer", ["x"])
    viewer = console.client(VIEWER)
    assert viewer.get("/api/v1/queues/api.viewer").json()["depth"] == 1
    r = viewer.post("/api/v1/queues/api.viewer/purge")
    assert r.status_code == 403 and "may only view" in r.json()["error"]
    assert queue(console, "api.viewer")["depth"] == 1
    assert console.client(APP).get("/api/v1/queues").status_code == 403  # in no console group
    assert console.client(None).get("/api/v1/queues").status_code == 401
    assert console.client(("ops", "wrong")).get("/api/v1/queues").status_code == 401


def test_a_session_needs_its_csrf_token_for_changes(console) -> None:
    send(console, "/queue/api.csrf", ["x"])
    with httpx.Client(base_url=console.url, follow_redirects=False) as browser:
        login = browser.post("/login", data={"username": ADMIN[0], "password": ADMIN[1]})
        assert login.status_code == 303
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        refused = browser.post("/api/v1/queues/api.csrf/purge")
        assert refused.status_code == 403 and "CSRF" in refused.json()["error"]
        page = browser.get("/queues/api.csrf").text
        token = page.split('name="csrf" value="')[1].split('"')[0]
        ok = browser.post("/api/v1/queues/api.csrf/purge", headers={"X-CSRF-Token": token})
        assert ok.status_code == 200 and ok.json() == {"removed": 1}
    assert queue(console, "api.csrf")["depth"] == 0


def test_pages_send_security_headers(console) -> None:
    r = console.client().get("/login")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert "unsafe-inline" not in r.headers["content-security-policy"]
    assert r.headers["x-frame-options"] == "DENY"


def test_bad_requests_get_json_errors(console) -> None:
    c = console.client()
    r = c.post("/api/v1/queues/api.bad/move", content=b"{not json",
               headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]
    r = c.get("/api/v1/queues/api.bad.none/messages", params={"limit": "ten"})
    assert r.status_code == 400 and "'limit' must be an integer" in r.json()["error"]
    r = c.get("/api/v1/queues/no.such.queue")
    assert r.status_code == 404
    r = c.get("/api/v1/queues/api.bad/messages", params={"selector": "a = = 1"})
    assert r.status_code in (400, 404) and r.json()["error"]
    r = c.get("/api/v1/queues", params={"size": 0})
    assert r.status_code == 400 and "'size' must be from 1 to 1000" in r.json()["error"]
    r = c.post("/api/v1/queues/api.bad/messages", content=b"plain text")
    assert r.status_code == 400 and "JSON object" in r.json()["error"]
    r = c.post("/api/v1/queues/api.bad/messages", json={"body": "x", "properties": {"a": [1]}})
    assert r.status_code == 400 and "property 'a'" in r.json()["error"]
    # a sub-resource with a wrong method is a 405, not a queue named "api.bad/purge"
    r = c.delete("/api/v1/queues/api.bad/purge")
    assert r.status_code == 405 and r.headers["allow"] == "POST" and r.json()["error"]
    r = c.get("/api/v1/queues/x%0Ay/purge")  # the path converter stops at a newline
    assert r.status_code == 404 and r.json()["error"]


def test_the_openapi_document_is_valid_openapi_3_0(console) -> None:
    """Checked against the OpenAPI 3.0 meta-schema (the one schemathesis ships)."""
    definitions = pytest.importorskip("schemathesis.specs.openapi.definitions")
    doc = console.client().get("/api/v1/openapi.json").json()
    assert doc["openapi"].startswith("3.0")
    errors = [str(e) for e in definitions.OPENAPI_30_VALIDATOR.iter_errors(doc)]
    assert errors == []
    broken = dict(doc, paths={"/api/v1/x": {"get": {"summary": 1}}})
    assert not definitions.OPENAPI_30_VALIDATOR.is_valid(broken)  # the check can fail


def test_every_documented_path_answers_without_a_server_error(console) -> None:
    doc = console.client().get("/api/v1/openapi.json").json()
    assert doc["openapi"].startswith("3.") and doc["paths"]
    c = console.client()
    send(console, "/queue/api.doc", ["x"])
    for path, ops in doc["paths"].items():
        concrete = (path.replace("{name}", "api.doc").replace("{cid}", "none")
                    .replace("{action}", "start"))
        for method in ops:
            if method == "delete" or concrete.endswith(("/purge", "/remove")):
                continue  # destructive; covered above
            r = c.request(method.upper(), concrete, json={})
            assert r.status_code < 500, (method, concrete, r.status_code, r.text)
            assert r.headers["content-type"].startswith("application/json")


def test_metrics_match_the_broker_counts(console) -> None:
    send(console, "/queue/api.metrics", ["a", "b", "c"])
    text = console.client().get("/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    depth = {s.labels["queue"]: s.value for s in families["relaymq_queue_messages"].samples}
    assert depth["api.metrics"] == 3
    enq = {s.labels["queue"]: s.value
           for s in families["relaymq_queue_enqueued"].samples if s.name.endswith("_total")}
    assert enq["api.metrics"] == 3
    assert families["relaymq_connections"].samples[0].value >= 0
    assert families["process_resident_memory_bytes"].samples[0].value > 0
    assert console.client(None).get("/metrics").status_code == 401
    # the next scrape shows what changed since (lines are kept between scrapes) and a
    # queue created meanwhile
    def scrape() -> tuple[dict[str, float], dict[str, float]]:
        text = console.client().get("/metrics").text
        families = {f.name: f for f in text_string_to_metric_families(text)}
        return ({s.labels["queue"]: s.value for s in families["relaymq_queue_messages"].samples},
                {s.labels["queue"]: s.value for s in families["relaymq_queue_enqueued"].samples
                 if s.name.endswith("_total")})

    send(console, "/queue/api.metrics", ["d", "e"])
    depth, enq = scrape()
    assert depth["api.metrics"] == 5 and enq["api.metrics"] == 5
    send(console, "/queue/api.metrics.new", ["f"])
    depth, enq = scrape()
    assert depth["api.metrics.new"] == 1 and enq["api.metrics.new"] == 1
    assert depth["api.metrics"] == 5


def test_queues_jsp_and_jolokia_reads(console) -> None:
    import defusedxml.ElementTree as ET

    send(console, "/queue/api.jsp", ["a", "b"])
    root = ET.fromstring(console.client().get("/admin/xml/queues.jsp").content)
    stats = {q.get("name"): q.find("stats") for q in root.findall("queue")}
    assert stats["api.jsp"].get("size") == "2" and stats["api.jsp"].get("enqueueCount") == "2"
    # a name with XML's special characters stays well-formed, in the attribute and the links
    send(console, "/queue/api.jsp<&>", ["x"])
    root = ET.fromstring(console.client().get("/admin/xml/queues.jsp").content)
    odd = next(q for q in root.findall("queue") if q.get("name") == "api.jsp<&>")
    assert odd.find("stats").get("size") == "1"
    assert odd.find("feed/atom").text.startswith("queueBrowse/api.jsp%3C%26%3E?view=rss")
    mbean = ("org.apache.activemq:type=Broker,brokerName=console-test,"
             "destinationType=Queue,destinationName=api.jsp")
    for attribute, expected in (("QueueSize", 2), ("EnqueueCount", 2), ("DequeueCount", 0),
                                ("ConsumerCount", 0), ("ExpiredCount", 0), ("InFlightCount", 0)):
        r = console.client().get(f"/api/jolokia/read/{mbean}/{attribute}").json()
        assert r["status"] == 200 and r["value"] == expected, (attribute, r)
    broker_mbean = "org.apache.activemq:type=Broker,brokerName=console-test"
    for attribute in ("MemoryPercentUsage", "StorePercentUsage"):
        r = console.client().get(f"/api/jolokia/read/{broker_mbean}/{attribute}").json()
        assert r["status"] == 200 and 0 <= r["value"] <= 100
    r = console.client().get(f"/api/jolokia/read/{mbean}/NoSuchThing").json()
    assert r["status"] == 404 and "NoSuchThing" in r["error"]


def cli(console, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([RELAYMQ, *args, "--url", console.url, "--user", ADMIN[0],
                           "--password", ADMIN[1]], capture_output=True, text=True, timeout=60)


def test_the_admin_cli_against_a_running_broker(console) -> None:
    send(console, "/queue/api.cli", ["1", "2", "3"])
    listed = cli(console, "queue", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {q["name"]: q["depth"] for q in json.loads(listed.stdout)}["api.cli"] == 3
    stat = cli(console, "queue", "stat", "api.cli")
    assert "depth: 3" in stat.stdout
    browse = cli(console, "queue", "browse", "api.cli", "--limit", "2")
    assert browse.returncode == 0 and browse.stdout.count("\n") == 3  # header + 2 rows
    moved = cli(console, "queue", "move", "api.cli", "--to", "api.cli.hold")
    assert moved.stdout.strip() == "moved 3 messages to api.cli.hold"
    dstat = cli(console, "dstat")
    assert "Queue Size" in dstat.stdout and "api.cli.hold" in dstat.stdout
    hold = next(line.split() for line in dstat.stdout.splitlines() if line.startswith("api.cli.hold "))
    limit = console.client().get("/api/v1/broker").json()["memory_limit"]
    used = console.client().get("/api/v1/queues/api.cli.hold").json()["memory_used"]
    assert used > 0 and int(hold[-1]) == round(100 * used / limit), hold  # a percentage
    assert cli(console, "queue", "purge", "api.cli.hold").stdout.strip() == "purged 3 messages"
    conns = cli(console, "connection", "list", "--json")
    assert conns.returncode == 0 and isinstance(json.loads(conns.stdout)["items"], list)
    refused = subprocess.run([RELAYMQ, "queue", "purge", "api.cli", "--url", console.url,
                              "--user", VIEWER[0], "--password", VIEWER[1]],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "403" in refused.stderr


def test_the_cli_reads_the_console_and_credentials_from_a_config_file(console, tmp_path) -> None:
    send(console, "/queue/api.cli.cfg", ["1"])
    cfg = tmp_path / "cli.toml"
    cfg.write_text(f'url = "{console.url}"\nuser = "{VIEWER[0]}"\npassword = "{VIEWER[1]}"\n')
    env = {k: v for k, v in os.environ.items()
           if k not in ("RELAYMQ_CONSOLE_URL", "RELAYMQ_USER", "RELAYMQ_PASSWORD")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "none")  # no default file

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([RELAYMQ, *args], capture_output=True, text=True, timeout=60,
                              env={**env, **extra})

    listed = run("queue", "list", "--json", "--config", str(cfg))
    assert listed.returncode == 0, listed.stderr
    assert {q["name"]: q["depth"] for q in json.loads(listed.stdout)}["api.cli.cfg"] == 1
    # the file's viewer may look, not purge; the same file named by the environment
    refused = run("queue", "purge", "api.cli.cfg", RELAYMQ_CLI_CONFIG=str(cfg))
    assert refused.returncode == 1 and "403" in refused.stderr, refused.stderr
    # options and environment variables win over the file
    purged = run("queue", "purge", "api.cli.cfg", "--config", str(cfg), "--user", ADMIN[0],
                 RELAYMQ_PASSWORD=ADMIN[1])
    assert purged.stdout.strip() == "purged 1 messages", purged.stderr
    # ~/.config/relaymq/cli.toml when nothing names a file
    (tmp_path / "home" / "relaymq").mkdir(parents=True)
    (tmp_path / "home" / "relaymq" / "cli.toml").write_text(cfg.read_text())
    assert run("queue", "stat", "api.cli.cfg", XDG_CONFIG_HOME=str(tmp_path / "home")).returncode == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('url = "x"\ntoken = "y"\n')
    r = run("queue", "list", "--config", str(bad))
    assert r.returncode == 1 and "unknown setting(s) token" in r.stderr, r.stderr
    r = run("queue", "list", "--config", str(tmp_path / "missing.toml"))
    assert r.returncode == 1 and "cannot read" in r.stderr, r.stderr


def test_the_broker_summary_counts_every_queue(console) -> None:
    c = console.client()

    def matches() -> bool:
        summary = c.get("/api/v1/broker").json()
        listed = c.get("/api/v1/queues", params={"size": 1000}).json()
        # the summary's totals are rescanned at most once a second below 2,000 queues
        return (summary["queues"] == listed["total"]
                and summary["messages"] == sum(q["depth"] for q in listed["items"]))

    send(console, "/queue/api.summary", ["a", "b", "c"])
    wait_until(matches, "the summary to count the new messages", 10)
    summary = c.get("/api/v1/broker").json()
    assert summary["messages"] >= 3 and summary["enqueue_rate"] >= 0
    assert summary["dequeue_rate"] >= 0


def test_delete_a_topic_and_a_durable_subscription(console) -> None:
    c = console.client()
    conn = stomp.Connection12([("127.0.0.1", console.stomp_port)])
    conn.connect(*APP, wait=True, headers={"client-id": "api-durable"})
    conn.subscribe("/topic/api.events", id="1",
                   headers={"activemq.subscriptionName": "audit"})
    conn.send("/topic/api.events", "kept for audit", headers={"persistent": "true"})

    def subscription() -> list:
        return [s for s in c.get("/api/v1/subscriptions").json()["items"]
                if s["client_id"] == "api-durable"]

    wait_until(lambda: subscription() and subscription()[0]["active"], "the subscription", 10)
    busy = c.delete("/api/v1/subscriptions/api-durable/audit")
    assert busy.status_code == 409 and "in use" in busy.json()["error"]
    conn.unsubscribe("1")  # detaches; the durable subscription stays
    conn.disconnect()
    wait_until(lambda: subscription() and not subscription()[0]["active"], "detached", 10)
    assert c.delete("/api/v1/subscriptions/api-durable/audit").json() == {"deleted": True}
    assert subscription() == []
    assert c.delete("/api/v1/subscriptions/api-durable/audit").status_code == 404

    topics = {t["name"] for t in c.get("/api/v1/topics", params={"size": 1000}).json()["items"]}
    assert "api.events" in topics
    assert c.delete("/api/v1/topics/api.events").json() == {"deleted": True}
    topics = {t["name"] for t in c.get("/api/v1/topics", params={"size": 1000}).json()["items"]}
    assert "api.events" not in topics
    assert c.delete("/api/v1/topics/api.events").status_code == 404
    viewer = console.client(VIEWER).delete("/api/v1/topics/api.other")
    assert viewer.status_code == 403


def test_a_text_preview_cut_inside_a_character_stays_text() -> None:
    """A UTF-8 body longer than the preview whose 4 KiB cut splits a character is
    shown as text up to that character, not as hex."""
    from relaymq_console.views import PREVIEW_BYTES, body_preview

    body = ("a" + "é" * PREVIEW_BYTES).encode()  # 1 + 2 bytes each: the cut splits an é
    got = body_preview(body)
    assert got["encoding"] == "text" and got["truncated"] is True, got["encoding"]
    assert got["preview"] == "a" + "é" * ((PREVIEW_BYTES - 1) // 2) and got["size"] == len(body)
    assert body_preview(b"\xff\xfe binary")["encoding"] == "hex"


def test_a_send_a_move_or_a_copy_that_would_fan_out_or_carry_bad_values_is_refused(
        console) -> None:
    c = console.client()
    r = c.post("/api/v1/queues/api.fan.*/messages", json={"body": "x"})
    assert r.status_code == 400 and "send to one queue" in r.json()["error"], r.text
    for value in (float("nan"), float("inf"), 2**70):
        r = c.post("/api/v1/queues/api.values/messages",
                   content=json.dumps({"body": "x", "properties": {"v": value}}),
                   headers={"content-type": "application/json"})
        assert r.status_code == 400 and "property 'v'" in r.json()["error"], r.text
    r = c.post("/api/v1/queues/api.values/messages", json={"body": "ok", "properties": {"v": 1.5}})
    assert r.status_code == 200, r.text
    for to in ("queue://*", "api.a,api.b", "topic://api.t", "durable://c:s"):
        r = c.post("/api/v1/queues/api.values/move", json={"to": to, "selector": "v > 0"})
        assert r.status_code == 400 and "needs one plain queue" in r.json()["error"], (to, r.text)
    assert c.get("/api/v1/queues/api.values").json()["depth"] == 1  # nothing moved or lost


def test_bad_input_is_400_and_deleting_what_does_not_exist_is_404(console) -> None:
    """A request the API cannot carry out as asked is a 400, whether or not a queue of
    that name exists; a DELETE of something that does not exist is a 404 (and nothing
    is written to the audit log), never a 200 saying it was not deleted."""
    c = console.client()
    for name in ("api.d9.*", "api.d9.>", "api.d9.a,api.d9.b", "topic://api.d9",
                 "temp-queue://api.d9"):
        r = c.post("/api/v1/queues", json={"name": name})
        assert r.status_code == 400 and "one plain queue" in r.json()["error"], (name, r.text)
    assert c.post("/api/v1/queues", json={"name": "api.d9"}).status_code == 200
    r = c.post("/api/v1/queues", json={"name": "api.d9", "queue_type": "no-such-type"})
    assert r.status_code == 400 and "no-such-type" in r.json()["error"], r.text
    r = c.post("/api/v1/queues", json={"name": "api.d9", "queue_type": "partitioned"})
    assert r.status_code == 409 and "exists as a 'standard' queue" in r.json()["error"], r.text
    for name in ("api.d9.*", "api.d9.a,api.d9.b"):
        r = c.post(f"/api/v1/queues/{name}/messages", json={"body": "x"})
        assert r.status_code == 400 and "send to one queue" in r.json()["error"], (name, r.text)
    assert c.post("/api/v1/queues/api.d9/messages", json={"body": "x"}).status_code == 200
    for to in ("api.d9", "queue://api.d9"):
        r = c.post("/api/v1/queues/api.d9/move", json={"to": to, "selector": "JMSMessageID IS NOT NULL"})
        assert r.status_code == 400 and "to where they are" in r.json()["error"], (to, r.text)
    assert queue(console, "api.d9")["depth"] == 1
    for path in ("/api/v1/queues/api.d9.none", "/api/v1/topics/api.d9.none",
                 "/api/v1/subscriptions/api-d9-client/none"):
        r = c.delete(path)
        assert r.status_code == 404 and r.json()["error"], (path, r.text)
    assert "destination=queue://api.d9.none" not in console.output()
    assert "destination=topic://api.d9.none" not in console.output()
    assert c.delete("/api/v1/queues/api.d9").json() == {"deleted": True}
    assert c.delete("/api/v1/queues/api.d9").status_code == 404


def test_copy_to_the_same_queue_duplicates_the_messages(console) -> None:
    """ActiveMQ's copyMessageTo onto the queue itself: each chosen message is there
    twice (the copy at the tail, with the same message id); a move there is refused."""
    send(console, "/queue/api.copy.self", ["a", "b"])
    c = console.client()
    done = c.post("/api/v1/queues/api.copy.self/copy",
                  json={"to": "api.copy.self", "selector": "JMSMessageID IS NOT NULL"})
    assert done.status_code == 200 and done.json() == {"copied": 2, "duplicates": 0}
    wait_until(lambda: queue(console, "api.copy.self")["depth"] == 4, "the copies", 10)
    listed = c.get("/api/v1/queues/api.copy.self/messages").json()["messages"]
    assert [m["body"]["preview"] for m in listed] == ["a", "b", "a", "b"]
    assert listed[0]["message_id"] == listed[2]["message_id"]
    assert listed[2]["annotations"]["original_destination"] == "queue://api.copy.self"
    moved = c.post("/api/v1/queues/api.copy.self/move",
                   json={"to": "api.copy.self", "selector": "JMSMessageID IS NOT NULL"})
    assert moved.status_code == 400 and "not a move" in moved.json()["error"]
    assert queue(console, "api.copy.self")["depth"] == 4


def test_a_copy_duplicate_detection_drops_is_not_counted_as_copied(console) -> None:
    """A copy onto the queue itself of a message with a duplicate-detection id
    (`_AMQ_DUPL_ID`) is dropped there as any resend of it: the answer counts the
    copies that landed and the dropped ones apart."""
    send(console, "/queue/api.copy.dup", ["plain"])
    send(console, "/queue/api.copy.dup", ["once"], _AMQ_DUPL_ID="api-copy-dup-1")
    c = console.client()
    done = c.post("/api/v1/queues/api.copy.dup/copy",
                  json={"to": "api.copy.dup", "selector": "JMSMessageID IS NOT NULL"})
    assert done.status_code == 200, done.text
    assert done.json()["copied"] == 1 and done.json()["duplicates"] == 1, done.json()
    assert "duplicate" in done.json()["note"], done.json()
    listed = c.get("/api/v1/queues/api.copy.dup/messages").json()["messages"]
    assert [m["body"]["preview"] for m in listed] == ["plain", "once", "plain"]
    assert queue(console, "api.copy.dup")["duplicates"] == 1


def test_a_move_or_retry_duplicate_detection_drops_leaves_the_message_where_it_was(
        console) -> None:
    """A moved or retried message whose `_AMQ_DUPL_ID` its target has seen before is
    dropped there: it stays where it was (not lost) and the answer says so."""
    send(console, "/queue/api.move.dup.a", ["from a"], _AMQ_DUPL_ID="api-move-dup-1")
    send(console, "/queue/api.move.dup.b", ["from b"], _AMQ_DUPL_ID="api-move-dup-1")
    c = console.client()
    moved = c.post("/api/v1/queues/api.move.dup.a/move",
                   json={"to": "api.move.dup.b", "selector": "JMSMessageID IS NOT NULL"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["moved"] == 0 and moved.json()["duplicates"] == 1, moved.json()
    assert "left in api.move.dup.a" in moved.json()["note"]
    assert queue(console, "api.move.dup.a")["depth"] == 1
    assert queue(console, "api.move.dup.b")["depth"] == 1
    # dead-lettered and retried: its queue saw its id when it was first sent
    conn, received = collecting(console)
    conn.subscribe("/queue/api.move.dup.a", id="1", ack="client-individual")
    wait_until(lambda: received, "the message", 10)
    conn.nack(received[0].headers["ack"])  # to ActiveMQ.DLQ (no redelivery plugin)
    conn.disconnect()
    dead = "_AMQ_DUPL_ID = 'api-move-dup-1'"
    wait_until(lambda: c.get("/api/v1/queues/ActiveMQ.DLQ/messages",
                             params={"selector": dead}).json()["messages"], "the DLQ", 10)
    retried = c.post("/api/v1/queues/ActiveMQ.DLQ/retry", json={"selector": dead})
    assert retried.status_code == 200, retried.text
    assert retried.json()["retried"] == 0 and retried.json()["duplicates"] == 1, retried.json()
    assert "left in ActiveMQ.DLQ" in retried.json()["note"]
    assert [m["body"]["preview"] for m in c.get(
        "/api/v1/queues/ActiveMQ.DLQ/messages", params={"selector": dead}).json()["messages"]
            ] == ["from a"]


def test_retry_of_a_topic_message_goes_back_to_its_durable_subscription_only(console) -> None:
    """One of two durable subscribers rejects a message: the console's retry sends it
    to that subscription again, not to the topic (the other one had it already)."""
    got: dict[str, list] = {"a": [], "b": []}
    subscribed: list[str] = []

    def subscriber(name: str):  # type: ignore[no-untyped-def]
        class L(stomp.ConnectionListener):
            def on_message(self, frame) -> None:
                got[name].append(frame)

            def on_receipt(self, frame) -> None:
                subscribed.append(frame.headers["receipt-id"])

        conn = stomp.Connection12([("127.0.0.1", console.stomp_port)])
        conn.set_listener("", L())
        conn.connect(*APP, wait=True, headers={"client-id": f"d17-{name}"})
        conn.subscribe("/topic/api.retry.t", id="1", ack="client-individual",
                       headers={"activemq.subscriptionName": f"sub-{name}", "receipt": name})
        wait_until(lambda: name in subscribed, f"subscription {name}", 10)
        return conn

    a, b = subscriber("a"), subscriber("b")
    send(console, "/topic/api.retry.t", ["poison"], case="d17")
    wait_until(lambda: got["a"] and got["b"], "the message at both subscribers", 10)
    b.ack(got["b"][0].headers["ack"])
    a.nack(got["a"][0].headers["ack"])  # to ActiveMQ.DLQ (no redelivery plugin)
    wait_until(lambda: console.client().get(
        "/api/v1/queues/ActiveMQ.DLQ/messages", params={"selector": "case = 'd17'"}
    ).json()["messages"], "the dead letter", 10)
    dlq = console.client().get("/api/v1/queues/ActiveMQ.DLQ/messages",
                               params={"selector": "case = 'd17'"}).json()["messages"]
    assert dlq[0]["annotations"]["original_subscription"] == "durable://d17-a:sub-a"
    r = console.client().post("/api/v1/queues/ActiveMQ.DLQ/retry", json={"selector": "case = 'd17'"})
    assert r.status_code == 200 and r.json()["retried"] == 1, r.json()
    send(console, "/topic/api.retry.t", ["marker"], case="d17")
    for name in ("a", "b"):  # the marker comes after anything the retry sent
        wait_until(lambda n=name: any(f.body == "marker" for f in got[n]),
                   f"the marker at {name}", 10)
    assert [f.body for f in got["a"]] == ["poison", "poison", "marker"]
    assert [f.body for f in got["b"]] == ["poison", "marker"]
    for conn in (a, b):
        conn.disconnect()


def test_a_long_queue_command_that_times_out_says_the_broker_goes_on(console) -> None:
    """A move of a large queue can outlast the command's wait: the command says so and
    how to follow it, and the broker finishes the move all the same."""
    send(console, "/queue/api.slow", [f"m{i}" for i in range(5000)])
    moved = cli(console, "queue", "move", "api.slow", "--to", "api.slow.hold",
                "--timeout", "0.02")
    assert moved.returncode == 1, moved.stdout
    assert "within 0.02 s; the broker goes on with the request" in moved.stderr, moved.stderr
    assert "--timeout waits longer" in moved.stderr

    def depths() -> tuple[int, int]:
        http = console.client()
        found = [http.get(f"/api/v1/queues/{q}") for q in ("api.slow", "api.slow.hold")]
        return tuple(r.json()["depth"] if r.status_code == 200 else 0  # type: ignore[return-value]
                     for r in found)

    wait_until(lambda: depths() == (0, 5000), "the move finished on the broker", timeout=60)
