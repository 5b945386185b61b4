"""jira delivery keys: a Jira decision's delivery id names the site and the issue, not only the comment

Revision ID: 0005
Revises: 0004

A decision made from a Jira comment or transition was kept unique by ``comment:<id>`` / ``changelog:<id>`` /
``webhook:<id>``; comment and changelog ids are unique only within one Jira site, so the same comment id on
another issue or site was taken for a duplicate and decided nothing. Hazel now keys them
``<site>/issue/<issue id>/<kind>/<id>`` (``integrations.jira.webhook.delivery_key``; the unique key on
``(channel, delivery_id)`` is unchanged). Existing Jira decisions are rewritten to that form, so that Jira's
retries and edits of comments made before the upgrade still find their decision: the site and issue come from
the decision's steering request (``message_ref``: ``url`` = ``<JIRA_URL>/browse/<key>``, ``issue_id``). A
decision without such a request (a rewind of a request already settled carries none) keeps its old key, which
stays unique and valid. The downgrade turns keys back into ``<kind>:<id>`` where that is still unique.
"""
from __future__ import annotations

import hashlib
import re
from urllib.parse import urlsplit

from alembic import op
import sqlalchemy as sa

from store.schema import JSONDoc

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

_OLD = re.compile(r"(comment|changelog|webhook):(.+)", re.DOTALL)
_NEW = re.compile(r".+/issue/[^/]+/(comment|changelog|webhook)/(.+)", re.DOTALL)

decisions = sa.table('hazel_decisions', sa.column('id', sa.Integer), sa.column('request_id', sa.Integer),
                     sa.column('channel', sa.String), sa.column('delivery_id', sa.String))
requests = sa.table('hazel_steering_requests', sa.column('id', sa.Integer), sa.column('message_ref', JSONDoc))


def _site(url: object) -> str | None:
    """The site of ``<base URL>/browse/<key>`` as ``integrations.jira.webhook.site_of`` names it (frozen copy)."""
    if not isinstance(url, str):
        return None
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if port is not None and port != {"http": 80, "https": 443}[parts.scheme.lower()]:
        host += f":{port}"
    cut = parts.path.find("/browse/")
    return host + (parts.path[:cut] if cut >= 0 else "").rstrip("/")


def _key(site: str, issue_id: str, kind: str, ident: str) -> str:
    """``integrations.jira.webhook.delivery_key`` as of this revision (frozen copy)."""
    def short(text: str, limit: int) -> str:
        return text if len(text) <= limit else "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]

    return f"{short(site, 120)}/issue/{short(issue_id, 24)}/{kind}/{short(ident, 32)}"


def _rewrite(changes: list[dict[str, object]]) -> None:
    if changes:
        op.get_bind().execute(decisions.update().where(decisions.c.id == sa.bindparam('row_id'))
                              .values(delivery_id=sa.bindparam('new_key')), changes)


def upgrade() -> None:
    rows = op.get_bind().execute(
        sa.select(decisions.c.id, decisions.c.delivery_id, requests.c.message_ref)
        .select_from(decisions.join(requests, requests.c.id == decisions.c.request_id))
        .where(decisions.c.channel == 'jira', decisions.c.delivery_id.is_not(None))
        .order_by(decisions.c.id)).all()
    changes = []
    for row_id, delivery_id, ref in rows:
        old = _OLD.fullmatch(delivery_id)
        site = _site(ref.get("url")) if isinstance(ref, dict) else None
        issue_id = str(ref.get("issue_id") or "") if isinstance(ref, dict) else ""
        if old and site and issue_id:
            changes.append({"row_id": row_id, "new_key": _key(site, issue_id, old.group(1), old.group(2))})
    _rewrite(changes)


def downgrade() -> None:
    rows = op.get_bind().execute(
        sa.select(decisions.c.id, decisions.c.delivery_id)
        .where(decisions.c.channel == 'jira', decisions.c.delivery_id.is_not(None))
        .order_by(decisions.c.id)).all()
    taken = {delivery_id for _, delivery_id in rows if _OLD.fullmatch(delivery_id)}
    changes = []
    for row_id, delivery_id in rows:
        new = _NEW.fullmatch(delivery_id)
        old = f"{new.group(1)}:{new.group(2)}" if new else None
        if old and old not in taken:  # the first decision keeps the old key; later ones keep theirs
            taken.add(old)
            changes.append({"row_id": row_id, "new_key": old})
    _rewrite(changes)
