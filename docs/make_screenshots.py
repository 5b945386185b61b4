"""Make the README's screenshots of the run pages: ``.venv/bin/python docs/make_screenshots.py``.

A ``doc`` run with two rewinds (tests/bot/web/scenario.py) on a temporary SQLite file, ``hazel serve``'s app on
a loopback port, Debian's Chromium (``/usr/bin/chromium``) through Playwright, signed in by a link for alice
(made by the operator olga, as ``hazel link RUN --for alice`` makes it).
Writes docs/screenshots/{tree,diff,pending,phone}.png.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from bot.inbound.web import Signer, web_router  # noqa: E402
from bot.server.http import create_app  # noqa: E402
from tests.bot.web.scenario import run_with_two_rewinds, web_settings  # noqa: E402
from tests.support.engine import make_hazel  # noqa: E402
from tests.support.live import LiveServer  # noqa: E402
from tests.workflows.doc import doc_workflow  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        hazel = make_hazel(f"sqlite:///{tmp}/hazel.db", doc_workflow())
        run_id = run_with_two_rewinds(hazel)
        settings = web_settings()
        with LiveServer(create_app(hazel, routers=[web_router(hazel, settings)])) as server, \
                sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
            page = browser.new_page(viewport={"width": 1100, "height": 900}, device_scale_factor=1)
            page.goto(f"{server.url}/runs/{run_id}?t={Signer(settings).token(run_id, 'alice', minted_by='olga')}")
            page.locator("section.card", has_text="Checkpoint tree").screenshot(path=OUT / "tree.png")
            page.locator("#pending").screenshot(path=OUT / "pending.png")
            page.goto(f"{server.url}/runs/{run_id}/diff?a=3&b=7")
            page.screenshot(path=OUT / "diff.png", full_page=True)
            phone = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=1)
            phone.context.add_cookies(page.context.cookies())
            phone.goto(f"{server.url}/runs/{run_id}")
            phone.locator("section.card", has_text="Checkpoint tree").screenshot(path=OUT / "phone.png")
            browser.close()
        hazel.close()
    print(f"wrote {', '.join(sorted(p.name for p in OUT.glob('*.png')))} in {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
