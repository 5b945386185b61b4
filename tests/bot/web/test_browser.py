"""The run pages in a real browser: Debian's Chromium, headless, through Playwright, clicking as a person
would through a run with two rewinds (tests/bot/web/scenario.py) served by the real app on a loopback port."""

from __future__ import annotations

import re
import time
from typing import Any

from store.models import RunStatus
from tests.bot.web.conftest import Served
from tests.bot.web.scenario import ALICE


def wait_status(served: Served, status: RunStatus) -> None:
    deadline = time.monotonic() + 10
    while served.hazel.get(run_id=served.run_id).status is not status:
        assert time.monotonic() < deadline, f"the run did not become {status.value}"
        time.sleep(0.02)


def test_an_unsigned_visit_is_refused(page: Any, served: Served) -> None:
    page.goto(f"/runs/{served.run_id}")
    assert re.search(r"/login\?next=", page.url)
    assert "restore drill" not in page.content() and page.locator("li.row").count() == 0
    tampered = served.link("alice")[:-4] + "xxxx"
    response = page.goto(tampered)
    assert response.status == 401 and "not valid" in page.inner_text("main")
    assert page.locator("#pending").count() == 0


def test_click_through_a_run_with_two_rewinds(page: Any, served: Served) -> None:
    run = served.run_id
    page.goto(f"/runs/{run}")  # sign in with a REST token, back to the run
    page.fill("#token", ALICE)
    page.click("button[type=submit]")
    page.wait_for_url(f"**/runs/{run}")

    # the tree: 8 checkpoints, two forks, the head marked, the abandoned branches faint
    rows = page.locator("li.row")
    assert rows.count() == 8
    assert page.locator("li.row.head").inner_text().startswith("#7")
    assert [page.locator(f"#cp-{s}").get_attribute("class").count("dead") for s in (3, 4, 5)] == [0, 1, 1]
    assert page.locator("svg.graph path.fork").count() == 2 and page.locator("svg.graph .ring").count() == 1
    assert "feedback by bob via api" in page.inner_text("#cp-2")
    assert "rewound by alice via api" in page.inner_text("#cp-4") and "to #1" in page.inner_text("#cp-4")
    assert "to #3" in page.inner_text("#cp-6")

    # the stored <script> is shown as text and never runs (autoescape, and the CSP would refuse it)
    assert "<script>document.title='pwned'" in page.inner_text("#pending")
    assert page.evaluate("window.pwned") is None and page.title() != "pwned" and page.errors == []

    # the pending request: what it shows, who may decide, the buttons this person has
    pending = page.locator("#pending")
    assert "Waiting: Review the plan" in pending.inner_text()
    assert "keep the restore drill; add the retention policy" in pending.locator("pre.value").inner_text()
    assert pending.get_by_role("button", name="Approve").is_visible()

    # the state at a checkpoint, then a diff between the abandoned branch's draft and the head
    page.click("#cp-3 .l1 a")
    assert "State at #3 draft" in page.inner_text("h2")
    page.get_by_role("link", name="Diff", exact=True).click()
    page.select_option("select[name=a]", "3")
    page.select_option("select[name=b]", "7")
    page.get_by_role("button", name="Compare").click()
    assert "#3 draft → #7 draft" in page.inner_text("main h2")
    added = page.locator("section.f-changed tr.l-add").all_inner_texts()
    assert any("keep the restore drill; add the retention policy" in t for t in added)
    assert "Unchanged" in page.inner_text("main")

    # CSRF: a form post without the session's token is refused and changes nothing
    response = page.request.post(f"/runs/{run}/decide", form={"action": "approve"})
    assert response.status == 403
    assert served.hazel.get(run_id=run).status is RunStatus.WAITING

    # approve from the page: the engine's path, as alice, on the channel web
    page.get_by_role("link", name="Tree", exact=True).click()
    page.locator("#pending").get_by_role("button", name="Approve").click()
    assert "Approved as alice" in page.inner_text(".flash")
    wait_status(served, RunStatus.COMPLETED)
    page.reload()
    assert "completed" in page.inner_text("h1")
    page.get_by_role("link", name="Audit log").click()
    row = page.locator("tr", has_text="decision.approve")
    assert "web alice" in row.inner_text()


def test_rewind_to_here_from_the_tree(page: Any, served: Served) -> None:
    page.goto(served.link("alice"))
    page.wait_for_url(f"**/runs/{served.run_id}")
    page.locator("#cp-1").get_by_role("button", name="rewind here").click()
    assert "Rewound to checkpoint #1 as operator olga for alice" in page.inner_text(".flash")
    wait_status(served, RunStatus.WAITING)
    page.reload()
    # #1 is the first draft, waiting for its review: the fork's first checkpoint waits there again
    assert page.locator("li.row").count() == 9 and page.locator("svg.graph path.fork").count() == 3
    assert "rewound by operator olga for alice via web" in page.inner_text("#cp-8")
    assert page.locator("li.row.head").inner_text().startswith("#8")
    assert "Waiting: Review the plan" in page.inner_text("#pending")


def test_readable_on_a_phone(chromium: Any, served: Served) -> None:
    context = chromium.new_context(base_url=served.url, viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        page.goto(served.link("alice"))
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the run page scrolls sideways on a phone ({width}px)"
        assert page.locator("#pending").get_by_role("button", name="Approve").is_visible()
    finally:
        context.close()
