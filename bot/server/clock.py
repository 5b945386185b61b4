"""The clock check every process makes before it judges leases and deadlines by its own clock (``hazel serve``,
``hazel worker`` and every CLI command: ``bot.cli.common``). Light: a CLI command that only reads imports it."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("hazel.server")


CLOCK_WARN_SEC = 2.0
"""A process's clock this far from the database's is logged as a warning at start."""


def check_clock(hazel: Any) -> None:
    """Refuse to start a process whose clock is more than half of ``HAZEL_LEASE_SEC`` away from the database
    server's (``Store.clock_skew_sec``; PostgreSQL only), warn past ``CLOCK_WARN_SEC``: leases, recovery and
    deadlines are judged by this clock, and a host whose clock ran 90 s ahead took every live run as abandoned
    (steps ran two and three times at once) and fired timeouts early (a fresh-operator finding, s24).

    Raises:
        ConfigurationError: the clock is too far off (the message says by how much, and to synchronize it).
        sqlalchemy.exc.DBAPIError: the database failed.
    """
    from bot.engine import ConfigurationError

    skew = hazel.store.clock_skew_sec()
    if skew is None or abs(skew) <= CLOCK_WARN_SEC:
        return
    lease_sec = hazel.settings.lease_sec
    said = (f"this host's clock is {abs(skew):.1f} s {'ahead of' if skew > 0 else 'behind'} the database "
            f"server's; leases (HAZEL_LEASE_SEC={lease_sec:g}), recovery and deadlines are judged by it")
    if abs(skew) > lease_sec / 2:
        raise ConfigurationError(f"{said}: synchronize the clocks (NTP: chrony, systemd-timesyncd) before "
                                 "starting, or live runs would be taken over while their steps run")
    log.warning("%s: synchronize the clocks (NTP)", said)
