"""Hazel for LangGraph agents (``pip install 'hazel[langgraph]'``).

``HazelSaver`` / ``AsyncHazelSaver``: LangGraph checkpointers on Hazel's database (SQLite or PostgreSQL), which
store each checkpoint as what changed since its parent, with periodic snapshots::

    from hazel.langgraph import HazelSaver

    with HazelSaver.from_conn_string("sqlite:///hazel.db") as saver:
        graph = builder.compile(checkpointer=saver)
"""

from hazel.langgraph.saver import AsyncHazelSaver, HazelSaver

__all__ = ["AsyncHazelSaver", "HazelSaver"]
