"""The workload: linear workflows whose every step appends about 1 KB of text to a list in the state, and a
pause workflow (3 steps, a steering point, 1 step). Shared by the Hazel and LangGraph sides.

This module is also named in ``HAZEL_WORKFLOWS`` for the ``hazel serve`` and worker subprocesses and for the
``hazel`` commands ``bench.cli_speed`` times, so its top-level ``Workflow`` objects (``bench_pause``) are
registered there too. Its top level imports only what defining them needs; the helpers that build an engine
(``make_engine``, ``make_hazel``, ``silent_console``, ``settings_for``) import the rest when called.
"""

from __future__ import annotations

import io
import random
from functools import lru_cache
from typing import TYPE_CHECKING

from pydantic import BaseModel

from bot.engine.workflow import StepContext, Workflow
from store.models import Actor

if TYPE_CHECKING:
    from bot.engine import Hazel as Engine
    from bot.server.app import HazelApp as Hazel
    from bot.settings import Settings
    from integrations.console import ConsoleChannel

TEXT_BYTES = 1024
"""Bytes of text each step appends (ASCII words: one byte per character)."""
PAUSE_WORKFLOW = "bench-pause"
PAUSE_STEPS = ("first", "second", "third")
PAUSE_POINT = "review"
RESUMED_STEP = "after_review"
"""The step that starts when a pause-workflow run resumes; its start ends the resume latency."""
ACTOR = Actor(id="bench", channel="console", name="bench")

_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


@lru_cache(maxsize=1)
def _vocabulary() -> tuple[str, ...]:
    """5,000 words of 2 to 10 letters: the words of ``random.Random(6)``'s
    ``"".join(rng.choice(_ALPHABET) for _ in range(rng.randint(2, 10)))``, drawn the way CPython's ``randint``
    and ``choice`` draw (``_randbelow``: ``getrandbits`` of the bound's bit length, drawn again while out of
    range), in a third of their time (10 ms at every import of this module, ``hazel runs`` included)."""
    bits = random.Random(6).getrandbits
    alphabet = _ALPHABET
    words = []
    for _ in range(5000):
        length = bits(4)  # randint(2, 10): 2 + a draw below 9
        while length >= 9:
            length = bits(4)
        letters = []
        for _ in range(length + 2):
            k = bits(5)  # choice(_ALPHABET): a draw below 26
            while k >= 26:
                k = bits(5)
            letters.append(alphabet[k])
        words.append("".join(letters))
    return tuple(words)


@lru_cache(maxsize=4096)
def step_text(i: int) -> str:
    """Exactly ``TEXT_BYTES`` characters of word-like text for step ``i`` (deterministic, different per step;
    zlib level 1 shrinks it to about 60 %, like English prose)."""
    rng = random.Random(i)
    words, size = [], 0
    vocabulary = _vocabulary()
    while size < TEXT_BYTES:
        word = rng.choice(vocabulary)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:TEXT_BYTES]


class ListState(BaseModel):
    """The bench state: the texts appended so far."""

    items: list[str] = []


def _appender(i: int, *, lazy: bool = False):  # noqa: ANN202
    """The step appending ``step_text(i)`` (cached: the step reads it from ``step_text``'s cache). Its text is
    made now, so that no timed step makes it, unless ``lazy``: then by the step's first call (``bench_pause`` is
    defined at every import of this module, and a process that imports it only to register its workflows, a
    ``hazel runs`` among them, never needs the texts: 3.5 ms)."""
    if not lazy:
        step_text(i)

    def append(state: ListState, ctx: StepContext) -> ListState:
        return state.model_copy(update={"items": [*state.items, step_text(i)]})

    return append


def linear_workflow(n_steps: int, name: str | None = None) -> Workflow:
    """``bench-linear-N`` (or ``name``): steps ``s0000`` .. ``s{N-1}``, each appending ``step_text(i)``."""
    wf = Workflow(name or f"bench-linear-{n_steps}", version=1, state=ListState)
    for i in range(n_steps):
        wf.step(_appender(i), name=f"s{i:04d}")
    return wf


def pause_workflow() -> Workflow:
    """``bench-pause``: three appending steps, the steering point ``review`` (approve only, anyone may
    decide, console channel), then ``after_review``. Each step makes its text on its first call (the first run
    of a process that has not made them yet: ~3.5 ms once, before the vocabulary is cached)."""
    wf = Workflow(PAUSE_WORKFLOW, version=1, state=ListState)
    for i, name in enumerate(PAUSE_STEPS):
        wf.step(_appender(i, lazy=True), name=name)
    wf.steer(PAUSE_POINT, title="Bench review", actions=["approve"])
    wf.step(_appender(len(PAUSE_STEPS), lazy=True), name=RESUMED_STEP)
    return wf


bench_pause = pause_workflow()


class _Discard(io.TextIOBase):
    def write(self, text: str) -> int:
        return len(text)


@lru_cache(maxsize=1)
def _unrendered() -> type:
    from rich.console import Console

    class _Unrendered(Console):
        """A rich Console that lays nothing out: ``print`` returns at once. Laying out a steering request's panel
        (3 KB of state wrapped at 100 columns) took 8-12 ms of a worker process's CPU per message on a slow
        2-core VM, more than the decision or the step it reports; no peer renders anything."""

        def print(self, *objects: object, **kwargs: object) -> None:  # noqa: D102
            return None

    return _Unrendered


def silent_console() -> ConsoleChannel:
    """The console channel printing nowhere: deliveries still happen (each message claimed, its view read
    from the store, the channel's texts built, the message marked sent), nothing is laid out or written."""
    from integrations.console import ConsoleChannel

    return ConsoleChannel(console=_unrendered()(file=_Discard(), width=100))


def settings_for(url: str) -> Settings:
    """Settings for ``url`` that ignore the environment's and ``.env``'s Hazel settings."""
    from bot.settings import Settings

    return Settings(_env_file=None, database_url=url, workflows="bench.workload")


def make_engine(url: str, *workflows: Workflow) -> Engine:
    """The engine alone (``bot.engine.Hazel``) on ``url`` with only ``workflows``: runs execute as a worker
    executes them, their outbox rows are written in the same transactions and never delivered (the peers
    deliver nothing either)."""
    from bot.engine import Hazel as Engine
    from bot.engine.registry import Registry
    from store import Store

    registry = Registry()
    for wf in workflows:
        registry.add(wf)
    return Engine(settings_for(url), store=Store(url), registry=registry, load_workflows=False)


def make_hazel(url: str, *workflows: Workflow) -> Hazel:
    """A ``Hazel`` on ``url`` with only ``workflows`` registered and a silent console."""
    from bot.engine.registry import Registry
    from bot.server.app import HazelApp as Hazel
    from store import Store

    registry = Registry()
    for wf in workflows:
        registry.add(wf)
    settings = settings_for(url)
    return Hazel(settings, store=Store(url), registry=registry, console=silent_console(), load_workflows=False)
