"""Runnable example workflows (``HAZEL_WORKFLOWS=examples.migration_plan``)."""
