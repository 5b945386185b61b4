"""Jira's REST API v2, as the ``jira`` library calls it, faked at the HTTP boundary with ``responses``.

It keeps state like Jira does: issues (summary, description, labels, status, assignee), comments, watchers,
users and their groups; any status can be reached from any other by a transition named ``Go <status>``,
unless ``workflow`` says which transitions leave each status (a transition not available where the issue is
gets Jira's 400).
Calls can be made to fail (``fail``): an HTTP status with headers, or a network error. Every request is
recorded in ``calls`` as ``(method, path, query, json body)``.

Shapes follow Atlassian's REST API v2 reference: ``POST /issue`` answers ``201 {"id", "key", "self"}``,
``GET /issue/{id}/transitions`` answers ``{"transitions": [{"id", "name", "to": {"name", "id",
"statusCategory": {"key"}}}]}`` (categories ``new``, ``indeterminate``, ``done``), searches answer
``{"issues": [...]}`` (Cloud's ``/search/jql`` adds ``isLast``, Server's ``/search`` adds ``total``; the library
reads ``GET /field`` once before its first search), the user
resource with ``expand=groups`` carries ``groups.items[].name``.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

import requests
import responses

from integrations.jira import JiraChannel, JiraOptions, build_client

STATUSES = ("To Do", "In Progress", "Approved", "Rejected", "Done", "In Review")
CATEGORIES = {"To Do": "new", "Done": "done", "Rejected": "done"}
"""Status categories (``statusCategory.key``); other statuses are ``indeterminate``."""
HAZEL_CLOUD_ID = "557058:hazel-bot"
HAZEL_SERVER_NAME = "hazel-bot"


@dataclass
class Failure:
    method: str
    path: re.Pattern[str]
    times: int
    status: int = 503
    headers: dict[str, str] = field(default_factory=dict)
    exception: Exception | None = None
    after: bool = False


class FakeJira:
    """A Jira site at ``base`` (Cloud: people are account ids; Server: user names)."""

    def __init__(self, rsps: responses.RequestsMock, *, cloud: bool = True, base: str | None = None,
                 projects: tuple[str, ...] = ("MIG",), issue_types: tuple[str, ...] = ("Task", "Story"),
                 first_id: int = 10001) -> None:
        self.cloud = cloud
        self.base = base or ("https://example.atlassian.net" if cloud else "http://jira.example.invalid:8080")
        self.me = HAZEL_CLOUD_ID if cloud else HAZEL_SERVER_NAME
        self.projects = set(projects)
        self.issue_types = set(issue_types)
        self.issues: dict[str, dict[str, Any]] = {}
        self.comments: dict[str, list[dict[str, Any]]] = {}
        self.watchers: dict[str, list[str]] = {}
        self.groups: dict[str, list[str]] = {}
        self.calls: list[tuple[str, str, dict[str, list[str]], Any]] = []
        self.auth_headers: set[str] = set()
        self.failures: list[Failure] = []
        self.workflow: dict[str, list[tuple[str, str]]] | None = None
        """status -> [(transition name, to status)]; None: every status reachable from every other."""
        self._transition_ids: list[tuple[str, str]] = []
        self.performed: list[tuple[str, str]] = []
        """(issue id, transition name) of every transition made through the API, in order."""
        self._ids = itertools.count(first_id)
        self._comment_ids = itertools.count(20001)
        self._keys: dict[str, itertools.count] = {}
        self._lock = threading.RLock()
        api = re.compile(re.escape(self.base) + r"/rest/api/2/.*")
        for method in ("GET", "POST", "PUT", "DELETE"):
            rsps.add_callback(method, api, callback=self._dispatch)

    # -- for tests --------------------------------------------------------------------------------------

    def client_kwargs(self) -> dict[str, Any]:
        """Arguments of ``build_client`` for this site (secrets a test can look for in logs and errors)."""
        if self.cloud:
            return {"url": self.base, "cloud": True, "user": "hazel@example.invalid",
                    "api_token": "cloud-token-SECRET"}
        return {"url": self.base, "cloud": False, "pat": "server-pat-SECRET"}

    def channel(self, **defaults: Any) -> JiraChannel:
        client = build_client(**self.client_kwargs())
        return JiraChannel(client=client, cloud=self.cloud, defaults=JiraOptions(**defaults))

    def fail(self, method: str, path: str, *, times: int = 1, status: int = 503,
             headers: dict[str, str] | None = None, exception: Exception | None = None, after: bool = False) -> None:
        """Make the next ``times`` calls whose path matches ``path`` (a regex, searched) fail; with ``after``
        Jira does the work first and only the answer is lost (a gateway timeout after the fact)."""
        self.failures.append(Failure(method, re.compile(path), times, status, headers or {}, exception, after))

    def issue(self, ref: str) -> dict[str, Any]:
        """An issue by id or key."""
        with self._lock:
            if ref in self.issues:
                return self.issues[ref]
            return next(i for i in self.issues.values() if i["key"] == ref)

    def status(self, ref: str) -> str:
        return self.issue(ref)["fields"]["status"]["name"]

    def set_status(self, ref: str, status: str) -> str:
        """A person moves the issue (returns the previous status)."""
        issue = self.issue(ref)
        before = issue["fields"]["status"]["name"]
        issue["fields"]["status"] = {"name": status, "id": self._status_id(status),
                                     "statusCategory": {"key": CATEGORIES.get(status, "indeterminate")}}
        return before

    def delete(self, ref: str) -> dict[str, Any]:
        """A person deletes the issue (it is no longer found, read or searched); returns it as it was."""
        with self._lock:
            issue = self.issue(ref)
            del self.issues[issue["id"]]
            self.comments.pop(issue["id"], None)
            return issue

    def bodies(self, ref: str) -> list[str]:
        return [c["body"] for c in self.comments.get(self.issue(ref)["id"], [])]

    def transitions_made(self, ref: str) -> list[str]:
        """The names of the transitions performed on an issue (by Hazel: people's moves are ``set_status``)."""
        issue_id = self.issue(ref)["id"]
        return [name for i, name in self.performed if i == issue_id]

    def count(self, method: str, path: str) -> int:
        return sum(1 for m, p, _, _ in self.calls if m == method and re.search(path, p))

    # -- the API ------------------------------------------------------------------------------------------

    def _dispatch(self, request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        url = urlparse(request.url)
        path = url.path.removeprefix("/rest/api/2")
        query = parse_qs(url.query)
        body = json.loads(request.body) if request.body else None
        with self._lock:
            self.calls.append((request.method, path, query, body))
            if request.headers.get("Authorization"):
                self.auth_headers.add(request.headers["Authorization"])
            for failure in self.failures:
                if failure.times > 0 and failure.method == request.method and failure.path.search(path):
                    failure.times -= 1
                    if failure.after:
                        self._route(request.method, path, query, body)
                    if failure.exception is not None:
                        raise failure.exception
                    return failure.status, failure.headers, json.dumps({"errorMessages": ["injected failure"]})
            return self._route(request.method, path, query, body)

    def _route(self, method: str, path: str, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        routes = [
            ("POST", r"/issue", self._create), ("GET", r"/search(/jql)?", self._search),
            ("GET", r"/issue/([^/]+)", self._get), ("PUT", r"/issue/([^/]+)", self._update),
            ("POST", r"/issue/([^/]+)/comment", self._comment),
            ("GET", r"/issue/([^/]+)/comment", self._comments),
            ("GET", r"/issue/([^/]+)/transitions", self._transitions),
            ("POST", r"/issue/([^/]+)/transitions", self._transition),
            ("POST", r"/issue/([^/]+)/watchers", self._watch), ("GET", r"/myself", self._myself),
            ("GET", r"/user", self._user), ("GET", r"/field", self._fields),
            ("GET", r"/serverInfo", self._server_info),
        ]
        for m, pattern, handler in routes:
            match = re.fullmatch(pattern, path)
            if m == method and match:
                return handler(*match.groups(), query=query, body=body)
        return 404, {}, json.dumps({"errorMessages": [f"no fake for {method} {path}"]})

    @staticmethod
    def _json(status: int, data: Any) -> tuple[int, dict[str, str], str]:
        return status, {"Content-Type": "application/json"}, json.dumps(data) if data is not None else ""

    def _view(self, issue: dict[str, Any]) -> dict[str, Any]:
        return {"id": issue["id"], "key": issue["key"], "self": f"{self.base}/rest/api/2/issue/{issue['id']}",
                "fields": issue["fields"]}

    def _create(self, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        fields = body["fields"]
        project = fields["project"]["key"]
        if project not in self.projects:
            return self._json(400, {"errorMessages": [], "errors": {"project": "valid project is required"}})
        if fields["issuetype"]["name"] not in self.issue_types:
            return self._json(400, {"errorMessages": [], "errors": {"issuetype": "Specify a valid issue type"}})
        issue_id = str(next(self._ids))
        key = f"{project}-{next(self._keys.setdefault(project, itertools.count(1)))}"
        status = {"name": "To Do", "id": "1"}
        self.issues[issue_id] = {"id": issue_id, "key": key, "fields": {**fields, "status": status}}
        self.comments[issue_id] = []
        return self._json(201, {"id": issue_id, "key": key, "self": f"{self.base}/rest/api/2/issue/{issue_id}"})

    def _search(self, *_: Any, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        wanted = re.findall(r'labels = "([^"]+)"', query["jql"][0])
        found = [self._view(i) for i in sorted(self.issues.values(), key=lambda i: -int(i["id"]))
                 if all(w in i["fields"].get("labels", []) for w in wanted)]
        if self.cloud:
            return self._json(200, {"issues": found, "isLast": True})
        return self._json(200, {"startAt": 0, "maxResults": 50, "total": len(found), "issues": found})

    def _get(self, ref: str, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        try:
            return self._json(200, self._view(self.issue(ref)))
        except StopIteration:
            return self._json(404, {"errorMessages": ["Issue does not exist or you do not have permission"]})

    def _update(self, ref: str, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        issue = self.issue(ref)
        issue["fields"].update(body.get("fields") or {})
        for op in (body.get("update") or {}).get("labels", []):
            issue["fields"].setdefault("labels", []).append(op["add"])
        return self._json(204, None)

    def _comment(self, ref: str, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        issue = self.issue(ref)
        comment = {"id": str(next(self._comment_ids)), "body": body["body"],
                   "author": {"accountId": self.me} if self.cloud else {"name": self.me},
                   "properties": list(body.get("properties") or [])}
        self.comments[issue["id"]].append(comment)
        return self._json(201, {k: v for k, v in comment.items() if k != "properties"})

    def _comments(self, ref: str, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        """``GET /issue/{id}/comment`` (``orderBy``, ``startAt``, ``maxResults``; comment properties only with
        ``expand=properties``)."""
        found = list(self.comments.get(self.issue(ref)["id"], []))
        if (query.get("orderBy") or [""])[0] == "-created":
            found.reverse()
        start, limit = int((query.get("startAt") or ["0"])[0]), int((query.get("maxResults") or ["50"])[0])
        expand = "properties" in (query.get("expand") or [""])[0].split(",")
        page = [c if expand else {k: v for k, v in c.items() if k != "properties"} for c in found[start:start + limit]]
        return self._json(200, {"startAt": start, "maxResults": limit, "total": len(found), "comments": page})

    def _status_id(self, status: str) -> str:
        """Statuses of ``STATUSES`` are numbered 1…; others (a test's own workflow) from 101."""
        if status in STATUSES:
            return str(STATUSES.index(status) + 1)
        return str(101 + sorted({to for ts in (self.workflow or {}).values() for _, to in ts}
                                | set(self.workflow or {}) | {status}).index(status))

    def _available(self, status: str) -> list[tuple[str, str, str]]:
        """(transition id, name, to status) of the transitions out of ``status``."""
        if self.workflow is None:
            return [(str(11 + i), f"Go {s}", s) for i, s in enumerate(STATUSES) if s != status]
        out = []
        for name, to in self.workflow.get(status, []):
            if (name, to) not in self._transition_ids:
                self._transition_ids.append((name, to))
            out.append((str(100 + self._transition_ids.index((name, to))), name, to))
        return out

    def _transitions(self, ref: str, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        return self._json(200, {"transitions": [
            {"id": tid, "name": name, "to": {"name": to, "id": self._status_id(to),
                                             "statusCategory": {"key": CATEGORIES.get(to, "indeterminate")}}}
            for tid, name, to in self._available(self.status(ref))]})

    def _transition(self, ref: str, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        wanted = str(body["transition"]["id"])
        found = next(((name, to) for tid, name, to in self._available(self.status(ref)) if tid == wanted), None)
        if found is None:
            return self._json(400, {"errorMessages": [
                f"It seems that you have tried to perform a workflow operation ({wanted}) that is not valid for "
                "the current state of this issue."], "errors": {}})
        self.performed.append((self.issue(ref)["id"], found[0]))
        self.set_status(ref, found[1])
        return self._json(204, None)

    def _watch(self, ref: str, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        self.watchers.setdefault(self.issue(ref)["id"], []).append(body)
        return self._json(204, None)

    def _fields(self, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        """``GET /field``: the library reads it once to translate JQL field names in searches."""
        return self._json(200, [{"id": f, "name": f.capitalize(), "custom": False, "clauseNames": [f]}
                                for f in ("summary", "description", "status", "labels", "assignee")])

    def _server_info(self, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        """``GET /rest/api/2/serverInfo``: ``baseUrl`` is the URL Jira knows itself by (its ``self`` URLs')."""
        return self._json(200, {"baseUrl": self.base, "deploymentType": "Cloud" if self.cloud else "Server",
                                "version": "1001.0.0-SNAPSHOT" if self.cloud else "9.12.0"})

    def _myself(self, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        me = {"accountId": self.me} if self.cloud else {"name": self.me, "key": self.me}
        return self._json(200, {**me, "displayName": "Hazel", "self": f"{self.base}/rest/api/2/user"})

    def _user(self, *, query: dict, body: Any) -> tuple[int, dict[str, str], str]:
        who = (query.get("accountId") or query.get("username") or [""])[0]
        if who not in self.groups:
            return self._json(404, {"errorMessages": [f"user {who} does not exist"]})
        param = "accountId" if self.cloud else "username"
        return self._json(200, {"self": f"{self.base}/rest/api/2/user?{param}={who}", param: who,
                                "groups": {"size": len(self.groups[who]),
                                           "items": [{"name": g} for g in self.groups[who]]}})
