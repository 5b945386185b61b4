"""Hazel's benchmarks: checkpoint cost against the database floor and against LangGraph and DBOS, storage,
pause and resume (in-process and with worker processes), waiting runs in ``hazel serve``, history and rewind,
Slack click to acknowledgement, cost against the size of the database, the CLI's start-up.

``python -m bench`` (or ``make bench``) measures everything on SQLite (WAL) and PostgreSQL in one run and prints
one table of medians with min..max over the repetitions; ``--quick`` is the short version (under 3 minutes on
the 2-core machine with nothing else running).
Bench code measures and reports; it never asserts a wall-clock limit. See ``bench/README.md``.
"""
