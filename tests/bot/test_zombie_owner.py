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

from bot.engine.leases import local_host, make_owner, owner_is_dead


def test_a_killed_process_not_yet_reaped_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    owner = f"{local_host()}:{child.pid}:nonce"
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


def test_an_owner_of_another_pid_namespace_on_this_host_is_judged_by_its_lease() -> None:
    """s24 F12 (HIGH): containers with host networking share the host's name, not its process ids: a worker
    took a live ``serve``'s runs in another container as a dead process's (its pid did not exist here), and
    their steps ran two and three times at once. The owner names its PID namespace; another one's is not
    looked up here (its lease decides); an owner of an older Hazel, without it, neither."""
    mine = make_owner()
    assert mine.startswith(local_host() + ":") and "@" in local_host()  # (Linux: the namespace is named)
    gone = 2 ** 22 + 12345  # (past pid_max's default: no such process here)
    assert owner_is_dead(f"{local_host()}:{gone}:n")
    assert not owner_is_dead(f"{socket.gethostname()}@1:{gone}:n")  # another namespace of this host
    assert not owner_is_dead(f"{socket.gethostname()}:{gone}:n")  # an older Hazel's owner: its lease decides
