"""The console in a real headless browser (Debian's chromium driven by Playwright):
log in, watch a queue's depth change while a STOMP producer sends, browse a message
whose body is markup (shown as text), purge with confirmation, retry a dead-lettered
message, close a connection. Screenshots go to $RELAYMQ_ARTIFACTS (or the test's
temporary directory)."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from urllib.parse import quote

import pytest
from relaymq.testing import wait_until

from .conftest import ADMIN, APP, ConsoleBroker
from .console_clients import FLAGS, collecting, queue, send

stomp = pytest.importorskip("stomp", reason="stomp.py is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.external]  # chromium


@pytest.fixture(scope="module")
def page(console, tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("chromium (Debian package chromium) is not installed")
    shots = Path(os.environ.get("RELAYMQ_ARTIFACTS") or tmp_path_factory.mktemp("screens"))
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        context = browser.new_context()
        pg = context.new_page()
        pg.shots = shots  # type: ignore[attr-defined]
        pg.goto(f"{console.url}/")
        assert pg.url.endswith("/login")
        pg.fill("#username", ADMIN[0])
        pg.fill("#password", ADMIN[1])
        pg.click("#login-button")
        pg.wait_for_selector("#broker-facts")
        yield pg
        context.close()
        browser.close()


def shot(page, name: str) -> None:
    page.screenshot(path=str(page.shots / f"{name}.png"), full_page=True)


def test_a_wrong_password_is_refused_in_the_browser(console) -> None:
    if CHROMIUM is None:
        pytest.skip("chromium (Debian package chromium) is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        pg = browser.new_page()
        pg.goto(f"{console.url}/login")
        pg.fill("#username", ADMIN[0])
        pg.fill("#password", "wrong")
        pg.click("#login-button")
        assert "login failed" in pg.text_content("#login-error")
        browser.close()


def test_a_blocked_login_says_when_to_try_again_and_works_after(tmp_path) -> None:
    """Five wrong passwords block the address: the login page says for how long (the
    right password is refused meanwhile); after that the right password logs in. A
    broker of its own (a 3 s window), so the shared one's logins are not blocked."""
    if CHROMIUM is None:
        pytest.skip("chromium (Debian package chromium) is not installed")
    broker = ConsoleBroker(tmp_path, 'loginFailureWindow="3"')
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            pg = browser.new_page()

            def log_in(password: str) -> None:
                pg.goto(f"{broker.url}/login")
                pg.fill("#username", ADMIN[0])
                pg.fill("#password", password)
                with pg.expect_navigation():
                    pg.click("#login-button")

            for _ in range(5):
                log_in("wrong")
                assert "login failed" in pg.text_content("#login-error")
            log_in(ADMIN[1])
            said = pg.text_content("#login-error") or ""
            assert "too many failed logins" in said and "try again in" in said, said
            assert pg.locator("#broker-facts").count() == 0

            def logged_in() -> bool:
                log_in(ADMIN[1])
                return pg.locator("#broker-facts").count() == 1

            wait_until(logged_in, "the right password to log in after the wait", 30,
                       interval=0.25)
            browser.close()
    finally:
        broker.stop()


def test_the_depth_changes_while_a_stomp_producer_sends(console, page) -> None:
    send(console, "/queue/ui.live", ["first"])
    page.goto(f"{console.url}/queues/ui.live")
    assert page.text_content("#depth").strip() == "1"
    stop = threading.Event()

    def produce() -> None:
        conn = stomp.Connection12([("127.0.0.1", console.stomp_port)])
        conn.connect(*APP, wait=True)
        for i in range(40):
            if stop.is_set():
                break
            conn.send("/queue/ui.live", f"m{i}", headers={"persistent": "true"})
            stop.wait(0.05)
        conn.disconnect()

    t = threading.Thread(target=produce)
    t.start()
    try:
        # the page refreshes its figures by itself (console.js polls the API); the CSP
        # forbids evaluating strings, so the test reads the cell instead of wait_for_function
        wait_until(lambda: int(page.text_content("#depth").strip()) > 1, "the depth on the page to grow", 20)
    finally:
        stop.set()
        t.join(30)
    shot(page, "queue-depth-live")


