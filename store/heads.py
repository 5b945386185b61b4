"""The checkpoints this process committed last, one per run, kept in memory for the decision that reads them.

A run pauses at a steering point in one transaction (its checkpoint and the request); the decision that
answers it loads that checkpoint's state again (a chain query: its snapshot plus patches, decompressed and
decoded). When the same process takes the decision (one ``hazel serve`` with its in-process workers, an
application embedding Hazel, the bench's in-process rows; not a CLI command, a new process each), the state
it wrote is still at hand:
``HeadCache.get`` returns it and the decision skips that query. A checkpoint never changes once committed
(``(run_id, seq)`` is its key; a rewind or a migration writes a new one), so an entry is right for as long as
that checkpoint exists, whatever other processes do; only what this process's own transactions committed
is put (``Store.transaction`` publishes after its commit: a rolled-back write is never seen), and it is
used only for the checkpoint a run's pending request waits at (``bot.engine.steering.decide``), which
nothing deletes while the request is pending (``hazel prune`` takes only ended runs).

With the checkpoint, the process that paused the run keeps what it knows of the run and of the request it
asked (``pause``; PostgreSQL, a run asked at one steering point): the run as its pause stored it, the request as
inserted, and the id the decisions' sequence gave for the first decision on it. A decision here takes them
(``take_waiting``, once) instead of reading the run, the request and an id: it sends its writes at once, the
first of which locks the run and fails unless the run is still as known (``store.runs.RunRepo.lock_as_known``),
and its vote or settlement fails unless the request is still pending as known. Nothing it was told is trusted
beyond what those statements check; whatever they find changed, the decision is taken again from the database.

The trees are shared, never copied: the engine treats a state tree as immutable (every change builds a new
one: ``store.delta.apply`` in place is only used on a freshly decoded tree). Bounded: at most
``max_entries`` runs and ``max_bytes`` of stored (compressed) payload, the least recently written dropped
first; a state above ``max_entry_bytes`` stored is not kept at all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from store.checkpoints import ChainPosition, NewCheckpoint
    from store.models import LoadedCheckpoint, Run, SteeringRequest

WAITING_BYTES = 2048
"""What a run's waiting facts (``HeadCache.pause``: a run and a request) count against ``max_bytes``."""


