"""Decisions, rewinds, retries and cancellations: the one path every channel takes to steer a run."""
