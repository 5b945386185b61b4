"""State values JSON cannot carry as such come back as the same types after a store round trip."""

from __future__ import annotations

import enum
import json
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

from pydantic import BaseModel
from sqlalchemy import text

from store import NewCheckpoint, Store
from store.codec import StateCodec, dump_payload, load_payload, load_payloads
from store.models import RunStatus


class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Inner(BaseModel):
    name: str
    at: datetime
    blob: bytes = b""


class Rich(BaseModel):
    when: datetime
    day: date
    span: timedelta
    level: Level
    tags: set[str]
    frozen: frozenset[int]
    pair: tuple[int, str]
    inner: Inner
    inners: list[Inner]
    raw: bytes
    text_bytes: bytes
    money: Decimal
    ident: uuid.UUID
    by_level: dict[Level, int]


def sample() -> Rich:
    t = datetime(2026, 11, 29, 12, 30, 15, 123456, tzinfo=timezone.utc)
    return Rich(when=t, day=date(2026, 1, 2), span=timedelta(hours=3, seconds=5), level=Level.HIGH,
                tags={"a", "b"}, frozen=frozenset({3, 1}), pair=(1, "x"),
                inner=Inner(name="n", at=t, blob=b"\x00\xff\xfe"), inners=[Inner(name="m", at=t)],
                raw=b"\x80\x81binary\x00", text_bytes="héllo".encode(), money=Decimal("12.3400"),
                ident=uuid.UUID("12345678-1234-5678-1234-567812345678"), by_level={Level.LOW: 1})


def test_round_trip_through_json_keeps_types() -> None:
    codec = StateCodec(Rich)
    state = sample()
    tree = load_payload(*dump_payload(codec.encode(state)))
    back = codec.decode(tree)
    assert back == state
    assert isinstance(back.when, datetime) and back.when.utcoffset() == timedelta(0)
    assert isinstance(back.level, Level)
    assert isinstance(back.tags, set) and isinstance(back.frozen, frozenset)
    assert isinstance(back.pair, tuple)
    assert isinstance(back.inner, Inner) and back.inner.blob == b"\x00\xff\xfe"
    assert back.raw == b"\x80\x81binary\x00" and isinstance(back.raw, bytes)
    assert isinstance(back.money, Decimal) and isinstance(back.ident, uuid.UUID)
    assert list(back.by_level) == [Level.LOW]


def test_round_trip_through_the_database(store: Store) -> None:
    """Written as a snapshot, then as a patch on it: both load back as equal models of the same types."""
    codec = StateCodec(Rich)
    first = sample()
    second = first.model_copy(update={"raw": b"\xff" * 5, "tags": {"c"}, "level": Level.LOW})
    now = datetime.now(timezone.utc)
    with store.transaction() as tx:
        tx.runs.insert(run_id="r1", workflow="w", workflow_version=1, started_by="me", started_via="console",
                       now=now, status=RunStatus.READY)
        pos = tx.checkpoints.write(NewCheckpoint(run_id="r1", seq=0, parent_seq=None, branch=0, step="__start__",
                                                 next_step="a", workflow_version=1, created_at=now),
                                   codec.encode(first), None)
        tx.checkpoints.write(NewCheckpoint(run_id="r1", seq=1, parent_seq=0, branch=0, step="a", next_step=None,
                                           workflow_version=1, created_at=now), codec.encode(second), pos)
    with store.read() as tx:
        a, b = tx.checkpoints.load("r1", 0), tx.checkpoints.load("r1", 1)
    assert codec.decode(a.tree) == first
    assert codec.decode(b.tree) == second and b.chain_len == 1
    assert b.info.created_at.tzinfo is not None


def test_many_payloads_decode_as_each_would_alone() -> None:
    trees = [{"op": "add", "path": "/items/-", "value": "x" * 400 + "é"}, [], {"s": "short"}, "text", 3,
             [{"op": "replace", "path": "/a", "value": {"nested": [1, 2.5, None, True]}}]]
    stored = [dump_payload(tree) for tree in trees]
    assert any(compressed for _, compressed in stored) and not all(compressed for _, compressed in stored)
    assert load_payloads(stored) == [load_payload(p, c) for p, c in stored] == trees
    assert load_payloads([]) == []


