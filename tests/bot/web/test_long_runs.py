"""The run pages of a run with 3,000 checkpoints (a step that loops on itself, then a steering point), over real
HTTP (the app on a loopback port, SQLite and PostgreSQL) and in Chromium: a page's size is bounded whatever the
run's length, the page says that its list is cut, and every checkpoint stays reachable and rewindable from it.

Before, the run page of such a run was 2.8 MB (a row and a rewind form per checkpoint, a select of every
checkpoint), its diff page 0.24 MB and the page of one checkpoint's state 0.17 MB (a user's run of 3,000
checkpoints: 3.5 MB and 0.7 MB)."""

from __future__ import annotations

import re
import time
from typing import Any, Iterator

import pytest

from bot.engine.workflow import Workflow
from bot.inbound.web import Signer, history, pages, web_router
from bot.server.http import create_app
from hazel import Approvers
from store.checkpoints import CheckpointRepo
from store.models import Action, RunStatus
from tests.bot.web.conftest import Browserless, Served
from tests.bot.web.scenario import ALICE, BOB, as_api, web_settings
from tests.bot.web.test_pages import sign_in
from tests.support.engine import make_hazel
from tests.support.live import LiveServer
from tests.workflows.looping import looping

LOOPS = 3000
RUN_PAGE_MAX_BYTES = 64_000
"""The most a run page (any page of its tree) may take, whatever the run's length (3,000 checkpoints: ~38 KB)."""
SMALL_PAGE_MAX_BYTES = 16_000
"""The most a diff page and a checkpoint's state page of this run may take (its states are a few bytes)."""


def long_workflow() -> Workflow:
    """``prepare``, then ``loop`` going to itself until it has run ``loops`` times (the run's input), then
    ``review`` (alice; feedback from anyone)."""
    return looping(name="long", approvers=Approvers(users=["alice"]), actions=["approve", "feedback", "rewind"],
                   permissions={"feedback": "anyone"})


def start(hazel: Any, loops: int = LOOPS) -> str:
    run = hazel.start(workflow="long", input={"loops": loops}, actor=as_api(hazel, "olga"))
    hazel.drive(run_id=run.id)
    assert hazel.get(run_id=run.id).status is RunStatus.WAITING
    return run.id


@pytest.fixture
def long_run(db_url: str) -> Iterator[Served]:
    """A run of 3,002 checkpoints (#0, #1 after ``prepare``, #2..#3001 after each ``loop``) waiting at
    ``review``, served by the real app."""
    hazel = make_hazel(db_url, long_workflow())
    run_id = start(hazel)
    settings = web_settings()
    with LiveServer(create_app(hazel, routers=[web_router(hazel, settings)])) as server:
        yield Served(hazel, server.url, run_id, Signer(settings))


def wait_waiting(served: Served) -> None:
    deadline = time.monotonic() + 30
    while served.hazel.get(run_id=served.run_id).status is not RunStatus.WAITING:
        assert time.monotonic() < deadline, "the run did not wait again"
        time.sleep(0.05)


def rows(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'<li class="row[^"]*" id="cp-(\d+)">', page)]


def rewind_fields(page: str) -> dict[str, str]:
    """The hidden fields of the page's one rewind form."""
    [body] = re.findall(r'<form [^>]*id="rewind">(.*?)</form>', page, re.S)
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', body))


def href(page: str, text: str) -> str:
    found = re.search(rf'<a [^>]*href="([^"]+)"[^>]*>{re.escape(text)}</a>', page)
    assert found, f"no link {text!r}"
    return found.group(1).replace("&amp;", "&")


