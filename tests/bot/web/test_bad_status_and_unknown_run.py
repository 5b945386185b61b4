"""Run pages: ``GET /runs?status=bogus`` answered 200 listing every run (the unknown status dropped), where the
REST API and ``/runs?mine=abc`` answer 422: it answers the one-line HTML page (422) naming ``status``. An unknown
run's page said "no run 'zzzzzz' (see `hazel runs`)", a console command: it says "no run 'zzzzzz'" with a link
to the runs list."""

from __future__ import annotations

from tests.bot.web.conftest import Browserless, Served
from tests.bot.web.scenario import ALICE
from tests.bot.web.test_bad_input import assert_html_error
from tests.bot.web.test_pages import sign_in


def test_an_unknown_status_answers_422(served: Served, client: Browserless) -> None:
    sign_in(client, ALICE)
    for path in ("/runs?status=bogus", "/runs?status=waiting&status=bogus", "/runs?status=", "/runs?mine=1&status=x"):
        response = client.get(path)
        assert response.status_code == 422, (path, response.status_code)
        assert_html_error(response, path, "status")
        assert served.run_id not in response.text  # no list of every run
    listed = client.get("/runs?status=waiting&status=waiting")
    assert listed.status_code == 200 and served.run_id in listed.text
    assert served.run_id not in client.get("/runs?status=completed").text


def test_an_unknown_run_points_at_the_runs_list(served: Served, client: Browserless) -> None:
    sign_in(client, ALICE)
    response = client.get("/runs/zzzzzz")
    assert_html_error(response, "/runs/zzzzzz", "no run &#39;zzzzzz&#39;")
    assert response.status_code == 404
    assert "hazel runs" not in response.text and "see `" not in response.text
    assert '<a href="/runs">See all runs</a>' in response.text