def test_markup_in_a_body_is_shown_as_text(console, page) -> None:
    send(console, "/queue/ui.xss", ["<script>alert(1)</script><b>bold</b>"])
    dialogs: list[str] = []

    def record(dialog) -> None:  # type: ignore[no-untyped-def]
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    try:
        page.goto(f"{console.url}/queues/ui.xss")
        cell = page.locator("#messages pre.body").first
        assert cell.text_content() == "<script>alert(1)</script><b>bold</b>"
        assert page.locator("#messages b").count() == 0  # no element was made from the body
        assert dialogs == []
    finally:
        page.remove_listener("dialog", record)
    shot(page, "escaped-body")


def test_purge_asks_for_confirmation(console, page) -> None:
    send(console, "/queue/ui.purge", ["a", "b"])
    page.goto(f"{console.url}/queues/ui.purge")
    page.once("dialog", lambda d: d.dismiss())
    page.click("#purge")
    assert queue(console, "ui.purge")["depth"] == 2  # dismissed: nothing happened
    page.once("dialog", lambda d: d.accept())
    page.click("#purge")
    page.wait_for_selector("#flash")
    assert "purged 2 messages" in page.text_content("#flash")
    assert queue(console, "ui.purge")["depth"] == 0
    shot(page, "purged")


def test_creating_a_queue_with_a_wildcard_name_says_why_not(console, page) -> None:
    """The page's "new queue" with `ui.wild.>`: the listing again with the reason
    (it was a 500), and no queue made; a plain name still creates its queue."""
    page.goto(f"{console.url}/queues")
    page.fill("input[name=name]", "ui.wild.>")
    page.click("form[action='/queues/create'] button")
    page.wait_for_selector("#flash")
    assert "create failed" in page.text_content("#flash")
    assert "one plain queue name" in page.text_content("#flash")
    assert console.client().get("/api/v1/queues/ui.wild.%3E").status_code == 404
    page.fill("input[name=name]", "ui.made")
    page.click("form[action='/queues/create'] button")
    page.wait_for_url(f"{console.url}/queues/ui.made")
    assert queue(console, "ui.made")["depth"] == 0


def test_a_filter_with_url_characters_survives_sorting_and_paging(console, page) -> None:
    """The listing's column and paging links carry the filter text encoded: `&` and
    `#` in it (legal in queue names) neither end it nor start a fragment."""
    c = console.client()
    names = [f"ui.pg&x#.{i:03d}" for i in range(101)]  # one more than a page
    for name in names:
        assert c.post("/api/v1/queues", json={"name": name}).status_code == 200
    page.goto(f"{console.url}/queues")
    page.fill("input[name=filter]", "pg&x#")
    with page.expect_navigation():
        page.click("form.inline button:has-text('Filter')")

    def shown() -> tuple[str, str, list[str]]:
        return (page.input_value("input[name=filter]"), page.text_content("h1") or "",
                [r.get_attribute("data-name") or "" for r in page.locator("#destinations tbody tr").all()])

    assert shown()[:2] == ("pg&x#", "Queues (101)")
    with page.expect_navigation():
        page.click("#destinations th a:has-text('Name')")  # sort by name
    filtered, heading, rows = shown()
    assert (filtered, heading, rows) == ("pg&x#", "Queues (101)", names[:100]), (filtered, heading)
    with page.expect_navigation():
        page.click("text=next")
    assert shown() == ("pg&x#", "Queues (101)", names[100:])
    with page.expect_navigation():
        page.click("text=previous")
    assert shown() == ("pg&x#", "Queues (101)", names[:100])
    shot(page, "filter-paging")


