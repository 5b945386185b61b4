"""The Jira channel: a steering request is an issue in the project of its channel string (``jira:MIG``).

One issue per run and steering point: when the same point asks again (after feedback, a rewind, an edit under
a quorum) and its issue is still open, the issue is reused (new description, a comment saying so), so the
conversation stays in one place. Decisions, votes and the run's progress become comments; approval moves the
issue to the done status, rejection to the rejected status, the run's completion to the done status, through
as many transitions as the project's workflow needs (``integrations.jira.workflow``).

REST calls (API v2, through the ``jira`` library): ``POST /issue`` (create), ``GET /search`` or
``/search/jql`` (find the run's issue for this point), ``PUT /issue/{id}`` (new description), ``POST
/issue/{id}/comment`` (with a comment property naming the outbox message; ``GET /issue/{id}/comment?expand=
properties`` on a retry looks for it first), ``GET``/``POST /issue/{id}/transitions``, ``POST
/issue/{id}/watchers``.
Every failure raises ``DeliveryError`` / ``PermanentDeliveryError`` (see ``integrations.jira.client``).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable

from jira import JIRA

from integrations.base import Channel, DeliveryError, PermanentDeliveryError
from integrations.jira import render
from integrations.jira.client import jira_call
from integrations.jira.options import JiraOptions, same_status
from integrations.jira.webhook import site_of
from integrations.jira.workflow import Walk, walk
from store.models import Delivery, ProgressView, RequestStatus, RequestView, SteeringRequest

log = logging.getLogger("hazel.jira")
APPROVED = ("approve", "edit")
COMMENT_PROPERTY = "hazel.delivery"
"""The key of the comment property (``{"key": "<Delivery.key>/<part>"}``) Hazel sets on a comment it adds for an
outbox message, so that a retry can tell it is there already."""
LOOKUP_COMMENTS = 100
"""How many of an issue's newest comments a retry looks through for its own."""


def message_key(issue_id: str | int) -> str:
    """The key under which a request's issue is indexed (``SteeringRequest.message_key``): the numeric issue
    id, which every webhook carries and which survives moving the issue to another project."""
    return f"jira:{issue_id}"


def point_label(run_id: str, point: str) -> str:
    """The label that marks the issue of one run's steering point (Jira labels may not contain spaces)."""
    return f"hazel-{run_id}-{point}"


def request_label(request_id: int) -> str:
    """The label of the request an issue shows (an issue reused by later requests collects theirs)."""
    return f"hazel-request-{request_id}"


def issue_of(request: SteeringRequest | None) -> str | None:
    """The issue id a request was posted as, or None if no issue was created for it."""
    ref = request.message_ref if request is not None else None
    return str(ref["issue_id"]) if isinstance(ref, dict) and ref.get("issue_id") else None


def contradicts(view: ProgressView) -> bool:
    """Whether how the run ended contradicts how the issue's own request was decided: the run was rejected after
    the issue's request was approved (or edited), or completed after it was rejected (an ``on_reject`` branch),
    at a later point, in Jira or on another channel. Such an issue stays where its decision put it; the progress
    comment tells how the run ended."""
    r = view.request
    if r is None or r.status is not RequestStatus.DECIDED:
        return False
    return (view.event == "rejected" and r.decided_action in APPROVED) or (
        view.event == "completed" and r.decided_action == "reject")


