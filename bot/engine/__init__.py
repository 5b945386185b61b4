"""The engine: workflows, runs, steering, people and permissions. ``Hazel`` (``bot.engine.hazel``) is its boundary."""
