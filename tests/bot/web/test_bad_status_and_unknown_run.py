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


def test_a_run_id_with_an_encoded_slash_is_an_unknown_run(served: Served, client: Browserless) -> None:
    """``/runs/abc%2Fdef``: the server decodes the path to ``/runs/abc/def``, which no page's route took, and
    the REST API's JSON "no such endpoint" answered; a browser gets the HTML "no run" page, as for any other
    unknown run id, still 404 (signed out: the sign-in page first, as for any run's page)."""
    signed_out = client.get("/runs/abc%2Fdef")
    assert signed_out.status_code == 303 and signed_out.headers["location"].startswith("/login?next="), \
        signed_out.headers
    sign_in(client, ALICE)
    for path, shown in (("/runs/abc%2Fdef", "abc/def"), ("/runs/a%2Fb%2Fc", "a/b/c"),
                        (f"/runs/{served.run_id}%2Fx", f"{served.run_id}/x")):
        response = client.get(path)
        assert response.status_code == 404, (path, response.status_code)
        assert_html_error(response, path, f"no run &#39;{shown}&#39;")
        assert '<a href="/runs">See all runs</a>' in response.text
    slashed = client.get(f"/runs/{served.run_id}/")  # a trailing slash still leads to the page
    assert slashed.status_code == 307 and slashed.headers["location"].endswith(f"/runs/{served.run_id}")
    assert client.get("/runs/").headers["location"].endswith("/runs")