def test_a_temporary_queue_is_listed_without_a_link_to_a_page_it_has_not(console, page) -> None:
    """A temporary queue (a STOMP client's /temp-queue/) is listed, marked temporary,
    with no link: it has no page of its own. Every link the listing shows opens."""
    c = console.client()

    def temporary() -> set[str]:
        items = c.get("/api/v1/queues", params={"filter": "ID:", "size": 1000}).json()["items"]
        return {q["name"] for q in items if q["temporary"]}

    assert c.post("/api/v1/queues", json={"name": "ui.linked"}).status_code == 200
    before = temporary()
    conn = stomp.Connection12([("127.0.0.1", console.stomp_port)])
    conn.connect(*APP, wait=True)
    try:
        conn.subscribe("/temp-queue/ui.replies", id="1")
        name = wait_until(lambda: temporary() - before, "the temporary queue", 10).pop()
        for listing in (f"filter={quote(name, safe='')}", "filter=ui."):
            page.goto(f"{console.url}/queues?{listing}")
            for a in page.locator("#destinations td.name a").all():
                href = a.get_attribute("href")
                assert page.request.get(f"{console.url}{href}").status == 200, href
        assert page.locator("#destinations td.name a").count() > 0  # ui. queues are linked
        page.goto(f"{console.url}/queues?filter={quote(name, safe='')}")
        row = page.locator(f"#destinations tr[data-name='{name}']")
        assert row.count() == 1 and row.locator("td.name a").count() == 0
        assert "temporary" in (row.locator("td.name").text_content() or "")
        shot(page, "temporary-queue")
    finally:
        conn.disconnect()


def test_copy_move_and_delete_ticked_messages_or_by_selector(console, page) -> None:
    send(console, "/queue/ui.sel", ["s-0", "s-1", "s-2", "s-3"])
    page.goto(f"{console.url}/queues/ui.sel")

    def tick(body: str) -> None:
        page.locator("#messages tr", has_text=body).locator("input[type=checkbox]").check()

    def act(button: str) -> str:
        page.once("dialog", lambda d: d.accept())
        with page.expect_navigation():
            page.click(button)
        return page.text_content("#flash") or ""

    tick("s-0")
    tick("s-2")
    page.fill("#selected-to", "ui.sel.copy")
    assert "copied 2 messages to ui.sel.copy" in act("#copy-selected")
    assert queue(console, "ui.sel.copy")["depth"] == 2 and queue(console, "ui.sel")["depth"] == 4
    tick("s-1")
    assert "deleted 1 messages" in act("#remove-selected")
    assert queue(console, "ui.sel")["depth"] == 3
    assert "no message ticked" in act("#remove-selected")  # never "all" by accident
    tick("s-3")
    page.fill("#selected-to", "ui.sel.moved")
    assert "moved 1 messages to ui.sel.moved" in act("#move-selected")
    assert queue(console, "ui.sel.moved")["depth"] == 1 and queue(console, "ui.sel")["depth"] == 2
    # by selector: copy everything, then delete everything (after a confirmation)
    page.fill("#move-form input[name=to]", "ui.sel.all")
    with page.expect_navigation():
        page.click("#copy")
    assert "copied 2 messages to ui.sel.all" in page.text_content("#flash")
    page.once("dialog", lambda d: d.dismiss())
    page.click("#remove")
    assert queue(console, "ui.sel")["depth"] == 2  # dismissed: nothing happened
    assert "deleted 2 messages" in act("#remove")
    assert queue(console, "ui.sel")["depth"] == 0 and queue(console, "ui.sel.all")["depth"] == 2
    shot(page, "ticked")


