"""The token of a signed run link never reaches the log: uvicorn's access log records each request's path with
its query (``GET /runs/ID?t=…``), and a link made with ``hazel link --for`` lets whoever holds it act as that
person until it expires. ``hazel serve``'s log handler (``bot.ops.logs.configure_logging``) redacts it, in text
and JSON logs."""

from __future__ import annotations

import io
from typing import Any

import httpx
import pytest

from bot.inbound.web import Signer, web_router
from bot.ops.logs import configure_logging
from bot.server.http import create_app
from tests.bot.web.scenario import run_with_two_rewinds, web_settings
from tests.support.engine import make_hazel
from tests.support.live import LiveServer
from tests.workflows.doc import doc_workflow



def _logged_app(db_url: str, log_format: str) -> tuple[Any, str, str, io.StringIO]:
    """The run pages' app over a steered run, logging (as ``hazel serve`` does) into the returned stream; with
    the run's id and a signed link token for alice."""
    hazel = make_hazel(db_url, doc_workflow())
    run_id = run_with_two_rewinds(hazel)
    settings = web_settings(HAZEL_LOG_FORMAT=log_format, HAZEL_LOG_LEVEL="info")
    stream = io.StringIO()
    configure_logging(settings, stream=stream)
    app = create_app(hazel, routers=[web_router(hazel, settings)])
    return app, run_id, Signer(settings).token(run_id, "alice", minted_by="olga"), stream


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_signed_link_is_logged_without_its_token(db_url: str, serve_logging: None, log_format: str) -> None:
    app, run_id, token, stream = _logged_app(db_url, log_format)
    with LiveServer(app, access_log=True) as server:
        opened = httpx.get(f"{server.url}/runs/{run_id}?t={token}", follow_redirects=False, timeout=30)
        assert opened.status_code == 303, opened.text  # the link worked (it drops its token: a redirect)
        tampered = httpx.get(f"{server.url}/runs/{run_id}?x=1&t={token[:-3]}abc", follow_redirects=False,
                             timeout=30)
        assert tampered.status_code == 401
    text = stream.getvalue()
    assert f"/runs/{run_id}?t=**********" in text, text  # the request is logged, its token is not
    assert "?x=1&t=**********" in text, text
    assert token not in text and token[:-3] not in text, text


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_token_under_another_spelling_of_its_key_is_not_logged_either(db_url: str, serve_logging: None,
                                                                       log_format: str) -> None:
    """The query parser decodes keys, so ``?%74=TOKEN`` opens the run as ``?t=`` does; uvicorn logs the path as
    the client sent it. Path parameters (``;t=``), an encoded separator (``%26t=``) and a double-encoded key
    (``%2574=``) are not accepted, but their token is valid all the same: none reaches the log."""
    app, run_id, token, stream = _logged_app(db_url, log_format)
    with LiveServer(app, access_log=True) as server:
        encoded = httpx.get(f"{server.url}/runs/{run_id}?%74={token}", follow_redirects=False, timeout=30)
        assert encoded.status_code == 303, encoded.text  # accepted: the key decodes to t
        for tail in (f";t={token}", f"?x=1%26t={token}", f"?%2574={token}", f"?x=1;t={token}"):
            httpx.get(f"{server.url}/runs/{run_id}{tail}", follow_redirects=False, timeout=30)
    text = stream.getvalue()
    assert f"/runs/{run_id}?%74=**********" in text, text
    assert f"/runs/{run_id};t=**********" in text, text
    assert text.count(f"/runs/{run_id}") >= 5, text  # every request was logged
    assert token not in text, text
    signature = token.rsplit(".", 1)[1]
    assert signature not in text, text