def test_payloads_are_zstd_frames_and_zlib_rows_of_earlier_versions_still_load(store: Store) -> None:
    """New payloads are zstd frames; a chain whose snapshot and first patch were written as zlib streams (by
    Hazel before zstd) and whose last patch is zstd loads as one state."""
    big = {"items": ["word " * 100]}
    payload, compressed = dump_payload(big)
    assert compressed and payload[:4] == b"\x28\xb5\x2f\xfd" and load_payload(payload, True) == big
    now = datetime.now(timezone.utc)
    with store.transaction() as tx:
        tx.runs.insert(run_id="r1", workflow="w", workflow_version=1, started_by="me", started_via="console",
                       now=now, status=RunStatus.READY)
        pos = None
        for seq, items in enumerate((["word " * 100], ["word " * 100, "more " * 80],
                                     ["word " * 100, "more " * 80, "last " * 90])):
            pos = tx.checkpoints.write(NewCheckpoint(run_id="r1", seq=seq, parent_seq=seq - 1 if seq else None,
                                                     branch=0, step=f"s{seq}", next_step=None, workflow_version=1,
                                                     created_at=now), {"items": items}, pos)
    with store.transaction() as tx:  # the first two rows as an earlier Hazel wrote them
        for seq in (0, 1):
            row = tx.conn.execute(text("SELECT payload, compressed FROM hazel_checkpoints WHERE run_id = 'r1'"
                                       " AND seq = :seq"), {"seq": seq}).one()
            legacy = zlib.compress(json.dumps(load_payload(bytes(row.payload), row.compressed),
                                              separators=(",", ":")).encode(), 1)
            tx.conn.execute(text("UPDATE hazel_checkpoints SET payload = :p, compressed = :c WHERE run_id = 'r1'"
                                 " AND seq = :seq"), {"p": legacy, "c": True, "seq": seq})
    with store.read() as tx:
        loaded = tx.checkpoints.load("r1", 2)
    assert loaded.chain_len == 2 and loaded.tree == {"items": ["word " * 100, "more " * 80, "last " * 90]}


def test_threads_compress_and_decompress_at_once() -> None:
    """Each thread has its own zstd contexts (python-zstandard's are not thread-safe): eight threads encoding
    and decoding different trees at once all get their own back."""

    def work(i: int) -> int:
        for j in range(300):
            tree = {"who": i, "text": f"thread {i} step {j} " * 40}
            assert load_payload(*dump_payload(tree)) == tree
        return i

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert sorted(pool.map(work, range(8))) == list(range(8))  # (an assertion in a thread re-raises here)


def test_payload_json_reads_back_as_the_standard_librarys_would() -> None:
    """``json_bytes`` (pydantic-core's writer) gives what ``json.dumps`` gave for every JSON tree the store
    keeps: integers past 64 bits, NaN and infinities, numbers as keys, text outside ASCII, floats of every
    size; and text that is not UTF-8 is refused with the error the runner turns into a failed step."""
    from store.codec import json_bytes

    floats = [1e-7, 1e-5, 0.1, 1e16, 1e22, 5e-324, 1.7976931348623157e308, -0.0, 123456789012345680.0]
    tree = {"big": [2**64, -2**70, 2**63 - 1], "odd": [float("inf"), -float("inf")], 3: "three",
            "text": "é \u2028 / < \U0001F600 \x7f\x00", "floats": floats, "nested": [{"a": None, "b": True}]}
    ours, theirs = json_bytes(tree), json.dumps(tree, separators=(",", ":"), ensure_ascii=False).encode()
    assert json.loads(ours) == json.loads(theirs)
    assert json.loads(json_bytes([float("nan")]))[0] != json.loads(json_bytes([float("nan")]))[0]  # NaN, not null
    assert json_bytes({"a": [1, "x", None]}) == b'{"a":[1,"x",null]}'
    try:
        json_bytes({"bad": "\udc9b"})
    except UnicodeEncodeError:
        pass
    else:
        raise AssertionError("a lone surrogate was written")
