"""Who a reminder says can still decide (``permissions.still_deciding``) once a point open to anyone escalates."""

from __future__ import annotations

from bot.engine import People
from bot.engine.permissions import still_deciding
from store.models import Approvers


def test_a_point_open_to_anyone_stays_open_after_its_escalation() -> None:
    backup = Approvers(slack_users=("U0000000009",))
    assert still_deciding([Approvers(), backup], People(), "slack:#c", voted=set(), starter=None) == Approvers()
    assert still_deciding([Approvers()], People(), "slack:#c", voted=set(), starter=None) == Approvers()


def test_named_approvers_and_their_backups_are_listed_and_those_who_voted_left_out() -> None:
    left = still_deciding([Approvers(slack_users=("U1",)), Approvers(slack_users=("U2",))], People(), "slack:#c",
                          voted={"slack:U1"}, starter=None)
    assert left == Approvers(slack_users=("U2",))
