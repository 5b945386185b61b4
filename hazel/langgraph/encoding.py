"""A LangGraph checkpoint <-> a row of ``hazel_lg_checkpoints``: a full snapshot, or what changed since its parent.

A checkpoint is split in two:

- its *tree*: ``v``, ``ts``, ``channel_versions``, ``versions_seen`` and ``updated_channels``, a JSON tree stored
  as Hazel stores a run's state (``store.codec``): whole in a snapshot, else as the RFC 6902 patch
  (``store.delta``) that turns the parent's tree into it. LangGraph keeps a version for every channel ever
  written and, per node, the versions it saw: in a 500-node graph these are 80 KB by the last step, of which a
  step changes three entries (about 250 bytes of patch);
- its *channel values*, serialized by the saver's serde (LangGraph's ``JsonPlusSerializer`` by default): whole
  in a snapshot, else only the channels whose value differs from the parent's: a list that grew by appending
  (``operator.add``, ``add_messages`` adding messages) stores the appended items, a string that grew stores its
  new end, any other changed value is stored whole, a channel gone is named.

A snapshot is written when the chain of changes since the last one would exceed ``SnapshotPolicy.max_chain``
rows, or when their bytes would reach ``delta_ratio`` times the snapshot's (Hazel's own policy,
``store.checkpoints``): with a state that grows every step, snapshots come geometrically further apart, so the
bytes per checkpoint follow the change, not the state.

What the diff assumes, as LangGraph does: a value handed to ``put`` is not changed in place afterwards (a list
is copied before it is kept as the next checkpoint's base, its items are not).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, repeat
from operator import ne
from typing import Any, Mapping

from langgraph.checkpoint.serde.base import SerializerProtocol

from store import codec, delta
from store.checkpoints import SnapshotPolicy
from store.lgraph import StoredRow

TREE_KEYS = ("v", "ts", "channel_versions", "versions_seen", "updated_channels")
"""The checkpoint's fields kept in the JSON tree; any other field (but ``id`` and ``channel_values``) goes to the
serialized part with the values."""
_NESTED = ("channel_versions", "versions_seen")
_MISSING = object()


@dataclass(frozen=True)
class Position:
    """A decoded checkpoint and where it sits in its snapshot chain: the base of the next checkpoint's delta.

    ``tree``: the JSON tree (``TREE_KEYS``); ``values``: channel name -> value (lists are the saver's own
    copies); ``extras``: the checkpoint's other fields; ``chain_len``: changes since the snapshot (0: it is
    one); ``base_bytes``: bytes of that snapshot row; ``delta_bytes``: bytes of the changes since it; ``stamp``:
    the row's stamp as read or written (``store.schema``: a change of this position is stored only while the row
    still has it)."""

    checkpoint_id: str
    tree: dict[str, Any]
    values: dict[str, Any]
    extras: dict[str, Any]
    chain_len: int
    base_bytes: int
    delta_bytes: int
    stamp: int = 0

    def checkpoint(self) -> dict[str, Any]:
        """The LangGraph ``Checkpoint`` dict, in objects the caller may change without touching this one."""
        tree = self.tree
        out: dict[str, Any] = {**self.extras, "v": tree.get("v", 1), "id": self.checkpoint_id,
                               "ts": tree.get("ts", "")}
        out["channel_values"] = {k: list(v) if type(v) is list else v for k, v in self.values.items()}
        out["channel_versions"] = dict(tree.get("channel_versions") or {})
        out["versions_seen"] = {k: dict(v) for k, v in (tree.get("versions_seen") or {}).items()}
        if "updated_channels" in tree:
            out["updated_channels"] = tree["updated_channels"]
        return out


@dataclass(frozen=True)
class Encoded:
    """The stored columns of one checkpoint (``store.lgraph.ROW_COLUMNS`` less its key, parent and metadata)."""

    chain_len: int
    compressed: bool
    payload: bytes
    channel_type: str | None
    channel_blob: bytes | None

    @property
    def stored_bytes(self) -> int:
        return len(self.payload) + len(self.channel_blob or b"")

    def columns(self) -> dict[str, Any]:
        return {"chain_len": self.chain_len, "stored_bytes": self.stored_bytes, "compressed": self.compressed,
                "payload": self.payload, "channel_type": self.channel_type, "channel_blob": self.channel_blob}


def _tree_of(checkpoint: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The checkpoint's JSON tree and its other fields. The version maps are copied, not the per-node maps inside
    ``versions_seen``: LangGraph hands ``put`` a copy of its checkpoint (``copy_checkpoint``) and never changes
    it afterwards."""
    tree: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    for key, value in checkpoint.items():
        if key in ("id", "channel_values"):
            continue
        if key == "channel_versions":
            tree[key] = dict(value)
        elif key == "versions_seen":
            tree[key] = dict(value)
        elif key in TREE_KEYS:
            tree[key] = list(value) if isinstance(value, list) else value
        else:
            extras[key] = value
    return tree, extras


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def tree_diff(old: dict[str, Any], new: dict[str, Any], new_versions: Mapping[str, Any] = {}) -> list[delta.Op]:
    """RFC 6902 operations turning tree ``old`` into ``new`` (what ``store.delta.diff`` gives for these trees,
    at dict-comprehension speed: ``channel_versions`` and ``versions_seen`` are compared entry by entry in C,
    not walked in Python). ``new_versions``: the channels ``put`` was told have new versions; when they are
    all that changed in ``channel_versions`` (checked by one comparison in C), only they are looked at."""
    ops: list[delta.Op] = []
    for key, value in new.items():
        before = old.get(key, _MISSING)
        if before is _MISSING:
            ops.append({"op": "add", "path": "/" + _escape(key), "value": value})
        elif key in _NESTED and type(value) is dict and type(before) is dict:
            path = "/" + _escape(key) + "/"
            changed = _hinted(before, value, new_versions) if key == "channel_versions" else None
            if changed is None:
                changed = _changed_keys(before, value)
                gone = before.keys() - value.keys() if len(before) + len(changed) != len(value) else ()
            else:
                gone = ()
            ops.extend({"op": "add", "path": path + _escape(k), "value": value[k]} for k in changed)
            ops.extend({"op": "remove", "path": path + _escape(k)} for k in gone)
        elif before != value or type(before) is not type(value):
            ops.append({"op": "replace", "path": "/" + _escape(key), "value": value})
    ops.extend({"op": "remove", "path": "/" + _escape(k)} for k in old.keys() - new.keys())
    return ops


