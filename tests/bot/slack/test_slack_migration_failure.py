"""A failing version migration is answered in Slack with the engine's one-line reason, naming the field the
new version's model refuses and why (``owner: Field required``), not pydantic's first line (``1 validation
error for S2``): a click on a v1 run's Approve when only v2 is deployed (fresh-user finding F7). On SQLite and
PostgreSQL, the request posted by a Hazel with v1, the click handled by one with v2 only."""

from __future__ import annotations

from store.models import Approvers
from tests.bot.slack.conftest import PRIYA, SlackEnv
from tests.workflows.migrating import v1, v2


def test_slack_answers_the_click_naming_the_field(make_env) -> None:  # noqa: ANN001
    approvers = Approvers(slack_users=(PRIYA,))
    old: SlackEnv = make_env(v1(channel="slack:#deploys", approvers=approvers))
    run_id = old.start("mig", {"plan": ""})
    old.settle()
    message = old.request_message(run_id)
    new: SlackEnv = make_env(v2(lambda tree: dict(tree), channel="slack:#deploys", approvers=approvers))
    assert new.sender.click(PRIYA, "approve", message, name="priya").status_code == 200
    text = new.ephemeral(PRIYA, "migrating its state")["text"]
    assert "from v1 to mig v2 failed: the migrated state does not fit mig v2's state model (S2): owner: Field " \
           "required" in text, text
    assert new.hazel.decisions(run_id=run_id) == [] and new.hazel.get(run_id=run_id).workflow_version == 1
