"""Graphs with parallel nodes for the CLI tests (``HAZEL_WORKFLOWS=tests.langgraph.workflows.parallel_graphs``):
``lg-pair`` (two interrupts in one super-step) and ``lg-fan`` (two nodes write one checkpoint, then a review)."""

from __future__ import annotations

from hazel.langgraph import register
from tests.langgraph.graphs import fan_graph, pair_graph

register(pair_graph(), name="lg-pair")
register(fan_graph(), name="lg-fan")
