"""State <-> JSON tree, and JSON tree <-> stored bytes.

A run's state is a pydantic model. It is stored as a JSON tree built by pydantic's own JSON-mode dump, so
datetimes, enums, sets, tuples, decimals, UUIDs and nested models come back as the same types when the tree
is validated against the model again. The one value JSON mode cannot carry is ``bytes`` that are not UTF-8:
for those the tree holds ``{"$bytes": "<base64>"}``, turned back into ``bytes`` before validation.
"""

from __future__ import annotations

import base64
import json
import threading
import zlib
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

S = TypeVar("S", bound=BaseModel)

_BYTES_TAG = "$bytes"
COMPRESS_MIN_BYTES = 256
"""Payloads at least this long are zlib-compressed when that makes them smaller."""


class StateCodec(Generic[S]):
    """Encodes one state model. ``encode`` gives the JSON tree the store keeps; ``decode`` validates a tree
    back into the model (raising ``pydantic.ValidationError`` if the tree no longer fits it)."""

    def __init__(self, model: type[S]) -> None:
        self.model = model

    def encode(self, state: S) -> dict[str, Any]:
        """``state`` as the JSON tree the store keeps.

        Raises:
            pydantic_core.PydanticSerializationError: a value does not fit its field's type (a model changed in
                place: pydantic validates no assignment by default); stored, it would no longer load.
        """
        try:
            return state.model_dump(mode="json", round_trip=True, warnings="error")
        except UnicodeDecodeError:
            return _tag_bytes(state.model_dump(mode="python", round_trip=True, warnings="error"))

    def decode(self, tree: dict[str, Any]) -> S:
        return self.model.model_validate(_untag_bytes(tree), by_name=True)

    def validate(self, data: Any) -> S:
        """Validate user-supplied data (a dict or a model instance) into the state model; a field is given by its
        name or its alias (``model_dump``, which this store and the engine merge edits into, writes names: a
        model whose fields have aliases would otherwise drop every value given by name).

        Raises:
            pydantic.ValidationError: ``data`` does not fit the model.
        """
        if isinstance(data, self.model):
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump()
        return self.model.model_validate(data, by_alias=True, by_name=True)


