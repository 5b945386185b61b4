"""Deleting and copying a thread's checkpoints (``HazelSaver``'s ``delete_thread``, ``delete_for_runs``,
``copy_thread``, ``prune``): a checkpoint kept that was stored as a change of one deleted is first rewritten as
a snapshot, so that every checkpoint left reads back whole."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from hazel.langgraph import encoding
from store.lgraph import Key, LangGraphRepo, StoredRow, no_nul

PRUNE_STRATEGIES = ("keep_latest", "delete")


class Deleting:
    """The deleting half of ``HazelSaver`` (a mixin: it uses the saver's ``_write``, ``_forget``, ``policy`` and
    ``serde``)."""


    def delete_thread(self, thread_id: str) -> None:
        """Every checkpoint and write of the thread, in every namespace.

        Raises:
            RunStateError: the thread is a Hazel run that has not ended (ready, running or waiting): its next
                step would start from an empty thread. Cancel the run first (``hazel cancel RUN``).
        """
        thread_id = no_nul("thread_id", str(thread_id))
        with self._write() as tx:
            _refuse_live_runs(tx, [thread_id])
            LangGraphRepo(tx.conn, tx.dialect).delete_threads([thread_id])
        self._forget([thread_id])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Every checkpoint whose metadata's ``run_id`` is one of ``run_ids``, with its writes, in one
        transaction. A checkpoint kept that was stored as a change of one deleted is rewritten as a snapshot
        first, and a checkpoint whose parent is deleted is left with no parent."""
        run_ids = [no_nul("run_id", str(r)) for r in run_ids]
        if not run_ids:
            return
        with self._write() as tx:
            repo = LangGraphRepo(tx.conn, tx.dialect)
            doomed = repo.keys_of_runs(run_ids)
            self._drop(repo, doomed)
        self._forget(sorted({k[0] for k in doomed}))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Every checkpoint and write of ``source_thread_id`` again under ``target_thread_id`` (rows the target
        already holds under the same checkpoint id are kept). Nothing happens when the source has none.

        Raises:
            RunStateError: ``target_thread_id`` is a Hazel run's thread (its id), ended or not: the run's graph
                history would hold another thread's checkpoints, and its next step or rewind could start from
                one of them. Copy into a new thread id.
        """
        source, target = no_nul("thread_id", str(source_thread_id)), no_nul("thread_id", str(target_thread_id))
        with self._write() as tx:
            _refuse_run_target(tx, target)
            LangGraphRepo(tx.conn, tx.dialect).copy_thread(source, target)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: keep each namespace's newest checkpoint of each thread (with its writes, rewritten
        as a snapshot with no parent when it was a change), delete the rest; ``"delete"``: delete everything of
        the threads. One transaction.

        Raises:
            TypeError: ``thread_ids`` is a single string.
            ValueError: unknown ``strategy``.
            RunStateError: a thread that is a Hazel run that has not ended (either strategy: ``"delete"`` would
                start its next step from nothing, ``"keep_latest"`` leave its rewind targets without a graph).
        """
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
        if strategy not in PRUNE_STRATEGIES:
            raise ValueError(f"Unknown prune strategy: {strategy!r}")
        ids = [no_nul("thread_id", str(t)) for t in thread_ids]
        if not ids:
            return
        with self._write() as tx:
            repo = LangGraphRepo(tx.conn, tx.dialect)
            _refuse_live_runs(tx, ids)  # ("keep_latest" too: the run's rewind targets would lose their graph)
            if strategy == "delete":
                repo.delete_threads(ids)
            else:
                keys = repo.keys_of_threads(ids)  # oldest first within each (thread, namespace)
                latest = {k[:2]: k for k in keys}
                self._drop(repo, [k for k in keys if latest[k[:2]] != k])
        self._forget(ids)

    def _drop(self, repo: LangGraphRepo, doomed: Sequence[Key]) -> None:
        """Delete checkpoints ``doomed`` after rewriting as snapshots, without a parent, the checkpoints kept
        that hang on them (``LangGraphRepo.drop``)."""
        repo.drop(doomed, self.snapshots)

    def _snapshot_children(self, repo: LangGraphRepo, parents: Sequence[Key], *, skip: set[Key] = frozenset(),
                           orphan: bool = False) -> None:
        """Rewrite as snapshots the delta rows stored as changes of ``parents`` (but ``skip``)."""
        repo.snapshot_children(parents, self.snapshots, skip=skip, orphan=orphan)

    def snapshots(self, rows: Mapping[Key, StoredRow], keys: Sequence[Key]) -> dict[Key, dict[str, Any]]:
        """The stored columns of each of ``keys`` rewritten as a standalone snapshot (``store.lgraph.Snapshots``:
        ``rows`` hold them and their ancestors back to their snapshots), decoded and encoded with this saver's
        serializer. Retention (``hazel prune``) uses it to compact an ended run's graph history.

        Raises:
            ValueError: an ancestor a key needs is missing from ``rows``.
        """
        positions = encoding.decode_many(rows, list(keys), self.serde)
        out: dict[Key, dict[str, Any]] = {}
        for key in keys:
            p = positions[key]
            enc, _ = encoding.snapshot(key[2], p.tree, p.values, p.extras, self.serde)
            out[key] = enc.columns()
        return out

    # -- async ---------------------------------------------------------------------------------------------

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _refuse_live_runs(tx: Any, thread_ids: Sequence[str]) -> None:
    """Raise ``RunStateError`` when a thread of ``thread_ids`` is a Hazel run (its id) that is ready, running
    or waiting (one primary-key read per thread; a thread that is no Hazel run is LangGraph's alone)."""
    from bot.engine.errors import RunStateError
    from store.models import RunStatus

    for thread_id in thread_ids:
        run = tx.runs.get(thread_id)
        if run is not None and run.status in (RunStatus.READY, RunStatus.RUNNING, RunStatus.WAITING):
            raise RunStateError(f"run {thread_id} is {run.status.value}: deleting or pruning its thread would leave "
                                f"its next step or its rewinds without their graph; cancel it first (hazel cancel "
                                f"{thread_id}), or let it end (hazel prune keeps what an ended run needs)")


def _refuse_run_target(tx: Any, thread_id: str) -> None:
    """Raise ``RunStateError`` when ``thread_id`` is a Hazel run's (one primary-key read)."""
    from bot.engine.errors import RunStateError

    run = tx.runs.get(thread_id)
    if run is not None:
        raise RunStateError(f"thread {thread_id} is the graph thread of Hazel run {thread_id} ({run.status.value}): "
                            f"copying another thread into it would mix that thread's checkpoints into the run's "
                            f"history; copy into a new thread id")