def test_retry_a_dead_lettered_message_from_the_dlq_page(console, page) -> None:
    conn, received = collecting(console)
    conn.send("/queue/ui.retry", "retry me", headers={"persistent": "true"})
    conn.subscribe("/queue/ui.retry", id="1", ack="client-individual")
    wait_until(lambda: received, "the message", 10)
    conn.nack(received[0].headers["ack"])
    conn.unsubscribe("1")
    conn.disconnect()
    wait_until(lambda: queue(console, "ActiveMQ.DLQ")["depth"] >= 1, "the DLQ", 10)
    page.goto(f"{console.url}/queues/ActiveMQ.DLQ")
    page.fill("#retry-form input[name=selector]", "JMSMessageID IS NOT NULL")
    page.click("#retry")
    page.wait_for_selector("#flash")
    assert "retried" in page.text_content("#flash")
    wait_until(lambda: queue(console, "ui.retry")["depth"] == 1, "the message back", 10)
    shot(page, "retried")


def test_close_a_connection(console, page) -> None:
    gone = threading.Event()

    class L(stomp.ConnectionListener):
        def on_disconnected(self) -> None:
            gone.set()

    conn = stomp.Connection12([("127.0.0.1", console.stomp_port)])
    conn.set_listener("", L())
    conn.connect(*APP, wait=True, headers={"client-id": "ui-victim"})
    page.goto(f"{console.url}/connections")
    row = page.locator("#connections tr", has_text="ui-victim")
    assert row.count() == 1
    page.once("dialog", lambda d: d.accept())
    row.locator("button.close-connection").click()
    page.wait_for_selector("#flash")
    assert gone.wait(10), "the STOMP client was not disconnected"
    assert page.locator("#connections tr", has_text="ui-victim").count() == 0
    shot(page, "connection-closed")


def test_the_destination_chart_follows_depth_and_rates(console, page) -> None:
    send(console, "/queue/ui.chart", ["a"])
    page.goto(f"{console.url}/queues/ui.chart")
    chart = page.locator("#destination-chart")

    def samples() -> int:
        return int(chart.get_attribute("data-samples") or 0)

    def last() -> list[float]:
        raw = chart.get_attribute("data-last") or ""
        return [float(v) for v in raw.split(",")] if raw else []

    wait_until(lambda: samples() >= 1, "the chart's first sample", 20)
    assert last()[0] == 1  # depth 1
    before = chart.screenshot()
    send(console, "/queue/ui.chart", [f"b{i}" for i in range(5)])
    wait_until(lambda: last() and last()[0] == 6, "the chart to show depth 6", 20)
    n = samples()
    points = page.locator("#depth-line").get_attribute("points").split()
    assert len(points) == n and n >= 2
    # the depth line rose: its last point is higher on the page (smaller y) than its first
    assert float(points[-1].split(",")[1]) < float(points[0].split(",")[1])
    assert "depth 6" in page.text_content("#destination-chart")
    assert chart.screenshot() != before  # what is drawn changed, not only the attributes
    shot(page, "destination-chart")


def test_a_hidden_dashboard_stops_polling_until_it_is_shown(console, page) -> None:
    def poll(request) -> bool:  # type: ignore[no-untyped-def]
        return request.url.endswith("/api/v1/broker")

    with page.expect_request(poll, timeout=10_000):
        page.goto(f"{console.url}/")
    page.wait_for_selector("[data-source][data-polling=on]")
    # the tab goes to the background: what the browser does for a hidden tab
    page.evaluate("""() => {
        Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
        document.dispatchEvent(new Event("visibilitychange"));
    }""")
    page.wait_for_selector("[data-source][data-polling=paused]")
    assert page.get_attribute("[data-source]", "data-polling") == "paused"
    # shown again: it asks at once, and keeps polling
    with page.expect_request(poll, timeout=10_000) as asked:
        page.evaluate("""() => {
            Object.defineProperty(document, "hidden", {configurable: true, get: () => false});
            document.dispatchEvent(new Event("visibilitychange"));
        }""")
    assert asked.value.method == "GET"
    page.wait_for_selector("[data-source][data-polling=on]")
    with page.expect_request(poll, timeout=10_000) as again:
        pass
    assert again.value.url.endswith("/api/v1/broker")
