"""A LangGraph run through the REST API over real HTTP: POST /api/runs, decisions (feedback, edit), a rewind,
and the checkpoints list showing the graph's checkpoints with their branches; SQLite and PostgreSQL."""

from __future__ import annotations

from bot.inbound.api import api_router
from bot.ops.worker import WorkerPool
from bot.server.http import create_app
from bot.settings import Settings
from tests.bot.test_api import ALICE, TOKENS, Api, wait_for
from tests.langgraph.graphs import review_graph, workflow
from tests.support.engine import make_hazel
from tests.support.live import LiveServer


def test_start_decide_rewind_and_list_checkpoints_over_rest(db_url: str) -> None:
    wf = workflow(review_graph())
    hazel = make_hazel(db_url, wf)
    pool = WorkerPool(hazel, threads=1, sweep_sec=0.1)
    pool.start()
    try:
        with LiveServer(create_app(hazel, routers=[api_router(hazel, Settings(**TOKENS))])) as server:
            api = Api(server.url)
            run_id = api.start("lg-review", {"topic": "tides"}, token=ALICE)["id"]
            run = api.wait_status(run_id, "waiting")
            assert run["pending_request"]["point"] == "review"
            seq = run["pending_request"]["checkpoint_seq"]
            shown = api.call("GET", f"/api/runs/{run_id}/checkpoints/{seq}/state").json()["state"]
            assert shown["draft"] == "Draft about tides" and "lg_checkpoint" not in shown  # the graph's values

            response = api.decide(run_id, {"action": "feedback", "payload": {"text": "shorter"}})
            assert response.status_code == 201, response.text
            wait_for(lambda: (r := api.run(run_id))["status"] == "waiting" and r["head_seq"] > seq and r)
            response = api.decide(run_id, {"action": "edit", "payload": {"value": "Tides, short"}})
            assert response.status_code == 201, response.text
            api.wait_status(run_id, "completed")

            response = api.decide(run_id, {"action": "rewind", "payload": {"to": "review", "feedback": None}})
            assert response.status_code == 201, response.text
            run = api.wait_status(run_id, "waiting")
            assert run["branch"] == 1 and run["pending_request"]["point"] == "review"
            checkpoints = api.call("GET", f"/api/runs/{run_id}/checkpoints").json()["checkpoints"]
            assert {c["branch"] for c in checkpoints} == {0, 1}
            steps = [(c["step"], c["next_step"]) for c in sorted(checkpoints, key=lambda c: c["seq"])]
            assert steps[:3] == [("__start__", "draft"), ("draft", "review"), ("review", "review")]
            assert ("__rewind__", "review") in steps and ("publish", None) in steps
            response = api.decide(run_id, {"action": "reject", "payload": {"reason": "not now"}})
            assert response.status_code == 201, response.text
            api.wait_status(run_id, "completed")  # a graph decides what a rejection means: here, it ends
            assert wf.graph.get_state({"configurable": {"thread_id": run_id}}).values["log"][-1] == \
                "rejected: not now"
    finally:
        pool.stop()
