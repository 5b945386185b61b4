"""Run-level actions: retry a failed run, cancel a run, and end a waiting run when its request times out.

Each is one transaction. Whoever ends a run, the sequence is the same (``bot.engine.transitions``): the run's
conditional move to its final status, the pending request closed (``close_request``), the audit event and
the progress report (``end_run``). Locks are taken in one order everywhere, the run first and then its
request, so that a cancel, a timeout and a decision racing on PostgreSQL queue instead of deadlocking.
"""

from __future__ import annotations

from bot.engine import lgraph, permissions
from bot.engine.errors import InvalidDecisionError, NotAllowedError, RunStateError
from bot.engine.limits import check_text
from bot.engine.logcontext import bind_log_context
from bot.engine.steering.core import SteeringCore
from bot.engine.transitions import close_request, end_run
from bot.engine.versions import resolve_workflow, unknown_step
from bot.engine.workflow import SteeringPoint
from store.models import TIMEOUT, Actor, RequestStatus, Run, RunStatus, SteeringRequest

CANCELLABLE = (RunStatus.READY, RunStatus.RUNNING, RunStatus.WAITING, RunStatus.FAILED)


def _not_retryable(run: Run) -> str:
    """Why ``retry`` refuses ``run`` (neither ``failed`` nor ``ready``), and what moves it instead."""
    rule = "retry resumes a failed run, or continues a ready run that no process is continuing"
    if run.status is RunStatus.WAITING:
        return f"run {run.id} is waiting on a steering request: answer it instead; {rule}"
    if run.status is RunStatus.RUNNING:
        owner = f" by {run.lease_owner}" if run.lease_owner else ""
        return f"run {run.id} is running: it is being continued{owner}; {rule}"
    return (f"run {run.id} is {run.status.value}: nothing to retry (rewind it to run it again from an earlier "
            f"checkpoint); {rule}")


