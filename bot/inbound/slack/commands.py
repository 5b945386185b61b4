"""``/hazel``: the slash command. Each subcommand answers with a message only the caller sees.

    /hazel runs                              waiting on you, then runs in flight
    /hazel status RUN                        a run, its pending request, its error
    /hazel history RUN                       the checkpoint tree, with branches and decisions
    /hazel rewind RUN STEP|SEQ [feedback]    fork the run from an earlier checkpoint
    /hazel retry RUN                         resume a failed run from its last good checkpoint
    /hazel cancel RUN [reason]               cancel a run
    /hazel start WORKFLOW [input JSON]       start a run
    /hazel help

Permissions are the engine's: rewind, retry and cancel need an approver of the run (or who started it), start
needs the workflow's starters; refusals are audited. Reading (runs, status, history) is open to the workspace.

The answer is the command's acknowledgement when it is ready within ``ANSWER_WITHIN_SEC``; a command that takes
longer (a slow database) is acknowledged with ``WORKING`` and its answer follows through the command's
``response_url``: Slack shows "/hazel failed with the error operation_timeout" for a command not acknowledged
within 3 seconds, though a ``start`` may have started its run. An error under a command (the database gone, or
a bug) is logged in one line when it is the database's, and answered as such.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as AnswerPending
from typing import Any, Callable

from slack_bolt import App

from bot.engine import DecisionOutcome, HazelError, NotAllowedError, RunNotFoundError, error_line, log_error
from bot.inbound.slack.bridge import SlackBridge, failure_reason
from integrations.slack import blocks as B
from integrations.slack import text as T
from integrations.slack.directory import DirectoryError
from integrations.slack.replies import history_text, run_line
from store.errors import SchemaNotReadyError
from store.models import Actor, plain_mentions

log = logging.getLogger("hazel.slack")

COMMAND = "/hazel"
MAX_REPLY_CHARS = 3900
ANSWER_WITHIN_SEC = 1.5
"""How long a command's answer may take to be the acknowledgement itself. Slack waits 3 seconds from its send
for the acknowledgement (https://api.slack.com/interactivity/slash-commands, "Responding to commands"; Bolt
gives a listener 3 seconds from the request's arrival, ``Listener.ack_timeout``): what is left covers the
network and Bolt's own work."""
WORKING = "⏳ Working on it: the answer follows here in a moment."
"""The acknowledgement of a command whose answer was not ready within ``ANSWER_WITHIN_SEC``."""
ANSWERING_THREADS = 8
"""Commands answered at once (each in a thread of its own, so that the listener can acknowledge in time)."""
HELP = (f"*{COMMAND}* steers Hazel runs:\n"
        f"• `{COMMAND} runs`: what waits on you, then runs in flight\n"
        f"• `{COMMAND} status RUN`: a run and what it waits for\n"
        f"• `{COMMAND} history RUN`: its checkpoints, branches and decisions\n"
        f"• `{COMMAND} rewind RUN STEP [feedback]`: continue from an earlier step (STEP: a step name or a "
        f"checkpoint number from `history`)\n"
        f"• `{COMMAND} retry RUN`: resume a failed run\n"
        f"• `{COMMAND} cancel RUN [reason]`\n"
        f"• `{COMMAND} start WORKFLOW [input JSON]`, e.g. `{COMMAND} start migration-plan "
        '{"request": "add an index on orders.created_at"}`\n'
        "A RUN may be shortened to its first 4+ characters.")


def register(app: App, bridge: SlackBridge) -> None:
    """Add the ``/hazel`` listener to ``app``."""
    commands = Commands(bridge)
    answering = ThreadPoolExecutor(max_workers=ANSWERING_THREADS, thread_name_prefix="hazel-slash-command")

    @app.command(COMMAND)
    def on_command(ack: Callable[..., Any], command: dict[str, Any], respond: Callable[..., Any]) -> None:
        answer = answering.submit(commands.answer_or_error, command)
        try:
            ack(text=answer.result(timeout=ANSWER_WITHIN_SEC), response_type="ephemeral")
            return
        except AnswerPending:
            ack(text=WORKING, response_type="ephemeral")
        text = answer.result()
        try:  # (a response_url takes up to 5 messages within 30 minutes; never logged: it is a credential)
            sent = respond(text=text, response_type="ephemeral")
            why = None if sent.status_code == 200 else f"Slack answered {sent.status_code} {sent.body[:100]!r}"
        except Exception as exc:  # noqa: BLE001 (nothing more to tell: the person saw WORKING)
            why = error_line(exc)
        if why:
            log.warning("the answer to a slow %s %s by %s could not be sent to Slack: %s", COMMAND,
                        _subcommand(command), command.get("user_id"), why)


def rewound_text(outcome: DecisionOutcome) -> str:
    """The answer to ``/hazel rewind`` (mrkdwn): the checkpoint the run was forked from and the step it continues
    at. A command recorded already (Slack's resend, the same ``trigger_id``) is answered with what was recorded
    then, as the CLI answers a duplicate (``already recorded: …``): its run, its checkpoint, who rewound it;
    that may not be what this text asks (another command under the same trigger id is not rewound again)."""
    decision = outcome.decision
    continues = (f"; it continues at `{T.escape(outcome.next_node)}` on a new branch" if outcome.next_node
                 else " on a new branch")
    done = f"Run `{decision.run_id}` rewound to checkpoint #{decision.payload.get('to')}{continues}."
    if not outcome.duplicate:
        return f"↩️ {done}"
    return (f"↩️ Already recorded for this command (by {B.who_decided(decision)} "
            f"{B.date(decision.created_at)}): {done}")


class Commands:
    """Runs one ``/hazel`` command and returns the reply (mrkdwn)."""

    def __init__(self, bridge: SlackBridge) -> None:
        self.bridge = bridge
        self.hazel = bridge.hazel

    def answer_or_error(self, command: dict[str, Any]) -> str:
        """``answer``, or, when an error stops it (the database gone, or a bug: logged, in one line when it is
        the database's, never the SQL or its parameters), a reply saying the command may not have been done."""
        try:
            return self.answer(command)
        except Exception as exc:  # noqa: BLE001 (answered here: Bolt would log the SQL with its traceback)
            log_error(log, exc, "a Slack %s %s by %s failed", COMMAND, _subcommand(command), command.get("user_id"))
            why = T.escape(str(exc)) if isinstance(exc, SchemaNotReadyError) else failure_reason(exc)  # (the
            # schema's words: an operator's to fix)
            return (f"⚠️ `{COMMAND} {T.escape(_subcommand(command))}` may not have been done: {why}. "
                    f"`{COMMAND} runs` shows what is in flight; please try again in a moment.")

    def answer(self, command: dict[str, Any]) -> str:
        """The reply to one ``/hazel`` payload (form fields as a dict): the subcommand's answer, or a helpful
        message for an unknown subcommand, a bad run id, a refusal or an error. Never raises a ``HazelError``."""
        words = (command.get("text") or "").strip().split(None, 1)
        sub = words[0].lower() if words else "help"
        rest = words[1].strip() if len(words) > 1 else ""
        handler = getattr(self, "do_" + sub, None) if sub.isidentifier() else None
        if handler is None:
            return f"I don't know `{T.escape(sub)}`.\n\n{HELP}"
        try:
            actor = self.bridge.actor(command["user_id"], command.get("user_name"))
            reply = handler(actor, rest, command)
        except RunNotFoundError as exc:
            reply = T.escape(str(exc).replace("`hazel runs`", f"`{COMMAND} runs`"))
            if f"{COMMAND} runs" not in reply:
                reply += f". `{COMMAND} runs` lists the runs."
        except NotAllowedError as exc:  # (mentions named as plain text: escaped, they would read as "&lt;@U…")
            reply = f"🚫 {T.escape(plain_mentions(str(exc)))}"
        except (HazelError, DirectoryError) as exc:
            reply = T.escape(plain_mentions(str(exc)))
        return T.truncate(reply, MAX_REPLY_CHARS)

    def _run(self, rest: str, usage: str) -> tuple[str, str]:
        parts = rest.split(None, 1)
        if not parts:
            raise HazelError(f"Usage: `{COMMAND} {usage}`")
        return self.hazel.resolve(ref=parts[0]), (parts[1].strip() if len(parts) > 1 else "")

    # -- subcommands ---------------------------------------------------------------------------------------

    def do_help(self, actor: Actor, rest: str, command: dict) -> str:
        return HELP

    def do_runs(self, actor: Actor, rest: str, command: dict) -> str:
        lines = ["*Waiting on you*"]
        waiting = self.hazel.waiting_on(actor=actor, limit=20)
        for view in waiting:
            lines.append(f"• `{view.run.id}` *{T.escape(view.title)}* ({T.escape(view.workflow)}) in "
                         f"{B.channel_ref(view.request.channel)} since {B.date(view.request.created_at)}")
        if not waiting:
            lines.append("Nothing. :tada:")
        lines.append("*In flight*")
        active = self.hazel.runs(statuses=["waiting", "ready", "running"], limit=20)
        for run in active:
            lines.append(f"• {run_line(run)}")
        if not active:
            lines.append("No run is in flight.")
        return "\n".join(lines)

    def do_status(self, actor: Actor, rest: str, command: dict) -> str:
        run_id, _ = self._run(rest, "status RUN")
        run = self.hazel.get(run_id=run_id)
        lines = [run_line(run), f"started by {B.started_by(run)} {B.date(run.created_at)} · "
                                 f"checkpoint #{run.head_seq} · branch {run.branch}"]
        for pending in self.hazel.pending_requests_of(run_id=run_id):  # several: parallel LangGraph nodes
            lines.append(f"waits at *{T.escape(pending.title)}* in {B.channel_ref(pending.channel)} since "
                         f"{B.date(pending.created_at)}"
                         + (f" ({pending.approvals} of {pending.approvals_required} approvals)"
                            if pending.approvals_required > 1 else ""))
        if run.error:
            lines.append(f"error: {T.escape(run.error)}")
        return "\n".join(lines)

    def do_history(self, actor: Actor, rest: str, command: dict) -> str:
        run_id, _ = self._run(rest, "history RUN")
        run = self.hazel.get(run_id=run_id)
        return history_text(run, self.hazel.checkpoints(run_id=run_id), self.hazel.decisions(run_id=run_id),
                            max_chars=MAX_REPLY_CHARS)

    def do_rewind(self, actor: Actor, rest: str, command: dict) -> str:
        run_id, more = self._run(rest, "rewind RUN STEP [feedback]")
        parts = more.split(None, 1)
        if not parts:
            raise HazelError(f"Usage: `{COMMAND} rewind RUN STEP [feedback]` (see `{COMMAND} history {run_id}`)")
        to, feedback = parts[0], (parts[1] if len(parts) > 1 else None)
        delivery = f"command:{command['trigger_id']}" if command.get("trigger_id") else None
        outcome = self.hazel.rewind(run_id=run_id, actor=actor, to=to, feedback=feedback, delivery_id=delivery)
        return rewound_text(outcome)

    def do_retry(self, actor: Actor, rest: str, command: dict) -> str:
        run_id, _ = self._run(rest, "retry RUN")
        run = self.hazel.retry(run_id=run_id, actor=actor)
        return f"🔁 Run `{run.id}` is queued again from checkpoint #{run.head_seq}."

    def do_cancel(self, actor: Actor, rest: str, command: dict) -> str:
        run_id, reason = self._run(rest, "cancel RUN [reason]")
        self.hazel.cancel(run_id=run_id, actor=actor, reason=reason or None)
        return f"🚫 Run `{run_id}` is cancelled."

    def do_start(self, actor: Actor, rest: str, command: dict) -> str:
        parts = rest.split(None, 1)
        if not parts:
            names = ", ".join(f"`{wf.name}`" for wf in self.hazel.workflows()) or "none"
            raise HazelError(f"Usage: `{COMMAND} start WORKFLOW [input JSON]`; workflows: {names}")
        workflow, raw = parts[0], (parts[1] if len(parts) > 1 else "")
        try:
            data = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise HazelError(f"The input is not valid JSON ({exc}). Example: "
                             '`{"request": "add an index"}`') from None
        if not isinstance(data, dict):
            raise HazelError("The input must be a JSON object of the workflow's state fields.")
        # A resend (Slack's retry, also after a restart or to another server) is the same command, by the same
        # person, with the same trigger id and text: the engine's start key finds the run it started.
        trigger = command.get("trigger_id")
        key = f"command:{trigger}\0{actor.id}\0{rest}" if trigger else None
        run = self.hazel.start(workflow=workflow, input=data, actor=actor,  # a refusal is audited by the engine
                               delivery_id=key)
        if run.duplicate:
            return f"Run `{run.id}` was started by this command already."
        return (f"▶️ Started run `{run.id}` of {T.escape(run.workflow)} v{run.workflow_version}. Its steering "
                f"requests will be posted where the workflow asks; `{COMMAND} status {run.id}` follows it.")


def _subcommand(command: dict[str, Any]) -> str:
    """The subcommand a ``/hazel`` payload names (``help`` when none), at most 20 characters, for a log line."""
    words = (command.get("text") or "").split(None, 1)
    return (words[0].lower() if words else "help")[:20]
