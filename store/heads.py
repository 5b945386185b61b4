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
    from store.models import LoadedCheckpoint


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
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        """Checkpoints ``get`` returned (for tests and the bench's profile)."""

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
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, (*_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

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


def _loaded(cp: NewCheckpoint, position: ChainPosition, stored_bytes: int) -> LoadedCheckpoint:
    from store.models import CheckpointInfo, LoadedCheckpoint

    info = CheckpointInfo(run_id=cp.run_id, seq=cp.seq, parent_seq=cp.parent_seq, branch=cp.branch, step=cp.step,
                          next_step=cp.next_step, workflow_version=cp.workflow_version, created_at=cp.created_at,
                          is_snapshot=position.chain_len == 0, stored_bytes=stored_bytes,
                          decision_id=cp.decision_id, handoff=cp.handoff)
    return LoadedCheckpoint(info=info, tree=position.tree, base_seq=position.base_seq, chain_len=position.chain_len,
                            delta_bytes=position.delta_bytes, rows_read=0, base_bytes=position.base_bytes)


def published(written: dict[str, Any], cache: HeadCache) -> None:
    """Put what a committed transaction wrote (``Tx.written``: run id -> (checkpoint, position, bytes))."""
    for cp, position, stored_bytes in written.values():
        cache.put(cp, position, stored_bytes)
