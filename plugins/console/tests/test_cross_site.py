"""A page of another site, opened in the operator's browser (Debian's chromium
driven by Playwright), cannot change the broker through the console:

* with HTTP Basic credentials the browser remembers for the console (after the
  `/metrics` prompt), a form it submits and a `fetch` it makes are refused;
* on a console without users (local only), the same, and a request for a name
  that is not local (DNS rebinding) is refused too;

while the console's own pages, the admin CLI's requests and curl-like clients
keep working."""

from __future__ import annotations

import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from relaymq.testing import free_port
from relaymq.testing.processes import RelaymqProcess

from .conftest import ADMIN
from .console_clients import FLAGS, queue, send

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.external]  # chromium


def attack_page(target: str) -> str:
    """A page that submits a form to `target` and also POSTs to it with fetch."""
    return f"""<!doctype html><html><body>
<form id="f" method="POST" action="{target}"><input name="body" value="from another site"></form>
<script>
fetch("{target}", {{method: "POST", mode: "no-cors", credentials: "include"}})
  .finally(() => document.getElementById("f").submit());
</script></body></html>"""


@pytest.fixture
def other_site(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTP server on `localhost` (another origin than the console's 127.0.0.1)."""
    root = tmp_path / "site"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a) -> None:  # type: ignore[no-untyped-def]
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://localhost:{server.server_address[1]}", root
    finally:
        server.shutdown()


def browse(url: str, credentials: tuple[str, str] | None = None, console: str = "") -> str:
    """Open `url` in chromium, let its scripts run; the text it ends on. With
    `credentials`, the operator first opened the console's `/metrics` and answered
    its Basic prompt: the browser then sends them to the console by itself."""
    if CHROMIUM is None:
        pytest.skip("chromium (Debian package chromium) is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        kw = {"http_credentials": {"username": credentials[0], "password": credentials[1]}} \
            if credentials else {}
        context = browser.new_context(**kw)
        page = context.new_page()
        if credentials:
            assert page.goto(f"{console}/metrics").status == 200
        page.goto(url)
        page.wait_for_url(lambda u: not u.startswith(url), timeout=15_000)  # the form went
        page.wait_for_load_state()
        text = page.inner_text("body")
        context.close()
        browser.close()
    return text


def test_a_page_of_another_site_cannot_purge_with_remembered_basic_credentials(
        console, other_site) -> None:
    site, root = other_site
    send(console, "/queue/XSITE", [f"m{i}" for i in range(5)])
    assert queue(console, "XSITE")["depth"] == 5
    (root / "purge.html").write_text(attack_page(f"{console.url}/api/v1/queues/XSITE/purge"))
    text = browse(f"{site}/purge.html", ADMIN, console.url)
    assert "cross-site request refused" in text, text
    assert queue(console, "XSITE")["depth"] == 5
    (root / "send.html").write_text(attack_page(f"{console.url}/queues/XSITE/send"))
    text = browse(f"{site}/send.html", ADMIN, console.url)
    assert "cross-site request refused" in text, text
    assert queue(console, "XSITE")["depth"] == 5
    assert "cross-site request refused (Sec-Fetch-Site: cross-site)" in console.output()
    # a browser that sends no Sec-Fetch-Site is judged by its Origin
    evil = console.client().post("/api/v1/queues/XSITE/purge",
                                 headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403 and "Origin: http://evil.example" in evil.json()["error"]
    assert queue(console, "XSITE")["depth"] == 5
    # clients that are not browsers, and the console's own origin, still may
    own = console.client().post("/api/v1/queues/XSITE/purge",
                                headers={"Origin": console.url})
    assert own.status_code == 200 and own.json()["removed"] == 5, own.text


class OpenConsole(RelaymqProcess):
    """A broker whose console has no users (local only: everybody is an admin)."""

    def __init__(self, tmp: Path) -> None:
        self.http_port = free_port()
        self.stomp_port = free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        config = tmp / "activemq.xml"
        config.write_text(f"""<broker brokerName="open" persistent="false">
  <transportConnectors>
    <transportConnector name="stomp" uri="stomp://127.0.0.1:{self.stomp_port}"/>
  </transportConnectors>
  <plugins><console host="127.0.0.1" port="{self.http_port}"/></plugins>
</broker>""")
        super().__init__(config, tmp / "broker.log", ports=[self.http_port])

    def client(self, who: object = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)


def test_a_console_without_users_refuses_other_sites_and_names(tmp_path: Path, other_site) -> None:
    site, root = other_site
    broker = OpenConsole(tmp_path)
    broker.start()
    try:
        send(broker, "/queue/OPENQ", ["a", "b", "c"])
        assert queue(broker, "OPENQ")["depth"] == 3
        (root / "purge.html").write_text(attack_page(f"{broker.url}/api/v1/queues/OPENQ/purge"))
        text = browse(f"{site}/purge.html")
        assert "cross-site request refused" in text, text
        assert queue(broker, "OPENQ")["depth"] == 3
        # DNS rebinding: another site's name resolved to 127.0.0.1 reads nothing
        rebound = httpx.get(f"{broker.url}/api/v1/queues/OPENQ", headers={"Host": "evil.example"})
        assert rebound.status_code == 403 and "local names only" in rebound.json()["error"]
        assert httpx.get(f"{broker.url}/api/v1/queues/OPENQ",
                         headers={"Host": f"localhost:{broker.http_port}"}).status_code == 200
        purged = httpx.post(f"{broker.url}/api/v1/queues/OPENQ/purge")
        assert purged.status_code == 200 and purged.json()["removed"] == 3, purged.text
    finally:
        broker.stop()
