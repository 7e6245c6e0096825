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

#: ops (admins) owns secret.>; on shared.> apps create, apps and admins send, everyone reads
MAP = """<authorizationPlugin><map><authorizationMap><authorizationEntries>
      <authorizationEntry queue="secret.>" read="admins" write="admins" admin="admins"/>
      <authorizationEntry queue="shared.>" read="users,admins,apps" write="apps,admins" admin="apps"/>
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

    def stomp_send(self, dest: str, body: str) -> None:
        """As `app` (group apps), which may create and send to shared.>."""
        receipts: list[str] = []

        class L(stomp.ConnectionListener):
            def on_receipt(self, frame) -> None:
                receipts.append(frame.headers["receipt-id"])

        conn = stomp.Connection12([("127.0.0.1", self.stomp_port)])
        conn.set_listener("", L())
        conn.connect(*APP, wait=True)
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
    # the statistics are not the messages: every console user sees them
    assert viewer.get("/api/v1/queues/secret.q").json()["depth"] == 1


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
        assert "not authorized to browse queue://secret.q" in \
            viewer.text_content("#browse-refused")
        assert "classified" not in viewer.content()
        ops = logged_in(ADMIN)
        ops.goto(f"{broker.url}/queues/shared.q")
        ops.once("dialog", lambda d: d.accept())
        ops.click("#purge")
        ops.wait_for_selector("#flash")
        assert "purge refused: User ops is not authorized to purge queue://shared.q" in \
            ops.text_content("#flash")
        assert broker.depth("shared.q") >= 1
        browser.close()
