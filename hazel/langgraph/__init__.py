"""Hazel for LangGraph agents (``pip install 'hazel[langgraph]'``).

``HazelSaver`` / ``AsyncHazelSaver``: LangGraph checkpointers on Hazel's database (SQLite or PostgreSQL), which
store each checkpoint as what changed since its parent, with periodic snapshots::

    from hazel.langgraph import HazelSaver

    with HazelSaver.from_conn_string("sqlite:///hazel.db") as saver:
        graph = builder.compile(checkpointer=saver)

``register`` / ``steer``: a graph steered through Hazel (``bot.engine.lgraph``): registered in a module named by
``HAZEL_WORKFLOWS``, started as any workflow, every ``interrupt()`` / ``steer()`` a Hazel steering request whose
decision resumes the graph (``{"action": "approve" | "edit" | "reject" | "feedback", ...}``)::

    from hazel.langgraph import register, steer

    def review(state):
        answer = steer(title="Approve the draft", show=state["draft"], channel="slack:#reviews")
        ...

    register(builder.compile(), name="langgraph-review", version=1)
"""

from hazel.langgraph.register import register
from hazel.langgraph.saver import AsyncHazelSaver, HazelSaver
from hazel.langgraph.steer import steer

__all__ = ["AsyncHazelSaver", "HazelSaver", "register", "steer"]
