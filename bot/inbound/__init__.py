"""Inbound adapters: Slack (Bolt), the Jira webhook, the REST API and health. They verify, parse, call ``Hazel`` and render."""
