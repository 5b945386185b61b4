"""Example: a LangGraph agent steered through Hazel. Copy it, keep the last line.

    draft → review (an SME, through Hazel) → revise on feedback → review … → publish

The graph is plain LangGraph. The one Hazel line is ``register(...)`` at the bottom; ``steer()`` in ``review``
is LangGraph's ``interrupt()`` with the steering point's settings, and returns the SME's decision:
``{"action": "approve"}``, ``{"action": "edit", "value": "<new draft>"}``, ``{"action": "reject", "reason": …}``
or ``{"action": "feedback", "text": …}`` (each with ``"by"``: who decided).

    export HAZEL_WORKFLOWS=examples.langgraph_review
    hazel run langgraph-review --input '{"topic": "tide pools"}'
    hazel approve RUN          # or: hazel feedback RUN "more about crabs" / hazel edit RUN / hazel reject RUN …
    hazel history RUN          # the graph's checkpoints, with the branches rewinds made

Drafts come from ``hazel.llm.complete``: a real OpenAI-compatible model when ``HAZEL_LLM_*`` is set, else the
deterministic offline drafter below (it says so in what it writes). ``HAZEL_EXAMPLE_LG_CHANNEL`` says where the
review is asked (``console`` by default; e.g. ``slack:#reviews`` or ``jira:DOC``).
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

from hazel import env
from hazel.langgraph import register, steer
from hazel.llm import OFFLINE_NOTICE, complete


class ReviewInput(TypedDict):
    topic: str
    """What the article is about: the one key a run's input must give (the drafting node reads it)."""


class ReviewState(ReviewInput, total=False):
    draft: str
    feedback: str
    """The SME's feedback (from the review, or a rewind's: Hazel writes it here on the fork)."""
    revisions: int
    history: Annotated[list[str], operator.add]
    published: bool


def offline_draft(topic: str, feedback: str | None, revision: int) -> str:
    """The offline drafter: deterministic text from the topic and the SME's feedback."""
    text = [f"# {topic.strip().capitalize()}", "", OFFLINE_NOTICE, "",
            f"{topic.strip().capitalize()} in three points: what it is, why it matters, what to do next."]
    if feedback:
        text += ["", f"Revision {revision}: addressed the reviewer's feedback: {feedback}"]
    return "\n".join(text)


def draft(state: ReviewState) -> dict:
    topic, feedback = state["topic"], state.get("feedback") or None
    text = complete(f"Write a short article about {topic}." + (f" Reviewer: {feedback}" if feedback else ""),
                    offline=lambda _prompt: offline_draft(topic, feedback, state.get("revisions", 0)))
    return {"draft": text, "history": ["draft"]}


def review(state: ReviewState) -> dict:
    answer = steer(title=f"Approve the article about {state['topic']}", show=state["draft"],
                   channel=env("HAZEL_EXAMPLE_LG_CHANNEL", "console"),
                   actions=["approve", "edit", "reject", "feedback", "rewind"])
    if answer["action"] == "edit":
        return {"draft": answer["value"], "feedback": "", "history": [f"edited by {answer['by']}"]}
    if answer["action"] == "feedback":
        return {"feedback": answer["text"], "history": [f"feedback from {answer['by']}"]}
    if answer["action"] == "reject":
        return {"published": False, "history": [f"rejected by {answer['by']}: {answer['reason']}"]}
    return {"feedback": "", "history": [f"approved by {answer['by']}"]}


def revise(state: ReviewState) -> dict:
    revision = state.get("revisions", 0) + 1
    topic, feedback = state["topic"], state["feedback"]
    text = complete(f"Revise this article about {topic}: {feedback}\n\n{state['draft']}",
                    offline=lambda _prompt: offline_draft(topic, feedback, revision))
    return {"draft": text, "revisions": revision, "history": ["revise"]}


def publish(state: ReviewState) -> dict:
    return {"published": True, "history": ["publish"]}


def after_review(state: ReviewState) -> str:
    last = state["history"][-1]
    if last.startswith("feedback"):
        return "revise"
    if last.startswith("rejected"):
        return END
    return "publish"


def build() -> StateGraph:
    g = StateGraph(ReviewState)
    for node in (draft, review, revise, publish):
        g.add_node(node.__name__, node)
    g.add_edge(START, "draft")
    g.add_edge("draft", "review")
    g.add_conditional_edges("review", after_review, ["revise", "publish", END])
    g.add_edge("revise", "review")
    g.add_edge("publish", END)
    return g


graph = build().compile()  # no checkpointer: Hazel gives it a HazelSaver on its own database
register(graph, name="langgraph-review", version=1, description="Draft, review by an SME, revise, publish.")
