"""crossbuild serve in a real browser (Debian's chromium, headless): a build started from the page is watched live
to VERIFIED and its page replayed; four builds at once each show only their own story; a cancelled build stops
while another goes on."""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest

from tests.conftest import EXAMPLE

pytestmark = pytest.mark.slow  # real builds with zig, the sandbox and qemu

BUILD_S = 600_000  # ms a build may take on a loaded 2-core machine


def start_from_page(page, server, source: str, target: str = "aarch64-linux-musl") -> str:
    page.goto(server.url + "/")
    page.fill("#source", source)
    page.select_option("#target", target)
    page.click("#start")
    page.wait_for_url(re.compile(r"/runs/[0-9]{14}-[0-9a-f]{8}$"), timeout=30_000)
    return page.url.rsplit("/", 1)[1]


def test_a_build_started_from_the_page_is_watched_live_to_verified_and_replayed(server, browser):
    shutil.copytree(EXAMPLE, server.root / "libcalc")
    page = browser.new_page()
    run_id = start_from_page(page, server, str(server.root / "libcalc"))
    # live: a tool call shows up while the run is still going (polled every frame: on a warm machine the whole
    # build takes seconds, so reading the status once after the first call could already find it verified)
    page.wait_for_function("document.querySelector('.call') !== null && "
                           "document.querySelector('#status').textContent === 'running'", timeout=BUILD_S)
    page.wait_for_selector("#status.verified", timeout=BUILD_S)
    assert "VERIFIED" in page.locator("#outcome").inner_text()
    assert page.locator("#artifacts td", has_text="libcalc.a").count() == 1
    assert "passed" in page.locator("#smoke-runs").inner_text()
    assert "test (run by ctest)" in page.locator("#smoke-runs").inner_text()  # the project's own harness ran it
    assert page.locator("#proof").inner_text().startswith("proof: tested (1 of 1 test programs passed")
    calls = page.locator(".call").count()
    assert calls >= 4 and page.locator(".call.failed").count() == 0
    # the full log of the configure step, read from the workspace a page at a time
    configure = page.locator(".call", has=page.locator("summary", has_text="cmake -S src -B build"))
    configure.locator("summary").click()
    configure.locator(".open-log").click()
    # the log arrives by a fetch into a hidden <pre>: wait for its text (reading it at once raced the fetch under load)
    configure.locator("pre.log", has_text="Build files have been written to").wait_for(timeout=30_000)
    # the runs list shows it, and its page is the same story, replayed from the trace
    page.goto(server.url + "/")
    row = page.locator(f"tr[data-run='{run_id}']")
    assert "verified" in row.inner_text()
    row.locator("a").click()
    page.wait_for_selector("#status.verified", timeout=30_000)
    assert page.locator(".call").count() == calls
    assert page.locator("#proof").inner_text().startswith("proof: tested")  # from the trace too
    assert page.locator("#cancel").count() == 0


NO_TESTS = """cmake_minimum_required(VERSION 3.10)
project(calc3 C)
add_library(calc3 SHARED calc3.c)
install(TARGETS calc3)
"""


def test_four_builds_at_once_each_page_shows_only_its_own_story(server, browser):
    pages, ids = [], []
    for i in range(3):
        shutil.copytree(EXAMPLE, server.root / f"calc{i}")
    (server.root / "calc3").mkdir()  # a library without tests: exercised by crossbuild's probe
    (server.root / "calc3" / "CMakeLists.txt").write_text(NO_TESTS)
    (server.root / "calc3" / "calc3.c").write_text("int calc3(int x) { return 3 * x; }\n")
    for i in range(4):
        page = browser.new_page()
        ids.append(start_from_page(page, server, str(server.root / f"calc{i}")))
        pages.append(page)
    for page in pages:
        page.wait_for_selector("#status.verified", timeout=BUILD_S)
    for i, (page, run_id) in enumerate(zip(pages, ids, strict=True)):
        # the whole story, the calls' folded arguments too: a call's summary cuts a long command short, so the
        # workspace path in the configure line may end before the workspace's name (how much shows depends on
        # where the tests run); the full command is in its arguments
        story = page.locator("#timeline").text_content()
        assert f"/root/calc{i}" in story and f"calc{i}-aarch64-linux-musl-{run_id}" in story  # its own...
        for j, other in enumerate(ids):
            if j != i:  # ... and nobody else's
                assert other not in story and f"/calc{j}-" not in story and f"/root/calc{j}" not in story
    assert len(set(ids)) == 4
    assert pages[0].locator("#proof").inner_text().startswith("proof: tested (")
    assert pages[3].locator("#proof").inner_text().startswith("proof: exercised (1 of 1 products ran on the target")
    assert "passed: dlopen (RTLD_NOW) and dlsym of its" in pages[3].locator("#probe-runs").inner_text()


SLOW_S = 317  # the cancelled build's command: `sleep 317`


def test_cancelling_one_build_from_its_page_leaves_the_other_running(server, browser):
    slow = server.root / "slow"
    slow.mkdir()
    (slow / "main.c").write_text("int main(void){return 0;}\n")
    (slow / "Makefile").write_text(f"all:\n\tsleep {SLOW_S}\n\t$(CC) -o prog main.c\n")
    shutil.copytree(EXAMPLE, server.root / "libcalc")
    slow_page, other_page = browser.new_page(), browser.new_page()
    start_from_page(slow_page, server, str(slow))
    make = slow_page.locator(".call", has=slow_page.locator("summary", has_text="make"))
    make.locator(".state.running").wait_for(timeout=BUILD_S)  # the long make is running now
    # what the running call is doing, beside the status (the trace has a call only once it has ended)
    slow_page.locator("#activity", has_text=re.compile(r"^\d{4}-make: make")).wait_for(timeout=30_000)
    start_from_page(other_page, server, str(server.root / "libcalc"))
    other_page.wait_for_selector(".call", timeout=BUILD_S)
    slow_page.click("#cancel")
    slow_page.wait_for_selector("#status.cancelled", timeout=60_000)
    assert slow_page.locator("#activity").is_hidden()
    assert other_page.locator("#status").inner_text() in ("running", "verified")
    other_page.wait_for_selector("#status.verified", timeout=BUILD_S)
    # on the host: the cancelled build's command was killed, not left running (a number no other test sleeps; the
    # whole sandbox's teardown is given a minute on a loaded machine, far below the sleep's own 317 s)
    deadline = time.monotonic() + 60
    while subprocess.run(["pgrep", "-f", f"sleep {SLOW_S}"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, f"the cancelled build's `sleep {SLOW_S}` is still running"
        time.sleep(0.5)
    assert "cancelled" in slow_page.locator("#outcome").inner_text().lower()
