"""``bench.langgraph_saver`` (item 12) on a small graph, on SQLite and PostgreSQL, so that it cannot rot: both savers
run item 8's workload and every figure is measured. Bytes are asserted (they do not depend on the machine's
load); times are only measured (bench code never judges speed in tests)."""

from __future__ import annotations

import pytest

from bench import langgraph_saver

pytestmark = pytest.mark.skipif(langgraph_saver.available() is not None, reason=str(langgraph_saver.available()))


def test_both_savers_are_measured_and_hazel_stores_a_fraction_of_the_bytes(backend) -> None:  # noqa: ANN001
    result = langgraph_saver.compare(backend, 60)
    for cost in (result.hazel, result.langgraph):
        assert cost.per_step_us > 0 and cost.first20_us > 0 and cost.last20_us > 0
        assert cost.bytes_per_checkpoint is not None and cost.bytes_per_checkpoint > 0
    assert result.step_ratio > 0
    # at 60 steps LangGraph's savers store the whole list (~30 KB on average) per checkpoint, HazelSaver its new
    # item and a patch (~2-5 KB with the row, the pending writes and the indexes); 500 steps give ~0.02
    assert result.bytes_ratio < 0.25, result


def test_the_command_prints_one_line_per_size(capsys) -> None:  # noqa: ANN001
    assert langgraph_saver.main(["--quick", "--steps", "8", "12", "--backend", "sqlite"]) == 0
    out = capsys.readouterr().out
    assert "SqliteSaver" in out and out.count("\n| 8 |") == 1 and out.count("\n| 12 |") == 1