class HeadCache:
    """Thread-safe; one per ``Store``.

    Args:
        max_entries: runs kept (default 4,096).
        max_bytes: stored bytes (the snapshot and patches a load would read) kept in all (default 4 MiB; 0 keeps
            nothing).
        max_entry_bytes: a checkpoint stored in more bytes than this is not kept (default 64 KiB).
    """

    def __init__(self, *, max_entries: int = 4096, max_bytes: int = 4 << 20,
                 max_entry_bytes: int = 64 << 10) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self._entries: OrderedDict[str, tuple[int, NewCheckpoint, ChainPosition, int, int]] = OrderedDict()
        self._waiting: dict[str, tuple[Run, SteeringRequest, int]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        """Checkpoints ``get`` returned (for tests and the bench's profile)."""
        self.taken = 0
        """Waiting runs ``take_waiting`` gave (for tests and the bench's profile)."""

    def put(self, cp: NewCheckpoint, position: ChainPosition, stored_bytes: int) -> None:
        """Keep checkpoint ``cp`` (committed, state ``position.tree``, its own payload ``stored_bytes`` long) as
        its run's latest, replacing the one kept before."""
        weight = position.base_bytes + position.delta_bytes
        with self._lock:
            self._drop(cp.run_id)
            if weight > self.max_entry_bytes or self.max_entries <= 0 or self.max_bytes <= 0:
                return
            self._entries[cp.run_id] = (cp.seq, cp, position, stored_bytes, weight)
            self._bytes += weight
            self._trim()

    def pause(self, run: Run, request: SteeringRequest, decision_id: int) -> None:
        """Keep, beside the checkpoint kept for ``run`` (the one ``request`` waits at; else nothing is kept),
        the run as its pause committed it (``waiting``), the pending ``request`` as inserted and
        ``decision_id``, an id of the decisions' sequence for the first decision on it."""
        with self._lock:
            entry = self._entries.get(run.id)
            if entry is None or entry[0] != request.checkpoint_seq or run.id in self._waiting:
                return
            self._waiting[run.id] = (run, request, decision_id)
            self._entries[run.id] = (*entry[:4], entry[4] + WAITING_BYTES)
            self._bytes += WAITING_BYTES
            self._trim()

    def take_waiting(self, run_id: str) -> tuple[Run, SteeringRequest, LoadedCheckpoint, int] | None:
        """What ``pause`` kept for ``run_id``, with the checkpoint its request waits at, given once (forgotten
        here: whatever happens next, the run is no longer as kept); None when nothing is kept."""
        with self._lock:
            waiting = self._waiting.pop(run_id, None)
            entry = self._entries.get(run_id)
            if waiting is None or entry is None:
                return None
            self._entries[run_id] = (*entry[:4], entry[4] - WAITING_BYTES)
            self._bytes -= WAITING_BYTES
            _, cp, position, stored_bytes, _ = entry
            self.taken += 1
        run, request, decision_id = waiting
        return run, request, _loaded(cp, position, stored_bytes), decision_id

    def _trim(self) -> None:
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            run_id, (*_, dropped) = self._entries.popitem(last=False)
            self._bytes -= dropped
            self._waiting.pop(run_id, None)

    def held(self, run_id: str) -> int | None:
        """The seq of the checkpoint kept for ``run_id``, or None."""
        with self._lock:
            entry = self._entries.get(run_id)
        return entry[0] if entry is not None else None

    def get(self, run_id: str, seq: int) -> LoadedCheckpoint | None:
        """Checkpoint ``seq`` of ``run_id`` as ``CheckpointRepo.load`` returns it, when it is the one kept for
        the run; None otherwise (then load it)."""
        with self._lock:
            entry = self._entries.get(run_id)
        if entry is None or entry[0] != seq:
            return None
        _, cp, position, stored_bytes, _ = entry
        self.hits += 1
        return _loaded(cp, position, stored_bytes)

    def drop(self, run_id: str) -> None:
        """Forget ``run_id``'s entry (nothing when there is none)."""
        with self._lock:
            self._drop(run_id)

    def __len__(self) -> int:
        return len(self._entries)

    def _drop(self, run_id: str) -> None:
        entry = self._entries.pop(run_id, None)
        if entry is not None:
            self._bytes -= entry[-1]
        self._waiting.pop(run_id, None)


def _loaded(cp: NewCheckpoint, position: ChainPosition, stored_bytes: int) -> LoadedCheckpoint:
    from store.models import CheckpointInfo, LoadedCheckpoint

    info = CheckpointInfo(run_id=cp.run_id, seq=cp.seq, parent_seq=cp.parent_seq, branch=cp.branch, step=cp.step,
                          next_step=cp.next_step, workflow_version=cp.workflow_version, created_at=cp.created_at,
                          is_snapshot=position.chain_len == 0, stored_bytes=stored_bytes,
                          decision_id=cp.decision_id, handoff=cp.handoff)
    return LoadedCheckpoint(info=info, tree=position.tree, base_seq=position.base_seq, chain_len=position.chain_len,
                            delta_bytes=position.delta_bytes, rows_read=0, base_bytes=position.base_bytes)


def published(written: dict[str, Any], cache: HeadCache, *, paused: dict[str, Any] | None = None,
              opened: dict[str, Any] | None = None) -> None:
    """Put what a committed transaction wrote (``Tx.written``: run id -> (checkpoint, position, bytes)), and
    what it knew of the runs it left waiting (``Tx.paused``: run id -> run; ``Tx.opened``: run id -> (request,
    decision id), or None for a run asked more than once)."""
    for cp, position, stored_bytes in written.values():
        cache.put(cp, position, stored_bytes)
    for run_id, run in (paused or {}).items():
        asked = (opened or {}).get(run_id)
        if asked is not None:
            cache.pause(run, *asked)
