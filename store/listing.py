"""Query shapes whose cost follows what they return, not the size of the tables (``RunRepo.list`` and
``RunRepo.find_by_prefix``).

- Runs newest first: one index range per status (``ix_hazel_runs_status_created_at_id``, or
  ``ix_hazel_runs_workflow_status_created_at_id`` with a workflow), each read in index order for its first
  ``limit + offset`` rows (running runs, which those indexes leave out, through ``ix_hazel_runs_status_wake_at``
  and sorted: as many as there are runs in flight), merged by ``UNION ALL`` and ordered again (created_at, then
  id): the same rows and order as one ``ORDER BY created_at DESC, id`` over the whole table, without reading or
  sorting the rest. With no filter at all, ``ix_hazel_runs_created_at_id`` alone.
- A run id prefix: a range of the primary key, ``id >= prefix AND id < next`` (``next``: the prefix with its
  last character incremented), instead of ``LIKE 'prefix%'``, which no index serves (SQLite's LIKE ignores
  ASCII case, PostgreSQL's collation may not be C). The LIKE stays as a filter on the rows the range returns.
"""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import Integer, bindparam, func, literal_column, select, union_all
from sqlalchemy.sql import Select

from store.models import RunStatus
from store.schema import LISTED, runs

ALL_STATUSES = tuple(s.value for s in RunStatus)
"""Every status a run row can hold (``Run.status`` is a ``RunStatus``): a workflow's listing unions them."""

_MAX_CHAR = chr(0x10FFFF)
_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def run_list_params(statuses: list[str] | None, workflow: str | None, limit: int, offset: int
                    ) -> tuple[tuple[tuple[str, ...] | None, bool], dict] | None:
    """The statement shape (``run_list_statement``'s arguments but ``newest_first``) and its parameters; None
    when no run can match (statuses asked for, none of them a run's status)."""
    wanted = None
    if statuses:
        wanted = tuple(sorted({v for v in (getattr(s, "value", s) for s in statuses) if v in ALL_STATUSES}))
        if not wanted:
            return None
    elif workflow:
        wanted = ALL_STATUSES
    params: dict = {"limit": limit, "offset": offset, "head": limit + offset}
    if workflow:
        params["workflow"] = workflow
    return (wanted, bool(workflow)), params


@lru_cache(maxsize=256)
def run_list_statement(statuses: tuple[str, ...] | None, by_workflow: bool, newest_first: bool) -> Select:
    """``SELECT`` of runs in ``statuses`` (None: any), of workflow ``:workflow`` when ``by_workflow``, ordered
    by ``created_at`` (descending when ``newest_first``) then ``id``, rows ``:offset`` to ``:offset + :limit``
    (``:head`` = ``:limit + :offset``). Built once per shape.

    The statuses (``RunStatus`` values, nothing else is accepted) and the limits are written into the SQL: a
    plan cached for parameters would estimate every status alike and a tenth of each branch read, and
    PostgreSQL, finding such a generic plan too costly on a big table, would plan the statement again at every
    execution (half a millisecond for seven branches); with them in the text, its cached plan fits."""
    if statuses is not None and any(s not in ALL_STATUSES for s in statuses):
        raise ValueError(f"unknown run status in {statuses!r}")

    def ordered(columns, *, by_index: bool = True):  # noqa: ANN001, ANN202
        created = columns.created_at if by_index else func.coalesce(columns.created_at, columns.created_at)
        return (created.desc() if newest_first else created.asc()), columns.id

    def branch(status: str | None) -> Select:
        stmt = select(runs)
        running = status == RunStatus.RUNNING.value
        if status is not None:
            stmt = stmt.where(runs.c.status == literal_column(f"'{status}'"))
            if not running:  # on the listing indexes, which say so (``store.schema.LISTED``)
                stmt = stmt.where(literal_column(LISTED))
        if by_workflow:
            stmt = stmt.where(runs.c.workflow == bindparam("workflow"))
        # running runs are in no listing index: read by status (``ix_hazel_runs_status_wake_at``) and sorted,
        # ordered by an expression no index gives, else SQLite walks every run in ``created_at`` order for them
        return stmt.order_by(*ordered(runs.c, by_index=not running))

    if not statuses or len(statuses) == 1:
        stmt = branch(statuses[0] if statuses else None)
    else:
        heads = [branch(s).limit(bindparam("head", type_=Integer, literal_execute=True)).subquery(f"s{i}")
                 for i, s in enumerate(statuses)]
        merged = union_all(*(select(*head.c) for head in heads)).subquery("merged")
        stmt = select(merged).order_by(*ordered(merged.c))
    return stmt.limit(bindparam("limit", type_=Integer, literal_execute=True)).offset(
        bindparam("offset", type_=Integer, literal_execute=True))


def prefix_range(prefix: str, *, fold_ascii_case: bool) -> tuple[str, str | None]:
    """``(low, high)``: every string that starts with ``prefix`` is ``>= low`` and ``< high`` (None: no upper
    bound), in code point order (SQLite's BINARY, PostgreSQL's C collation). ``fold_ascii_case``: ``prefix``
    in ASCII lowercase first (SQLite's LIKE matches either case; run ids are lowercase hex)."""
    low = prefix.translate(_ASCII_FOLD) if fold_ascii_case else prefix
    stem = low.rstrip(_MAX_CHAR)
    if not stem:
        return low, None
    following = ord(stem[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates are no characters of a stored string
        following = 0xE000
    return low, stem[:-1] + chr(following)


def prefix_statement(prefix: str, *, fold_ascii_case: bool) -> Select:
    """``SELECT id`` of the runs whose id starts with ``prefix`` (as ``LIKE 'prefix%'`` with ``%`` and ``_``
    taken literally), by id, ``:limit`` of them: the range of ``prefix_range`` on the primary key, the LIKE a
    filter on the rows in it. The bounds and the pattern are written into the SQL: a plan cached for
    parameters knows no range, and PostgreSQL would plan it again at every execution on a big table anyway."""
    low, high = prefix_range(prefix, fold_ascii_case=fold_ascii_case)
    pattern = prefix.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"
    cond = (runs.c.id >= bindparam("low", low, literal_execute=True)) & runs.c.id.like(
        bindparam("pattern", pattern, literal_execute=True), escape="/")
    if high is not None:
        cond &= runs.c.id < bindparam("high", high, literal_execute=True)
    return select(runs.c.id).where(cond).order_by(runs.c.id).limit(bindparam("limit"))


def literal_limit(n: int):  # noqa: ANN201
    """``n`` for ``Select.limit`` written into the SQL (as ``run_list_statement`` does, for the same reason:
    a plan cached for a parameter assumes a tenth of the rows)."""
    return bindparam("literal_limit", int(n), type_=Integer, literal_execute=True)
