"""Channels: where steering requests are posted and answered (console, Slack, Jira).

Each channel implements ``integrations.base.Channel``; it takes clients and settings as constructor arguments,
may import ``store.models`` (data only) and never imports ``bot``.
"""
