"""Screenshots of `crossbuild serve` for docs/screenshots/: two real builds of the bundled example started from the
page, then the runs list, a run page, the statistics and an evaluation report, in Debian's chromium (headless).

    .venv/bin/python scripts/screenshots.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS, start_server, stop_server  # noqa: E402
from tests.web.test_browser import start_from_page  # noqa: E402


def main() -> None:
    out = ROOT / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp), "--reports", str(ROOT / "docs" / "results"))
        try:
            shutil.copytree(ROOT / "examples" / "libcalc", server.root / "libcalc")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                for target in ("riscv64-linux-musl", "aarch64-linux-musl"):
                    start_from_page(page, server, str(server.root / "libcalc"), target)
                    page.wait_for_selector("#status.verified", timeout=600_000)
                page.locator(".call", has=page.locator("summary", has_text="cmake -S src")).locator("summary").click()
                page.screenshot(path=out / "run.png", full_page=True)
                page.goto(server.url + "/")
                page.screenshot(path=out / "runs.png")
                page.goto(server.url + "/stats")
                page.screenshot(path=out / "stats.png", full_page=True)
                page.goto(server.url + "/reports/dev-aarch64-1aa23df/")
                page.screenshot(path=out / "report.png")
                browser.close()
        finally:
            stop_server(server)
    print("written:", ", ".join(str(p.relative_to(ROOT)) for p in sorted(out.glob("*.png"))))


if __name__ == "__main__":
    main()