def test_the_pages_of_a_3000_checkpoint_run_stay_small_and_say_the_list_is_cut(
        long_run: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    client, run, hazel = Browserless(long_run.url), long_run.run_id, long_run.hazel
    sign_in(client, ALICE)
    assert len(hazel.checkpoints(run_id=run)) == LOOPS + 2

    page = client.get(f"/runs/{run}")
    assert page.status_code == 200
    assert len(page.content) < RUN_PAGE_MAX_BYTES, len(page.content)
    shown = rows(page.text)
    # the newest page: #0 (the run's input), #1 (where `loop` starts), then the newest 50 (#2952..#3001)
    assert shown == [0, 1, *range(LOOPS + 2 - history.ROWS, LOOPS + 2)]
    assert (f"The list is cut: it shows {len(shown)} of the run's {LOOPS + 2} checkpoints, the newest and, before "
            "them, #0 (the run's input) and where each step starts.") in page.text
    assert f"#2–#{LOOPS + 1 - history.ROWS}: {LOOPS - history.ROWS} checkpoints not shown" in page.text
    assert page.text.count('name="here"') == len(shown) - 1  # a "rewind here" on every row but the head's
    assert page.text.count('<form method="post" action="/runs/') == 3  # approve, feedback, rewind
    assert page.text.count("<option ") <= history.CHOICES
    assert "The list suggests 50 of the 3001 checkpoints the run can continue from" in page.text

    older = client.get(href(page.text, "Oldest"))
    assert older.status_code == 200 and len(older.content) < RUN_PAGE_MAX_BYTES
    assert rows(older.text) == list(range(0, (LOOPS + 2) % history.ROWS or history.ROWS))
    middle = client.get(f"/runs/{run}?page=20")
    assert rows(middle.text) == list(range(LOOPS + 2 - 21 * history.ROWS, LOOPS + 2 - 20 * history.ROWS))
    assert len(middle.content) < RUN_PAGE_MAX_BYTES and "The list is cut: it shows checkpoints #" in middle.text
    past = client.get(f"/runs/{run}?page=999")
    assert past.status_code == 200 and rows(past.text) == [] and "No checkpoints on page 999" in past.text

    diff = client.get(f"/runs/{run}/diff")
    assert diff.status_code == 200 and len(diff.content) < SMALL_PAGE_MAX_BYTES, len(diff.content)
    assert "#3000 loop → #3001 loop" in diff.text and "The lists suggest" in diff.text
    old_diff = client.get(f"/runs/{run}/diff?a=700&b=1500")  # two checkpoints no list suggests: still compared
    assert old_diff.status_code == 200 and "#700 loop → #1500 loop" in old_diff.text
    assert 'name="a" type="number" min="0" required list="a-list" placeholder="checkpoint number" value="700"' \
        in old_diff.text
    state = client.get(f"/runs/{run}/checkpoints/1500")
    assert state.status_code == 200 and len(state.content) < SMALL_PAGE_MAX_BYTES, len(state.content)
    assert "State at #1500 loop" in state.text and state.text.count('href="/runs/' + run + '/checkpoints/') <= 24

    # the same pages of a run 10 times shorter differ by the digits of their numbers only
    short = start(hazel, LOOPS // 10)
    for path in ("", "?page=1", "/diff", "/checkpoints/2"):
        long_page, short_page = client.get(f"/runs/{run}{path}"), client.get(f"/runs/{short}{path}")
        assert long_page.status_code == short_page.status_code == 200, path
        assert len(long_page.content) - len(short_page.content) < 2_000, (path, len(long_page.content),
                                                                            len(short_page.content))

    # a page loads the states it shows only (each a snapshot and its patches: a bounded number of rows), never
    # every checkpoint's: the run page the pending request's, a diff page two
    loaded: list[Any] = []
    load_later = CheckpointRepo.load_later

    def counted(self: CheckpointRepo, run_id: str, seq: int | None) -> Any:
        loaded.append(seq)
        return load_later(self, run_id, seq)

    monkeypatch.setattr(CheckpointRepo, "load_later", counted)
    for path, most in (("", 1), ("?page=30", 1), ("/diff?a=5&b=2000", 2), ("/checkpoints/1234", 1)):
        loaded.clear()
        assert client.get(f"/runs/{run}{path}").status_code == 200
        assert 0 < len(loaded) <= most, (path, loaded)


def test_an_old_checkpoint_is_reached_through_the_pages_and_rewound_to(long_run: Served) -> None:
    client, run, hazel = Browserless(long_run.url), long_run.run_id, long_run.hazel
    sign_in(client, ALICE)
    assert 2500 not in rows(client.get(f"/runs/{run}").text)

    # from the checkpoint's own page to the page of the tree that lists it, and its "rewind here"
    state = client.get(f"/runs/{run}/checkpoints/2500").text
    tree = client.get(href(state, "in the tree")).text
    assert 2500 in rows(tree) and len(tree.encode()) < RUN_PAGE_MAX_BYTES
    assert re.search(r'<button [^>]*form="rewind" name="here" value="2500"[^>]*>rewind here</button>', tree)
    form = rewind_fields(tree)
    assert form["head"] == str(LOOPS + 1)
    rewound = client.post(f"/runs/{run}/rewind", data={**form, "here": "2500", "feedback": "once more"})
    assert rewound.status_code == 303, rewound.text[:500]
    [decision] = [d for d in hazel.decisions(run_id=run) if d.action is Action.REWIND]
    assert (decision.channel, decision.payload["to"], decision.payload["feedback"]) == ("web", 2500, "once more")
    assert "Rewound to checkpoint #2500 as alice" in client.get(f"/runs/{run}").text
    wait_waiting(long_run)

    # a checkpoint no list suggests, typed into the rewind form's field on the newest page
    page = client.get(f"/runs/{run}").text
    assert '<option value="2777">' not in page
    rewound = client.post(f"/runs/{run}/rewind", data={**rewind_fields(page), "to": "2777"})
    assert rewound.status_code == 303, rewound.text[:500]
    assert [d.payload["to"] for d in hazel.decisions(run_id=run) if d.action is Action.REWIND] == [2500, 2777]
    wait_waiting(long_run)
    fork = next(cp for cp in hazel.checkpoints(run_id=run) if cp.decision_id == hazel.decisions(run_id=run)[-1].id)
    assert fork.parent_seq == 2777
    # a form that names no checkpoint is refused, nothing done
    refused = client.post(f"/runs/{run}/rewind", data=rewind_fields(client.get(f"/runs/{run}").text))
    assert refused.status_code == 422 and "to: Field required" in refused.text
    assert len([d for d in hazel.decisions(run_id=run) if d.action is Action.REWIND]) == 2


def test_rewind_here_on_an_older_page_in_a_browser(chromium: Any, long_run: Served) -> None:
    """Chromium: the "rewind here" button of a row on an older page submits the page's one rewind form, though
    its checkpoint field (a number field: the list is cut) is empty and required."""
    context = chromium.new_context(base_url=long_run.url, viewport={"width": 1100, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.goto(f"/runs/{long_run.run_id}")
        page.fill("#token", ALICE)
        page.click("button[type=submit]")
        page.wait_for_url(f"**/runs/{long_run.run_id}")
        assert "The list is cut" in page.inner_text("#tree")
        page.get_by_role("link", name="Older →").first.click()
        page.wait_for_url("**page=1*")
        page.locator("#cp-2910").get_by_role("button", name="rewind here").click()
        assert "Rewound to checkpoint #2910 as alice" in page.inner_text(".flash")
        assert long_run.hazel.decisions(run_id=long_run.run_id)[-1].payload["to"] == 2910
        wait_waiting(long_run)
    finally:
        context.close()


def test_the_decisions_table_lists_the_newest_and_says_so(served: Served) -> None:
    hazel, run = served.hazel, served.run_id
    bob = as_api(hazel, "bob")
    for i in range(pages.DECISION_ROWS):
        hazel.decide(run_id=run, action="feedback", actor=bob, payload={"text": f"round {i}"})
        hazel.drive(run_id=run)
    total = len(hazel.decisions(run_id=run))
    assert total > pages.DECISION_ROWS
    client = Browserless(served.url)
    sign_in(client, BOB)
    page = client.get(f"/runs/{run}").text
    table = page.split('<table class="decisions">', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr><td") == pages.DECISION_ROWS
    assert f"round {pages.DECISION_ROWS - 1}" in table and "add a restore drill" not in table  # the oldest left out
    assert (f"The newest {pages.DECISION_ROWS} of the run's {total} decisions; the <a href=\"/runs/{run}/audit\">"
            "audit log</a> lists every one.") in page