def _tag_bytes(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return {_BYTES_TAG: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {_key(k): _tag_bytes(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tag_bytes(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_tag_bytes(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return to_jsonable_python(value)


def json_value(value: Any) -> Any:
    """``value`` (a Python value a JSON tree cannot hold as it is) as the state codec writes it in a tree: bytes as
    their UTF-8 text, or ``{"$bytes": "<base64>"}``; datetimes, decimals, UUIDs, enums and the like as pydantic's
    JSON mode writes them (``2026-01-01T00:00:00Z``, ``"1.10"``).

    Raises:
        pydantic_core.PydanticSerializationError: a value pydantic cannot write either.
    """
    return _tag_bytes(value)


def _key(key: Any) -> str:
    return key if isinstance(key, str) else str(to_jsonable_python(key))


def _untag_bytes(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and _BYTES_TAG in value and isinstance(value[_BYTES_TAG], str):
            return base64.b64decode(value[_BYTES_TAG])
        return {k: _untag_bytes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_untag_bytes(v) for v in value]
    return value


def is_text(value: str) -> bool:
    """True when ``value`` can be stored: it encodes as UTF-8 (no lone surrogates, which a byte that is not UTF-8
    on the command line or in the environment, or ``\\udc9b`` in JSON, become)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


ZSTD_LEVEL = 1
"""zstd's level for payloads: level 1 packs the bench's word-like text (bench/README.md) as small as zlib's
level 1 did, and a step compresses its patch in ~4.5 µs instead of ~15 µs."""
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
"""The first bytes of a zstd frame (RFC 8878, 3.1.1). A zlib stream (RFC 1950) starts with 0x78 for deflate's
32 KB window, so ``compressed`` payloads of either kind are told apart by their first bytes."""


class _Zstd(threading.local):
    """One zstd compressor and decompressor per thread: python-zstandard's contexts are not thread-safe
    (https://python-zstandard.readthedocs.io/en/latest/compressor.html: "assume instances are not thread safe
    unless stated otherwise"; the same for ``ZstdDecompressor``), and making a context takes ~17 µs, more than
    compressing a 1 KB patch with one (1-5 µs). Made on a thread's first payload (``zstandard`` imports in
    ~3 ms; ``hazel runs`` and ``hazel --help`` read no state)."""

    compress: Any = None
    decompress: Any = None

    def load(self) -> _Zstd:
        if self.compress is None:
            import zstandard

            self.compress = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress
            self.decompress = zstandard.ZstdDecompressor().decompress
        return self


_zstd = _Zstd()


def json_bytes(tree: Any) -> bytes:
    """A JSON tree as compact UTF-8 JSON text: what ``json.dumps(tree, separators=(",", ":"),
    ensure_ascii=False).encode()`` gives (integers of any size, ``NaN``/``Infinity``, keys that are numbers
    turned into text), written by pydantic-core's serializer: 1.3 µs for a step's 1 KB patch instead of 8.8,
    0.14 ms for a 250 KB state instead of 1.26 (the VM of ``bench/``). Floats are written in their shortest
    form as ``json`` does, with a different exponent style for some (``1e-7``, not ``1e-07``): the same value
    when read back. The trees given are JSON trees (``StateCodec.encode``, a patch of two, a LangGraph
    checkpoint's versions); a value outside JSON that pydantic writes (a datetime, a UUID, a set) is written
    as pydantic's JSON mode writes it, where ``json.dumps`` refused it.

    Raises:
        UnicodeEncodeError: text that is not UTF-8 (a lone surrogate), as ``str.encode`` raises it.
        TypeError: a value neither writes.
    """
    try:
        return to_json(tree, inf_nan_mode="constants")
    except PydanticSerializationError:  # the standard library's error, raised as it always was
        return json.dumps(tree, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def dump_payload(tree: Any) -> tuple[bytes, bool]:
    """Serialise a JSON tree (a state or a patch) to stored bytes: its compact UTF-8 JSON (``json_bytes``), as a
    zstd frame (with its content size) when that is at least 10 % smaller. Returns ``(payload, compressed)``.

    Raises:
        UnicodeEncodeError: text that is not UTF-8 (a lone surrogate).
    """
    raw = json_bytes(tree)
    if len(raw) >= COMPRESS_MIN_BYTES:
        packed = (_zstd.compress or _zstd.load().compress)(raw)
        if len(packed) < len(raw) * 0.9:
            return packed, True
    return raw, False


def _inflate(payload: bytes) -> bytes:
    """The JSON text of a ``compressed`` payload: a zstd frame, or a zlib stream (written by Hazel before
    zstd, and read as it was)."""
    if payload[:4] == _ZSTD_MAGIC:
        return (_zstd.decompress or _zstd.load().decompress)(payload)
    return zlib.decompress(payload)


def load_payload(payload: bytes, compressed: bool) -> Any:
    """Inverse of ``dump_payload``.

    Raises:
        zstandard.ZstdError, zlib.error: a ``compressed`` payload that is neither (a damaged row).
    """
    return json.loads(_inflate(payload) if compressed else payload)


def load_payloads(stored: list[tuple[bytes, bool]]) -> list[Any]:
    """``load_payload`` of each ``(payload, compressed)``, in order, parsed by ONE ``json.loads`` of their
    texts joined into a JSON array: a checkpoint chain of 68 patches decodes in about 0.55 ms instead of 1.0
    (one parser call instead of 68; measured on the 2-core VM of ``bench/``)."""
    if not stored:
        return []
    inflate = _inflate
    return json.loads(b"[" + b",".join([inflate(p) if c else p for p, c in stored]) + b"]")
