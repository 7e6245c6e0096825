"""The console applies the broker's authorization map to the logged-in user's groups:
browsing needs `read`, a test message `write`, creating, deleting, purging and moving
`admin` (a move or copy also `write` on its target), as ActiveMQ applies the map to
its clients. Refusals are 403 with the reason, an audit line, and the reason on the
page. A real broker process, real HTTP, a real STOMP producer, chromium for the UI."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from relaymq.testing import free_port, wait_until
from relaymq.testing.console_broker import ADMIN, APP, VIEWER, ConsoleBrokerProcess

from .console_clients import FLAGS

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")

#: ops (admins) owns secret.>; on shared.> apps create, apps and admins send, everyone
#: reads; the same for topics
MAP = """<authorizationPlugin><map><authorizationMap><authorizationEntries>
      <authorizationEntry queue="secret.>" read="admins" write="admins" admin="admins"/>
      <authorizationEntry queue="shared.>" read="users,admins,apps" write="apps,admins" admin="apps"/>
      <authorizationEntry topic="secret.>" read="admins" write="admins" admin="admins"/>
      <authorizationEntry topic="shared.>" read="users,admins,apps" write="apps,admins" admin="apps"/>
    </authorizationEntries></authorizationMap></map></authorizationPlugin>"""


class MappedBroker(ConsoleBrokerProcess):
    def __init__(self, tmp: Path) -> None:
        self.stomp_port = free_port()
        super().__init__(tmp, "console-authz", plugins=MAP, body=f"""
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>
  </transportConnectors>""")

    def client(self, who: tuple[str, str]) -> httpx.Client:
        return httpx.Client(base_url=self.url, auth=who, timeout=30)

    def depth(self, name: str) -> int:
        r = self.client(ADMIN).get(f"/api/v1/queues/{name}")
        assert r.status_code == 200, r.text
        return int(r.json()["depth"])

    def stomp(self, who: tuple[str, str], client_id: str | None = None):  # type: ignore[no-untyped-def]
        """A STOMP connection of `who` and the receipts it got."""
        receipts: list[str] = []

        class L(stomp.ConnectionListener):
            def on_receipt(self, frame) -> None:
                receipts.append(frame.headers["receipt-id"])

        conn = stomp.Connection12([("127.0.0.1", self.stomp_port)])
        conn.set_listener("", L())
        conn.connect(*who, wait=True, headers={"client-id": client_id} if client_id else {})
        return conn, receipts

    def stomp_send(self, dest: str, body: str) -> None:
        """As `app` (group apps), which may create and send to shared.>."""
        conn, receipts = self.stomp(APP)
        conn.send(dest, body, headers={"persistent": "true", "receipt": "r"})
        wait_until(lambda: receipts == ["r"], "the receipt", 10)
        conn.disconnect()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    b = MappedBroker(tmp_path_factory.mktemp("authz"))
    b.start()
    b.client(ADMIN).post("/api/v1/queues/secret.q/messages", json={"body": "classified"})
    b.stomp_send("/queue/shared.q", "for everyone")
    yield b
    b.stop()


def test_browsing_needs_read_on_the_queue(broker) -> None:
    viewer, ops = broker.client(VIEWER), broker.client(ADMIN)
    refused = viewer.get("/api/v1/queues/secret.q/messages")
    assert refused.status_code == 403
    assert "User watcher is not authorized to browse queue://secret.q" in \
        refused.json()["error"]
    assert "classified" not in refused.text
    wait_until(lambda: "denied user=watcher action=browse:read destination=queue://secret.q "
                       "transport=http" in broker.output(), "the audit line", 10)
    mine = ops.get("/api/v1/queues/secret.q/messages")
    assert [m["body"]["preview"] for m in mine.json()["messages"]] == ["classified"]
    shared = viewer.get("/api/v1/queues/shared.q/messages")
    assert [m["body"]["preview"] for m in shared.json()["messages"]] == ["for everyone"]
    # a viewer does not see the statistics of a queue the map does not let them read
    stats = viewer.get("/api/v1/queues/secret.q")
    assert stats.status_code == 403 and "User watcher is not authorized to view " \
        "queue://secret.q" in stats.json()["error"]
    assert viewer.get("/api/v1/queues/shared.q").json()["depth"] == 1
    assert ops.get("/api/v1/queues/secret.q").json()["depth"] == 1


def test_an_admin_of_the_console_does_only_what_the_map_grants(broker) -> None:
    ops = broker.client(ADMIN)
    purge = ops.post("/api/v1/queues/shared.q/purge")
    assert purge.status_code == 403
    assert "not authorized to purge queue://shared.q" in purge.json()["error"]
    assert "grants admin on it to none" in purge.json()["error"]
    assert broker.depth("shared.q") == 1
    assert ops.delete("/api/v1/queues/shared.q").status_code == 403
    assert ops.post("/api/v1/queues/shared.q/move",
                    json={"to": "secret.moved", "selector": "JMSMessageID IS NOT NULL"}
                    ).status_code == 403
    assert broker.depth("shared.q") == 1
    # reading shared.q and writing (and creating) secret.* is granted: a copy is allowed
    copied = ops.post("/api/v1/queues/shared.q/copy",
                      json={"to": "secret.copy", "selector": "JMSMessageID IS NOT NULL"})
    assert copied.json() == {"copied": 1, "duplicates": 0}
    assert broker.depth("secret.copy") == 1
    # a send that would create shared.new needs admin there (apps only)
    new = ops.post("/api/v1/queues/shared.new/messages", json={"body": "x"})
    assert new.status_code == 403 and "to queue://shared.new" in new.json()["error"]
    assert ops.get("/api/v1/queues/shared.new").status_code == 404
    assert ops.post("/api/v1/queues", json={"name": "shared.made"}).status_code == 403
    assert ops.get("/api/v1/queues/shared.made").status_code == 404
    assert ops.post("/api/v1/queues", json={"name": "secret.made"}).status_code == 200
    # sending to an existing shared queue is a write, which admins have
    assert ops.post("/api/v1/queues/shared.q/messages", json={"body": "y"}).json() == \
        {"sent": True}
    assert broker.depth("shared.q") == 2
    wait_until(lambda: "denied user=ops action=purge:admin destination=queue://shared.q"
                       in broker.output(), "the audit line", 10)


def test_a_viewer_lists_only_what_the_map_lets_them_read(broker) -> None:
    """Queues, topics, durable subscriptions (by their topic), queues.jsp and Jolokia
    reads show a viewer only what the map grants them `read` on, and connections only
    their own; a console admin sees everything."""
    subs = []
    for who, topic, cid in ((APP, "shared.t", "authz-app"), (ADMIN, "secret.t", "authz-ops")):
        conn, receipts = broker.stomp(who, cid)
        conn.subscribe(f"/topic/{topic}", id="1", ack="auto",
                       headers={"activemq.subscriptionName": "s", "receipt": "sub"})
        wait_until(lambda r=receipts: "sub" in r, f"the subscription to {topic}", 10)
        conn.send(f"/topic/{topic}", "news", headers={"receipt": "sent"})
        wait_until(lambda r=receipts: "sent" in r, f"the message to {topic}", 10)
        subs.append(conn)
    mine, _ = broker.stomp(VIEWER)
    viewer, ops = broker.client(VIEWER), broker.client(ADMIN)

    def names(client: httpx.Client, path: str, field: str = "name") -> set[str]:
        r = client.get(path)
        assert r.status_code == 200, r.text
        return {i[field] for i in r.json()["items"]}

    try:
        assert {"secret.q", "shared.q"} <= names(ops, "/api/v1/queues")
        seen = names(viewer, "/api/v1/queues")
        assert "shared.q" in seen and "secret.q" not in seen, seen
        assert viewer.get("/api/v1/queues").json()["total"] == len(seen)
        assert {"secret.t", "shared.t"} <= names(ops, "/api/v1/topics")
        seen = names(viewer, "/api/v1/topics")
        assert "shared.t" in seen and "secret.t" not in seen, seen
        assert names(ops, "/api/v1/subscriptions", "client_id") >= {"authz-app", "authz-ops"}
        assert names(viewer, "/api/v1/subscriptions", "client_id") == {"authz-app"}
        assert {"app", "ops", "watcher"} <= names(ops, "/api/v1/connections", "user")
        assert names(viewer, "/api/v1/connections", "user") == {"watcher"}
        jsp = viewer.get("/admin/xml/queues.jsp").text
        assert 'name="shared.q"' in jsp and "secret.q" not in jsp
        assert 'name="secret.q"' in ops.get("/admin/xml/queues.jsp").text
        read = "/api/jolokia/read/org.apache.activemq:type=Broker,brokerName=console-authz," \
               "destinationType=Queue,destinationName={}/QueueSize"
        assert viewer.get(read.format("shared.q")).json()["value"] >= 1
        refused = viewer.get(read.format("secret.q")).json()
        assert refused["status"] == 403 and "value" not in refused
        assert ops.get(read.format("secret.q")).json()["value"] == 1
        # the pages: the list, and a queue's page refused outright
        with httpx.Client(base_url=broker.url, timeout=30) as page:
            assert page.post("/login", data={"username": VIEWER[0], "password": VIEWER[1]},
                             follow_redirects=False).status_code == 303
            listing = page.get("/queues").text
            assert "shared.q" in listing and "secret.q" not in listing
            assert "secret.t" not in page.get("/topics").text
            assert "authz-ops" not in page.get("/subscriptions").text
            refused_page = page.get("/queues/secret.q")
            assert refused_page.status_code == 403
            assert "not authorized to view queue://secret.q" in refused_page.text
            assert "classified" not in refused_page.text
    finally:
        for conn in (*subs, mine):
            conn.disconnect()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.external
def test_the_pages_say_what_the_map_refuses(broker) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if CHROMIUM is None:
        pytest.skip("chromium (Debian package chromium) is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)

        def logged_in(who: tuple[str, str]):  # type: ignore[no-untyped-def]
            pg = browser.new_context().new_page()
            pg.goto(f"{broker.url}/login")
            pg.fill("#username", who[0])
            pg.fill("#password", who[1])
            pg.click("#login-button")
            pg.wait_for_selector("#broker-facts")
            return pg

        viewer = logged_in(VIEWER)
        viewer.goto(f"{broker.url}/queues/{quote('secret.q')}")
        assert "not authorized to view queue://secret.q" in viewer.text_content("body")
        assert "classified" not in viewer.content()
        viewer.goto(f"{broker.url}/queues")
        assert viewer.locator("a", has_text="shared.q").count() == 1
        assert "secret.q" not in viewer.text_content("body")
        ops = logged_in(ADMIN)
        ops.goto(f"{broker.url}/queues/shared.q")
        ops.once("dialog", lambda d: d.accept())
        ops.click("#purge")
        ops.wait_for_selector("#flash")
        assert "purge refused: User ops is not authorized to purge queue://shared.q" in \
            ops.text_content("#flash")
        assert broker.depth("shared.q") >= 1
        browser.close()