def _hinted(before: dict[str, Any], after: dict[str, Any], hint: Mapping[str, Any]) -> list[str] | None:
    """The keys of ``hint`` that changed, when ``before`` with only them updated is ``after``; else None."""
    if not hint or len(after) > len(before) + len(hint):
        return None
    expected = dict(before)
    for k in hint:
        if k in after:
            expected[k] = after[k]
    if expected != after:
        return None
    return [k for k in hint if k in after and before.get(k, _MISSING) != after[k]]


def _changed_keys(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Keys of ``after`` whose value differs from (or is missing in) ``before``, compared in C (``map``,
    ``operator.ne``, ``itertools.compress``: no Python frame per key)."""
    keys = list(after)
    return list(compress(keys, map(ne, map(before.get, keys, repeat(_MISSING, len(keys))), after.values())))


def _apply_tree(tree: dict[str, Any], ops: list[delta.Op], *, in_place: bool) -> dict[str, Any]:
    """``tree`` patched by ``ops`` (from ``tree_diff``); unless ``in_place``, ``tree`` itself is left as it was
    (its top level and the nested dicts the patch touches are copied first)."""
    if not in_place:
        tree = dict(tree)
        touched = {op["path"].split("/", 2)[1] for op in ops if op["path"].count("/") > 1}
        for key in touched:
            key = key.replace("~1", "/").replace("~0", "~")
            if isinstance(tree.get(key), dict):
                tree[key] = dict(tree[key])
    return delta.apply(tree, ops, copy_values=False)


def _own(values: Mapping[str, Any]) -> dict[str, Any]:
    """The values with every list copied (the base of the next delta must not move with the caller's list)."""
    return {k: list(v) if type(v) is list else v for k, v in values.items()}


def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # a value whose == raises or is ambiguous (an array): count it as changed
        return False


def encode(checkpoint: Mapping[str, Any], parent: Position | None, new_versions: Mapping[str, Any],
           serde: SerializerProtocol, policy: SnapshotPolicy, stamp: int = 0) -> tuple[Encoded, Position]:
    """The stored form of ``checkpoint``: a delta against ``parent`` (the position of its parent checkpoint, or
    None when unknown) when the policy allows, else a snapshot. Returns it with the checkpoint's position,
    which keeps ``stamp`` (the stamp the row is written with)."""
    tree, extras = _tree_of(checkpoint)
    values = checkpoint.get("channel_values") or {}
    if parent is not None:
        changes = _value_changes(values, parent.values, new_versions)
        if extras != parent.extras:
            changes["x"] = extras
        payload, compressed = codec.dump_payload(tree_diff(parent.tree, tree, new_versions))
        blob_type, blob = serde.dumps_typed(changes) if changes else (None, None)
        enc = Encoded(parent.chain_len + 1, compressed, payload, blob_type, blob)
        delta_bytes = parent.delta_bytes + enc.stored_bytes
        if enc.chain_len <= policy.max_chain and delta_bytes < policy.delta_ratio * max(parent.base_bytes, 1024):
            return enc, Position(checkpoint["id"], tree, _own(values), extras, enc.chain_len, parent.base_bytes,
                                 delta_bytes, stamp)
    return snapshot(checkpoint["id"], tree, _own(values), extras, serde, stamp)


def snapshot(checkpoint_id: str, tree: dict[str, Any], values: dict[str, Any], extras: dict[str, Any],
             serde: SerializerProtocol, stamp: int = 0) -> tuple[Encoded, Position]:
    """The full snapshot of a checkpoint, and its position (``values`` are kept as given; ``stamp`` as
    ``encode``'s)."""
    payload, compressed = codec.dump_payload(tree)
    whole: dict[str, Any] = {}
    if values:
        whole["s"] = values
    if extras:
        whole["x"] = extras
    blob_type, blob = serde.dumps_typed(whole) if whole else (None, None)
    enc = Encoded(0, compressed, payload, blob_type, blob)
    return enc, Position(checkpoint_id, tree, values, extras, 0, enc.stored_bytes, 0, stamp)


def _value_changes(values: Mapping[str, Any], before: Mapping[str, Any],
                   new_versions: Mapping[str, Any]) -> dict[str, Any]:
    """What turns the parent's channel values ``before`` into ``values``: ``{"s": set, "a": appended, "d":
    dropped}`` (each only when non-empty). A channel without a new version is compared with its old value only
    when it is not the very same object."""
    set_: dict[str, Any] = {}
    add: dict[str, Any] = {}
    for ch, value in values.items():
        old = before.get(ch, _MISSING)
        if old is _MISSING:
            set_[ch] = value
            continue
        kind = type(value)
        if kind is list and type(old) is list:
            n = len(old)
            if len(value) >= n and (n == 0 or _same(value[:n], old)):
                if len(value) > n:
                    add[ch] = value[n:]
            else:
                set_[ch] = value
        elif kind is str and type(old) is str:
            if value == old:
                continue
            if len(value) > len(old) and value.startswith(old) and old:
                add[ch] = value[len(old):]
            else:
                set_[ch] = value
        elif ch in new_versions or not _same(value, old):
            set_[ch] = value
    dropped = [ch for ch in before if ch not in values]
    changes: dict[str, Any] = {}
    if set_:
        changes["s"] = set_
    if add:
        changes["a"] = add
    if dropped:
        changes["d"] = dropped
    return changes


def decode(row: StoredRow, parent: Position | None, serde: SerializerProtocol, *, in_place: bool) -> Position:
    """The position of ``row``: a snapshot alone, or ``parent`` (the position of its parent row) changed by it.
    ``in_place``: ``parent`` may be changed (it is not needed afterwards), which saves copying it.

    Raises:
        ValueError: ``row`` is a delta and ``parent`` is None, or its patch does not apply.
    """
    size = len(row.payload) + len(row.channel_blob or b"")
    parts = serde.loads_typed((row.channel_type, row.channel_blob)) if row.channel_type is not None else {}
    tree_or_ops = codec.load_payload(row.payload, row.compressed)
    if row.chain_len == 0:
        return Position(row.checkpoint_id, tree_or_ops, dict(parts.get("s") or {}), dict(parts.get("x") or {}),
                        0, size, 0, row.stamp)
    if parent is None:
        raise ValueError(f"checkpoint {row.checkpoint_id} is a change of a parent that was not read")
    tree = _apply_tree(parent.tree, tree_or_ops, in_place=in_place)
    values = parent.values if in_place else dict(parent.values)
    for ch in parts.get("d") or ():
        values.pop(ch, None)
    values.update(parts.get("s") or {})
    for ch, suffix in (parts.get("a") or {}).items():
        base = values.get(ch)
        if in_place and type(base) is list:
            base.extend(suffix)
        else:
            values[ch] = (base or type(suffix)()) + suffix
    extras = dict(parts["x"]) if "x" in parts else parent.extras
    return Position(row.checkpoint_id, tree, values, extras, parent.chain_len + 1, parent.base_bytes,
                    parent.delta_bytes + size, row.stamp)


def decode_chain(rows: list[StoredRow], serde: SerializerProtocol) -> Position:
    """The position of the last of ``rows`` (a chain from ``store.lgraph.LangGraphRepo.chain``, snapshot first).

    Raises:
        ValueError: the chain does not start at a snapshot.
    """
    if rows[0].chain_len != 0:
        raise ValueError(f"the checkpoint chain of {rows[-1].checkpoint_id} does not start at a snapshot")
    position: Position | None = None
    for row in rows:
        position = decode(row, position, serde, in_place=True)
    assert position is not None
    return position


def decode_many(rows: Mapping[tuple, StoredRow], keys: list[tuple], serde: SerializerProtocol) -> dict[tuple, Position]:
    """The positions of ``keys``, decoding each row of ``rows`` (which hold them and their ancestors back to
    their snapshots) once.

    Raises:
        ValueError: an ancestor a key needs is missing from ``rows``.
    """
    done: dict[tuple, Position] = {}
    for key in keys:
        path = []
        cursor: tuple | None = key
        while cursor is not None and cursor not in done:
            row = rows.get(cursor)
            if row is None:
                raise ValueError(f"checkpoint {cursor[2]} of thread {cursor[0]!r} is missing from its chain")
            path.append(row)
            cursor = row.parent_key if row.chain_len > 0 else None
            if len(path) > len(rows):
                raise ValueError(f"the checkpoint chain of {key[2]} loops")
        position = done.get(cursor) if cursor is not None else None
        for row in reversed(path):
            position = decode(row, position, serde, in_place=False)
            done[row.key] = position
    return done
