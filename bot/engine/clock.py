"""Time: every timestamp Hazel writes is timezone-aware UTC."""

from __future__ import annotations

from datetime import datetime, timezone


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
