"""Hazel's benchmarks (issue 6): checkpoint cost against the database floor and against LangGraph, storage,
pause and resume, waiting runs in ``hazel serve``, history and rewind, Slack click to acknowledgement.

``python -m bench`` (or ``make bench``) measures everything on SQLite (WAL) and PostgreSQL in one run and prints
one table of medians with min..max over the repetitions; ``--quick`` is the short version (under 2 minutes).
Bench code measures and reports; it never asserts a wall-clock limit. See ``bench/README.md``.
"""
