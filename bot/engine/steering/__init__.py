"""Decisions, rewinds, retries and cancellations: the one path every channel takes to steer a run.

``Steering`` is the sum of small parts that share ``core.SteeringCore``: ``decide`` (approve, edit, reject,
feedback), ``rewind`` (time travel; ``rewind_edits``: who may rewind with edits), ``run_actions`` (retry,
cancel, ending a timed-out run) and ``edits`` (the one place an edit is parsed and validated). The engine's boundary, ``bot.engine.hazel.Hazel``, is what
adapters call; they never reach in here.
"""

from bot.engine.steering.core import REWINDABLE, DecisionOutcome, SteeringCore, when
from bot.engine.steering.decide import Deciding
from bot.engine.steering.edits import apply_edit, apply_edits, format_validation_error
from bot.engine.steering.rewind import Rewinding
from bot.engine.steering.run_actions import RunActions


class Steering(Deciding, Rewinding, RunActions):
    """Records decisions, rewinds, retries, cancellations and timeouts (see the parts)."""


__all__ = ["DecisionOutcome", "REWINDABLE", "Steering", "SteeringCore", "apply_edit", "apply_edits",
           "format_validation_error", "when"]
