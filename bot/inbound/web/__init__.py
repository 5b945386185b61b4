"""The run pages (``hazel serve``): ``/runs``, ``/runs/{id}`` and the pages under it, ``/login``; the
signed "View run" links of Slack cards, Jira issues and ``hazel link``. See ``bot.inbound.web.routes``."""

from bot.inbound.web.links import LinkError, Signer, link_maker
from bot.inbound.web.routes import web_router

__all__ = ["LinkError", "Signer", "link_maker", "web_router"]
