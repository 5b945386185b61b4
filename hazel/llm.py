"""One small function for LLM calls in workflow steps.

``complete`` calls an OpenAI-compatible chat completions endpoint (the ``openai`` package) when
``HAZEL_LLM_BASE_URL``, ``HAZEL_LLM_API_KEY`` and ``HAZEL_LLM_MODEL`` are all set, and otherwise the caller's
offline drafter, a deterministic function that must say in its output that it is one. So examples and tests
run with no network, and the same code talks to a real model when configured.
"""

from __future__ import annotations

import logging
from typing import Callable

from bot.settings import Settings

log = logging.getLogger("hazel.llm")
OFFLINE_NOTICE = "[offline drafter: no LLM configured; set HAZEL_LLM_BASE_URL, HAZEL_LLM_API_KEY, HAZEL_LLM_MODEL]"


def llm_configured(settings: Settings | None = None) -> bool:
    s = settings or Settings()
    return bool(s.llm_base_url and s.llm_api_key and s.llm_model)


def complete(prompt: str, *, offline: Callable[[str], str], system: str | None = None,
             settings: Settings | None = None, timeout_sec: float = 120.0, idempotency_key: str | None = None) -> str:
    """The model's answer to ``prompt`` (text), or ``offline(prompt)`` when no endpoint is configured.

    Raises:
        openai.OpenAIError: the endpoint failed (the step's retries apply).
    """
    s = settings or Settings()
    if not llm_configured(s):
        return offline(prompt)
    from openai import OpenAI

    client = OpenAI(base_url=s.llm_base_url, api_key=s.llm_api_key.get_secret_value(),  # type: ignore[union-attr]
                    timeout=timeout_sec, max_retries=2)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    response = client.chat.completions.create(model=s.llm_model, messages=messages,  # type: ignore[arg-type]
                                              extra_headers=headers)
    return response.choices[0].message.content or ""