class RunActions(SteeringCore):
    """``retry``, ``cancel`` and ``end_waiting``: see the module docstring."""

    @bind_log_context(run_id="run_id")
    def retry(self, run_id: str, actor: Actor) -> Run:
        """Queue a ``failed`` run again from its last good checkpoint (attempts start over). A run that is
        already ``ready`` is returned as it is (the retry audited, ``run.retried``: what sets it going next is
        this retry, so that the same retry sent again once a process took the run is answered with it too), and
        so is one that another retry queued since this one read it (the same retry sent twice at once), whatever
        a worker made of it since, and a ``running`` one that a retry set going (``_running_for_a_retry``).

        Raises:
            RunNotFoundError, RunStateError (neither failed nor ready: the message says what moves the run
            instead), NotAllowedError, VersionUnavailableError (its version
            is not deployed here and no deployed version migrates from it: no worker could take it up).
        """
        run = self._check_run_action(run_id, actor, "retry")
        if run.status is RunStatus.READY:  # (two retries of a ready run at once: the one whose process claimed
            with self.store.transaction() as tx:  # it drives it, the other is answered with it; both exit 0)
                tx.events.add(action="run.retried", actor=actor, now=self.clock(), run_id=run.id,
                              from_seq=run.head_seq)
            return run
        if run.status is RunStatus.RUNNING and self._running_for_a_retry(run_id):
            return run  # the same retry sent twice at once, and a worker took the run after the first
        wf = resolve_workflow(self.registry, run)  # (a run queued that nothing can execute would wait unseen)
        if not isinstance(wf, lgraph.LangGraphWorkflow):  # (a step renamed under the same version: s33 F17)
            with self.store.read() as tx:  # (the head's row only: not its state's chain)
                head = tx.checkpoints.info(run.id, run.head_seq)
            missing = unknown_step(wf, run.id, head.next_step if head is not None else None)
            if missing is not None:
                raise RunStateError(missing)
        now = self.clock()
        with self.store.transaction() as tx:
            if not tx.runs.transition(run.id, from_statuses=[RunStatus.FAILED], now=now, status=RunStatus.READY,
                                      attempt=0, wake_at=None, error=None,
                                      error_traceback=None):  # (the failure stays in the audit log)
                current = self._run(tx, run_id)
                if current.status is RunStatus.READY:  # retried meanwhile (the same retry, sent twice at once)
                    return current
                cause = tx.events.latest_cause(run_id) if run.status is RunStatus.FAILED else None
                if cause is not None and cause.action == "run.retried" and cause.created_at >= run.updated_at:
                    return current  # a retry of the failure read above (the same retry, sent twice at once)
                raise RunStateError(_not_retryable(current))
            tx.events.add(action="run.retried", actor=actor, now=now, run_id=run.id, from_seq=run.head_seq)
            tx.notify_ready(run.id)
            after = self._run(tx, run_id)
        self.on_ready(run_id)
        return after

    def _running_for_a_retry(self, run_id: str) -> bool:
        """Whether what set the running run going last was a retry (``run.retried``, not a decision or its
        start): a retry now is the same one again, answered with the run."""
        with self.store.read() as tx:
            cause = tx.events.latest_cause(run_id)
        return cause is not None and cause.action == "run.retried"

    @bind_log_context(run_id="run_id")
    def cancel(self, run_id: str, actor: Actor, *, reason: str | None = None) -> Run:
        """Cancel a run that has not ended; its pending request is closed. A step executing now finishes,
        but its result is discarded (the worker's fenced write fails); until it has, the run keeps that worker's
        lease (a rewind waits for it: the step would run twice at once).

        Raises:
            RunNotFoundError, RunStateError (already ended), NotAllowedError, InvalidDecisionError (a reason
            over ``HAZEL_MAX_STATE_BYTES`` or not Unicode text).
        """
        self._check_run_action(run_id, actor, "cancel")  # who may, then what they sent
        if reason is not None:
            check_text(reason, max_bytes=self.max_state_bytes, what="the reason", refuse=InvalidDecisionError)
        now = self.clock()
        with self.store.transaction() as tx:
            current = self._run(tx, run_id, for_update=True)  # the run first, as every decision locks it
            if current.status not in CANCELLABLE:
                raise RunStateError(f"run {run_id} is {current.status.value}; nothing to cancel")
            request = tx.requests.pending_for_run(run_id)
            if request is not None:  # its update is queued before the run's "cancelled" progress
                by = {"by_id": actor.id, "by_channel": actor.channel}  # (the update names them as their channel
                close_request(tx, request, now=now, by=actor, action="cancel", status=RequestStatus.CANCELLED,
                              cancelled=True, **by)  # does: a Slack mention, not a name)
                lgraph.close_siblings(tx, self.registry.find(current.workflow, current.workflow_version), request,
                                      now=now, by=actor, action="cancel", status=RequestStatus.CANCELLED,
                                      cancelled=True, **by)
            if not end_run(tx, run_id=run_id, status=RunStatus.CANCELLED, now=now, by=actor,
                           from_statuses=CANCELLABLE, request_id=request.id if request else None, reason=reason,
                           keep_lease=current.status is RunStatus.RUNNING):  # (its step still executes)
                raise RunStateError(f"run {run_id} changed meanwhile; look at it again", hint=f"hazel show {run_id}")
            after = self._run(tx, run_id)
        self.on_outbox()
        return after

    def end_waiting(self, request: SteeringRequest, status: RunStatus, message: str, *,
                    by: Actor = TIMEOUT) -> bool:
        """End the run waiting on ``request`` as ``failed`` (``message`` is its error; ``hazel retry`` asks
        again) or ``cancelled``, closing the request, in one transaction; only while the request is still
        pending, so that a person's decision that came first wins. Returns False when it no longer was.

        Raises:
            RunStateError: the run is not waiting on it (nothing is changed).
        """
        now = self.clock()
        action = "fail" if status is RunStatus.FAILED else "cancel"
        with self.store.transaction() as tx:
            run = self._run(tx, request.run_id, for_update=True)  # the run first, as every decision locks it
            if close_request(tx, request, now=now, by=by, action=action, status=RequestStatus.CANCELLED,
                             cancelled=True, timed_out=by is TIMEOUT) is None:
                return False
            lgraph.close_siblings(tx, self.registry.find(run.workflow, run.workflow_version), request, now=now,
                                  by=by, action=action, status=RequestStatus.CANCELLED, cancelled=True,
                                  timed_out=by is TIMEOUT)
            failed = status is RunStatus.FAILED
            if not end_run(tx, run_id=request.run_id, status=status, now=now, by=by,
                           from_statuses=[RunStatus.WAITING], request_id=request.id,
                           reason=None if failed else message, error=message if failed else None):
                raise RunStateError(f"run {request.run_id} is not waiting on request {request.id}")
        self.on_outbox()
        return True

    def _check_run_action(self, run_id: str, actor: Actor, verb: str) -> Run:
        """Retry and cancel may be done by the person who started the run or an approver of the pending
        request's point (of any point when nothing is pending). When the run's version
        is not deployed, the newest deployed version of its workflow names the approvers (as it is the one a
        decision would continue the run on).

        Raises:
            RunNotFoundError, NotAllowedError (recorded in the audit log).
        """
        with self.store.read() as tx:
            run = self._run(tx, run_id)
            request = tx.requests.pending_for_run(run.id)
            wf = self.registry.find(run.workflow, run.workflow_version)
            deployed = self.registry.versions(run.workflow) if wf is None else []
            if deployed:  # its version is gone: the newest deployed one names the approvers
                wf = self.registry.find(run.workflow, deployed[-1])
            graph_points = lgraph.points_of_run(tx, wf, run, request)  # a LangGraph run's: its own requests'
        points = [] if wf is None else ([wf.point(request.point)] if request is not None and
                                        isinstance(wf.nodes.get(request.point), SteeringPoint)
                                        else wf.steering_points())
        points = graph_points if graph_points is not None else points
        if permissions.may_run_action(points, actor, run, self.people):
            return run
        reason = permissions.run_action_refusal(points, verb, actor, run, self.people)
        self.refuse(run_id=run.id, request_id=request.id if request else None, actor=actor, action=verb,
                    reason=reason)
        raise NotAllowedError(reason)
