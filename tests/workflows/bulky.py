"""A workflow whose step after its steering point writes a large state (``bulk``: about 1.2 MB of hex text), so
that a test can let the decision's commit through and refuse the step's with a file size limit: SQLite's
"database or disk is full", as on a full disk, part-way through ``hazel approve``."""

from __future__ import annotations

import secrets

from pydantic import BaseModel

from hazel import StepContext, Workflow


class Bulk(BaseModel):
    text: str = ""


bulky = Workflow("bulky", version=1, state=Bulk)


@bulky.step
def draft(state: Bulk, ctx: StepContext) -> Bulk:
    return state.model_copy(update={"text": "draft"})


bulky.steer("review", title="Review the draft", show="text")


@bulky.step
def bulk(state: Bulk, ctx: StepContext) -> Bulk:
    return state.model_copy(update={"text": secrets.token_hex(600_000)})  # (incompressible to zstd)
