"""``python -m tests.support.decide_and_hang RUN_ID``: approve RUN_ID with ``claim=True`` (the decision's
transaction leases the run to this process), print ``decided``, then hang before executing anything, as a
process killed between its commit and the next step would. Settings come from the environment."""

from __future__ import annotations

import sys
import time

from bot.server.app import HazelApp
from store.models import Actor


def main(run_id: str) -> None:
    hazel = HazelApp()
    outcome = hazel.decide(run_id=run_id, action="approve", actor=Actor(id="sme", channel="console", name="sme",
                                                                        person="sme"), claim=True)
    print(f"decided {outcome.run_status.value}", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1])
