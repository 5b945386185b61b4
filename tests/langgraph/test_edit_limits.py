"""Two fresh-user findings on a LangGraph run's edits (s16): an edit holding an integer past 64 bits was
recorded, then the node's write failed at every attempt (the run failed, ``hazel retry`` could not help, the
decision could not be sent again); and the edit command printed for a point of a node sent twice (``each.2``)
was refused by ``--set``, which split the point's name at its dot."""

from __future__ import annotations

import pytest

from bot.cli.common import edit_sets
from bot.engine.errors import InvalidDecisionError
from store.models import RequestStatus, RunStatus
from tests.langgraph.graphs import pair_graph, workflow
from tests.support.engine import make_hazel, person


def test_an_edit_past_64_bit_integers_is_refused_while_the_request_waits(db_url: str) -> None:
    wf = workflow(pair_graph(), name="lg-pair-big")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-pair-big", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    security = next(r for r in hz.requests(run_id=run.id) if r.point == "security")
    with pytest.raises(InvalidDecisionError, match=r"^invalid edit: security\.ask: 99999999999999999999999 is past "
                                                   r"the 64-bit integers the graph's checkpoints hold$"):
        hz.decide(run_id=run.id, action="edit", actor=person("ana"), request_id=security.id,
                  payload={"value": {"ask": 99999999999999999999999}})
    assert hz.decisions(run_id=run.id) == []
    assert next(r for r in hz.requests(run_id=run.id) if r.id == security.id).status is RequestStatus.PENDING
    hz.decide(run_id=run.id, action="edit", actor=person("ana"), request_id=security.id,  # 2**64 - 1 fits
              payload={"value": {"ask": 2 ** 64 - 1}})
    legal = next(r for r in hz.requests(run_id=run.id) if r.point == "legal")
    hz.decide(run_id=run.id, action="approve", actor=person("ana"), request_id=legal.id)
    hz.drive(run_id=run.id)
    assert hz.get(run_id=run.id).status is RunStatus.COMPLETED


def test_set_takes_a_shown_name_that_holds_a_dot() -> None:
    """``hazel edit R --at each.2 --set each.2=JSON (or --set each.2.KEY=@file)``, as the CLI prints it."""
    assert edit_sets(['each.2={"item": "X"}'], "each.2") == {"text": '{"item": "X"}'}
    assert edit_sets(["each.2.item=X"], "each.2") == {"entries": {"item": "X"}}
    assert edit_sets(["plan.a.sql=x"], "plan") == {"entries": {"a.sql": "x"}}  # (a key with a dot, as before)
    with pytest.raises(Exception, match=r"lets you edit 'each\.2' only, not each$"):
        edit_sets(['each={"item": "X"}'], "each.2")


@pytest.mark.parametrize("literal", ["1e400", "-1e999", "NaN"])
def test_a_number_that_is_not_finite_is_refused_in_a_graph_edit_and_a_rewind(db_url: str, literal: str) -> None:
    """s22 F1: ``1e400`` (Python's JSON reads it as Infinity: a REST body) in an edit or a rewind's edits of a
    graph run was recorded and stored as null (a graph's values are not checked as a state model's)."""
    import json

    wf = workflow(pair_graph(), name="lg-pair-inf")
    hz = make_hazel(db_url, wf)
    run = hz.start(workflow="lg-pair-inf", input={"topic": "launch"}, actor=person("olga"))
    hz.drive(run_id=run.id)
    security = next(r for r in hz.requests(run_id=run.id) if r.point == "security")
    bad = json.loads(literal)
    before = (hz.get(run_id=run.id), hz.checkpoints(run_id=run.id))
    with pytest.raises(InvalidDecisionError, match=r"^the edit holds a number that is not finite \(NaN, Infinity"):
        hz.decide(run_id=run.id, action="edit", actor=person("ana"), request_id=security.id,
                  payload={"value": {"ask": [bad]}})
    with pytest.raises(InvalidDecisionError, match=r"^the rewind holds a number that is not finite"):
        hz.decide(run_id=run.id, action="rewind", actor=person("ana"), payload={"to": 1, "edits": {"log": [bad]}})
    assert (hz.get(run_id=run.id), hz.checkpoints(run_id=run.id)) == before
    assert hz.decisions(run_id=run.id) == []
    assert next(r for r in hz.requests(run_id=run.id) if r.id == security.id).status is RequestStatus.PENDING


def test_the_cli_parser_names_a_number_too_large_for_a_float() -> None:
    from bot.engine.limits import strict_json

    with pytest.raises(ValueError, match=r"^1e400 is too large for a number \(at most about 1\.8e308\): a number "
                                         r"must be finite$"):
        strict_json('{"x": [1e400]}')
    assert strict_json('{"x": [1e308, -2.5, 10]}') == {"x": [1e308, -2.5, 10]}
