"""Operations: outbox delivery, notification hooks, scheduler and timers, metrics, logs, retention, workers."""
