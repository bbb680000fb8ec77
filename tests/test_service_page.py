"""The status page of ``upkeep serve`` in a real browser (Debian's chromium, headless,
driven by Playwright): the tables a token may read, the dissemination tree, each
subscription's listeners and lag, and a subscription's rows updated live."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright
from test_service import ADMIN, QUERIES, READER, TABLES, TOKENS, start

from upkeep.client import Client
from upkeep.service.relay import RelaySite

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"])
        yield browser
        browser.close()


def test_the_page_shows_tables_tree_lag_and_live_rows(browser, tmp_path) -> None:
    server, relay = start(tmp_path / "db"), None
    try:
        admin = Client(server.url, ADMIN)
        admin.sql(TABLES + "INSERT INTO customer VALUES (1, 'A', 1);"
                  "INSERT INTO orders VALUES (1, 1, 'open', 10), (2, 1, 'done', 20);"
                  "INSERT INTO secret VALUES (1, 'hidden')")
        sid = Client(server.url, READER).subscribe(QUERIES[0]).id
        relay = RelaySite(server.url, READER, "SELECT o.ok, o.status, o.price FROM orders o "
                          "WHERE o.status = 'open'", TOKENS, name="relay-p").start()
        placed = Client(server.url, READER).replica(
            "SELECT o.ok FROM orders o WHERE o.status = 'open' AND o.ok > 1", placed=True,
            name="placed")
        assert placed.lease.feed == [relay.url]
        admin.subscribe("SELECT s.id, s.note FROM secret s")  # not the reader's to see
        page = browser.new_page()
        page.goto(f"{server.url}/?access_token={READER}")
        tables = page.locator("#tables tbody")
        expect(tables).to_contain_text("orders")
        expect(tables).to_contain_text("customer")
        expect(page.locator("#subscriptions tbody tr")).to_have_count(3)  # with the relay's
        tree = page.locator("#tree")
        expect(tree.locator("li[data-member='relay-p']")).to_contain_text(relay.url)
        # the placed subscriber hangs under the relay that feeds it
        expect(tree.locator("li[data-member='relay-p'] li[data-member='placed']")
               ).to_contain_text(placed.info.id)
        expect(tree).to_contain_text("50.0% of members fed by relays")
        assert "secret" not in page.content() and "hidden" not in page.content()

        page.locator(f"#subscriptions tr[data-id='{sid}'] button").click()
        live = page.locator("#live tbody tr")
        expect(live).to_have_count(1)  # order 1 is open
        expect(page.locator("#live thead")).to_contain_text("status")
        admin.sql("INSERT INTO orders VALUES (3, 1, 'open', 5); "
                  "UPDATE orders SET status = 'done' WHERE ok = 1")
        expect(live).to_have_count(1)
        expect(page.locator("#live tbody")).to_contain_text("3")
        expect(page.locator("#live-token")).to_contain_text(f"{server.hub.instance}:")
        row = page.locator(f"#subscriptions tr[data-id='{sid}']")
        expect(row.locator("td").nth(2)).to_have_text("1")  # the page's own stream
        expect(row.locator("td").nth(3)).to_have_text("0")  # and it is current
        admin.sql("INSERT INTO orders VALUES (4, 1, 'open', 6)")
        expect(live).to_have_count(2)
        page.screenshot(path=str(tmp_path / "page.png"))
        page.close()
        assert httpx.get(server.url + "/").status_code == 401
    finally:
        if relay is not None:
            relay.stop()
        server.stop()
