"""The review graph of ``tests.langgraph.graphs`` as workflow ``lg-review`` v1, for the CLI retention test."""

from tests.langgraph.graphs import review_graph, workflow

review = workflow(review_graph())