class JiraChannel(Channel):
    """Steering requests as Jira issues.

    Args:
        client: a ``jira.JIRA`` (see ``integrations.jira.client.build_client``).
        cloud: Jira Cloud (people are account ids) rather than Server / Data Center (user names).
        defaults: issue type and statuses where a steering point sets no ``jira_*`` option.
        max_chars: characters of artefact per description, in UTF-16 code units as Jira counts them (Jira's
            limit per field is 32,767: ``render.FIELD_CHARS``).
        link_for: ``run_id -> URL | None``, the signed "View run" link each issue description carries.
        identities: ``person -> their Jira identities`` (the people file), so that approvers listed as
            ``people`` are mentioned and watch the issue; None (also settable later as ``.identities``: the
            webhook's router sets the engine's) mentions only ``jira_users``.
    """

    name = "jira"

    def __init__(self, *, client: JIRA, cloud: bool, defaults: JiraOptions | None = None,
                 max_chars: int = render.MAX_TEXT_CHARS, link_for: Callable[[str], str | None] | None = None,
                 identities: render.JiraIdentities | None = None) -> None:
        self.client = client
        self.link_for = link_for
        self.identities = identities
        self.cloud = cloud
        self.defaults = defaults or JiraOptions()
        self.max_chars = max_chars
        self._own_site: str | None = None

    def own_site(self) -> str | None:
        """The site of the Jira Hazel talks to as its webhooks name it (``webhook.site_of`` of its ``baseUrl``,
        ``GET /rest/api/2/serverInfo``: the URL Jira knows itself by, which ``JIRA_URL`` need not be), read once
        per process; None when Jira does not say. For an issue whose request keeps no site of its own (created by
        a Hazel before requests kept it).

        Raises:
            DeliveryError, PermanentDeliveryError: Jira could not be asked.
        """
        if self._own_site is None:
            with jira_call("read the server's base URL"):
                base = (self.client.server_info() or {}).get("baseUrl")
            self._own_site = site_of(f"{base.rstrip('/')}/rest/") if isinstance(base, str) else ""
        return self._own_site or None

    def options_for(self, options: dict[str, Any] | None) -> JiraOptions:
        """The defaults overridden by a steering point's ``jira_*`` options."""
        return self.defaults.merged(options)

    # -- requests ---------------------------------------------------------------------------------------

    def open_request(self, view: RequestView) -> dict[str, Any] | None:
        """Create the issue (or reuse this run's open issue for the same point; or find the one an earlier
        attempt created when its answer was lost, by the request's label). Returns ``{"key":
        "jira:<issue id>", "issue_id", "issue_key", "url", "done_status", "rejected_status"}``. A request
        settled before it reached Jira gets no new issue (``{"skipped": …}``), but the issue an earlier attempt
        created (its answer lost: found by this run's point label and the request's label together, never
        another run's issue of the same request number) is adopted all the same, so that the outcome (delivered after this: the outbox
        keeps a run's messages to one channel in order) is commented on it and moves it.

        Raises:
            DeliveryError: Jira failed or is unreachable (the outbox retries; the request stays pending).
            PermanentDeliveryError: Jira refused the issue (unknown project or issue type, no permission).
        """
        opts = self.options_for(view.options)
        if view.request.status is not RequestStatus.PENDING:  # this run's point's issue that shows this request:
            # request ids start at 1 in every database, so another database's issue on the site (staging and
            # production, a database reset) carries the same request label, never this run's point label
            label, mine = point_label(view.run.id, view.point), request_label(view.request.id)
            with jira_call("search for the request's issue"):
                found = self.client.search_issues(f'labels = "{label}" AND labels = "{mine}" ORDER BY created DESC',
                                                  maxResults=1, fields="status,labels")
            if found:
                return self._ref(found[0], opts)
            return {"skipped": f"request was {view.request.status.value} before its issue was created"}
        body = render.description(view, opts, cloud=self.cloud, max_chars=self.max_chars,
                                  link=self.link_for(view.run.id) if self.link_for else None,
                                  identities=self.identities)
        label, mine = point_label(view.run.id, view.point), request_label(view.request.id)
        with jira_call("search for the run's issue"):
            found = self.client.search_issues(f'labels = "{label}" ORDER BY created DESC', maxResults=5,
                                              fields="status,labels")
        for issue in found:
            if mine in (getattr(issue.fields, "labels", None) or []):  # created by an attempt whose answer was
                # lost, maybe before its watchers were added (adding one again changes nothing in Jira)
                self._add_watchers(issue.id, tuple(render.jira_users_of(view.approvers, self.identities,
                                                                        cloud=self.cloud)))
                return self._ref(issue, opts)
            if issue.fields.status.name.casefold() not in opts.closed_statuses:
                with jira_call("update the issue"):
                    issue.update(fields={"description": body}, update={"labels": [{"add": mine}]})
                self.comment(issue.id, render.revised_comment(view), delivery=view.delivery, part="revised")
                return self._ref(issue, opts)
        fields: dict[str, Any] = {
            "project": {"key": view.request.channel.split(":", 1)[1]}, "issuetype": {"name": opts.issue_type},
            "summary": render.summary(view), "description": body, "labels": ["hazel", view.run.id, label, mine]}
        if opts.assignee:
            fields["assignee"] = {"accountId": opts.assignee} if self.cloud else {"name": opts.assignee}
        with jira_call("create issue"):
            issue = self.client.create_issue(fields=fields, prefetch=False)
        self._add_watchers(issue.id, tuple(render.jira_users_of(view.approvers, self.identities, cloud=self.cloud)))
        if found:  # the point's newest issue, closed (else reused above): say where the run asks now (s25 F3)
            try:
                self.comment(found[0].id, render.asked_again_comment(view, issue.key, found[0].fields.status.name), delivery=view.delivery,
                             part="asked-again")
            except DeliveryError as exc:  # (the new issue exists: raising would make the outbox create another)
                log.warning("issue %s: could not say that the run asks again on %s: %s", found[0].id, issue.key,
                            exc)
        return self._ref(issue, opts)

    def _ref(self, issue: Any, opts: JiraOptions) -> dict[str, Any]:
        """The request's ``message_ref`` for ``issue`` (``JIRA.create_issue`` / ``search_issues``' answer):
        with ``site``, the site its ``self`` URL names (``webhook.site_of``: the base URL Jira knows itself by,
        as its webhooks name it), so that a webhook from another site is not taken for this issue's."""
        ref = {"key": message_key(issue.id), "issue_id": str(issue.id), "issue_key": issue.key,
               "url": f"{self.client.server_url}/browse/{issue.key}", **opts.as_ref()}
        site = site_of(getattr(issue, "self", None))
        return {**ref, "site": site} if site else ref

    def _add_watchers(self, issue_id: str, people: tuple[str, ...]) -> None:
        """Add the approvers as watchers (``POST /rest/api/2/issue/{id}/watchers`` with the account id or
        user name as a JSON string). ``JIRA.add_watcher`` first searches users by name, which does not find
        Cloud account ids, hence the direct call through the client's session. The issue exists already, so
        a failure here is logged, not raised: raising would make the outbox create the issue again."""
        for person in people:
            try:
                with jira_call("add a watcher"):
                    self.client._session.post(self.client._get_url(f"issue/{issue_id}/watchers"),
                                              data=json.dumps(person))
            except DeliveryError as exc:
                log.warning("issue %s: could not add watcher %s: %s", issue_id, person, exc)

    def update_request(self, view: RequestView) -> None:
        """Comment the outcome (a quorum vote, the decision, a cancellation); after approval move the issue to
        the done status, after rejection to the rejected status. A vote (``view.vote``) is commented as it was
        counted and moves nothing, even when delivered after the request settled: the ``request.closed`` message
        queued after it says the outcome and moves the issue.

        Raises:
            DeliveryError, PermanentDeliveryError.
        """
        issue_id = issue_of(view.request)
        if issue_id is None:
            return  # never reached Jira: the issue, if still created, shows the request as it is then
        r, opts, note = view.request, self.options_for(view.options), None
        if r.status is RequestStatus.DECIDED and view.vote is None:
            if r.decided_action in APPROVED and not (r.decided_action == "edit" and r.approvals_required > 1):
                note = self.move(issue_id, opts.done_status)
            elif r.decided_action == "reject":
                note = self.move(issue_id, opts.rejected_status)
            elif r.approvals and opts.approve_status:  # sent back (feedback, a rewind, an edit asked again) after
                note = self.reopen(issue_id, opts, r)  # a quorum's vote left the issue in the approve status
        self.comment(issue_id, render.outcome_comment(view, note=note), delivery=view.delivery, part="outcome")

    def progress(self, view: ProgressView) -> None:
        """Comment the run's progress on the issue of its previous request (or, for how the run ended, of its
        latest request in Jira when it ended at a request on another channel); when the run completed (or ended
        rejected) move that issue to the done (rejected) status, unless that would undo the decision of the
        issue's own request (``contradicts``).

        Raises:
            DeliveryError, PermanentDeliveryError.
        """
        issue_id = issue_of(view.request)
        if issue_id is None:
            return  # the previous request never had an issue: nothing to comment on
        ref = view.request.message_ref or {}  # type: ignore[union-attr]
        target = {"completed": ref.get("done_status"), "rejected": ref.get("rejected_status")}.get(view.event)
        note = None if contradicts(view) else self.move(issue_id, target)
        self.comment(issue_id, render.progress_comment(view) + (f"\n\n{note}" if note else ""),
                     delivery=view.delivery, part="progress")

    def remind(self, view: RequestView) -> None:
        """Comment a reminder (or the escalation) on the request's issue, mentioning who may decide.

        Raises:
            DeliveryError: also while the issue is not created yet (retried after it is).
            PermanentDeliveryError: the request lives on another channel (an ``escalate_channel`` in Jira for a
                Slack or console request: the view does not say which project to create an issue in).
        """
        if view.request.status is not RequestStatus.PENDING:
            return
        issue_id = issue_of(view.request)
        if issue_id is None and not view.request.channel.startswith("jira:"):
            raise PermanentDeliveryError(
                f"request {view.request.id} was posted on {view.request.channel}, not in Jira: escalating it to a "
                "Jira project is not supported (escalate to the request's own channel or to Slack)")
        if issue_id is None:
            raise DeliveryError(f"request {view.request.id} has no Jira issue yet; the reminder waits for it")
        self.comment(issue_id, render.reminder_comment(view, cloud=self.cloud, identities=self.identities),
                     delivery=view.delivery, part="reminder")

    # -- issue operations (also used by the webhook to answer people) ----------------------------------

    def comment(self, issue_id: str, text: str, *, delivery: Delivery | None = None, part: str = "comment") -> None:
        """Add a comment as Hazel (``POST /rest/api/2/issue/{id}/comment``), ``text`` cut at Jira's limit
        (``render.FIELD_CHARS`` UTF-16 code units: ``render.cut_utf16``).

        With ``delivery`` (the outbox message it is for; ``part``: which of its comments) the comment carries the
        property ``COMMENT_PROPERTY`` naming them, and a retry (``delivery.attempt > 1``: an earlier attempt may
        have added it without Hazel learning so) first looks for it among the issue's newest comments
        (``LOOKUP_COMMENTS``) and adds nothing when it is there.

        Raises:
            DeliveryError, PermanentDeliveryError.
        """
        body = render.cut_utf16(text, render.FIELD_CHARS)  # (Jira counts UTF-16 code units: render.utf16_len)
        if delivery is None:
            with jira_call("add a comment"):
                self.client.add_comment(issue_id, body)
            return
        key = f"{delivery.key}/{part}"
        if delivery.attempt > 1 and self._commented(issue_id, key):
            log.info("issue %s: the comment an earlier attempt added is there; not adding it again", issue_id)
            return
        data = {"body": body, "properties": [{"key": COMMENT_PROPERTY, "value": {"key": key}}]}
        with jira_call("add a comment"):  # JIRA.add_comment sets no properties but Service Desk's own
            self.client._session.post(self.client._get_url(f"issue/{issue_id}/comment"), data=json.dumps(data))

    def _commented(self, issue_id: str, key: str) -> bool:
        """Whether one of the issue's newest comments carries ``COMMENT_PROPERTY`` ``key``
        (``GET /rest/api/2/issue/{id}/comment?expand=properties&orderBy=-created``).

        Raises:
            DeliveryError, PermanentDeliveryError.
        """
        with jira_call("list the issue's comments"):
            comments = self.client.comments(issue_id, expand="properties", order_by="-created",
                                            max_results=LOOKUP_COMMENTS)
        for comment in comments:
            for prop in (getattr(comment, "raw", None) or {}).get("properties") or ():
                if isinstance(prop, dict) and prop.get("key") == COMMENT_PROPERTY \
                        and isinstance(prop.get("value"), dict) and prop["value"].get("key") == key:
                    return True
        return False

    def move(self, issue_id: str, status: str | None) -> str | None:
        """Move the issue to ``status`` through as many transitions as its workflow needs (``walk``) unless
        it is there already (or ``status`` is None). Returns a note for people when Hazel could not (a
        workflow without a path there), None otherwise.

        Raises:
            DeliveryError, PermanentDeliveryError.
        """
        if not status:
            return None
        result = self.walk(issue_id, status)
        if result.reached:
            return None
        now = f" It is in *{result.status}* now." if not same_status(result.status, result.start) else ""
        return f"(Hazel could not move this issue to *{status}*: {result.reason}.{now})"

    def reopen(self, issue_id: str, opts: JiraOptions, request: SteeringRequest) -> str | None:
        """Move an issue a quorum's first votes left in the approve status back to an open status (of Jira's
        ``new`` category, such as *To Do*), its request having been sent back rather than approved: the board
        showed a version Approved that never was, and the point, asking again, opened a new issue beside it (a
        fresh-user finding, s30 F5). Returns the note the outcome comment ends with (None: it was elsewhere, or
        no path leads to an open status: it stays, and the point asks on a new issue).

        Raises:
            DeliveryError, PermanentDeliveryError.
        """
        result = walk(self.client, issue_id, "an open status", category="new", only_from=opts.approve_status,
                      avoid=[s for s in (opts.approve_status, opts.reject_status, opts.done_status,
                                         opts.rejected_status) if s])
        if not result.reached or not result.taken:
            return None
        return (f"(Hazel moved this issue back to *{result.status}*: this version got {request.approvals} of "
                f"{request.approvals_required} approvals and was not approved.)")

    def walk(self, issue_id: str, status: str, *, avoid: tuple[str | None, ...] = (),
             only_from: str | None = None) -> Walk:
        """Move the issue towards ``status`` (see ``integrations.jira.workflow.walk``; ``avoid``: statuses
        not to pass through on the way; ``only_from``: only while the issue is in that status) and say where
        it ended.

        Raises:
            DeliveryError, PermanentDeliveryError.
        """
        return walk(self.client, issue_id, status, avoid=[s for s in avoid if s], only_from=only_from)
