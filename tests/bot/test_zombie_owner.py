"""A run leased to a ``hazel`` command that was killed but not yet reaped (a zombie: a container whose first
process does not reap its children, or a parent that has not waited yet) is the run of a dead process: it is
recovered at once (a fresh-user finding: ``kill(pid, 0)`` found the zombie and the run stayed leased to it)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from bot.engine.leases import owner_is_dead


def test_a_killed_process_not_yet_reaped_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    owner = f"{socket.gethostname()}:{child.pid}:nonce"
    try:
        assert not owner_is_dead(owner)  # alive
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not _state_is_zombie(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state_is_zombie(child.pid)  # killed, not reaped: kill(pid, 0) still finds it
        os.kill(child.pid, 0)
        assert owner_is_dead(owner)
    finally:
        child.kill()
        child.wait()
    assert owner_is_dead(owner)  # reaped: gone


def _state_is_zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        stat = fh.read()
    return stat[stat.rfind(b")") + 2:][:1] == b"Z"
