"""A headless Chromium for the browser tests (the `browser` fixture, a pytest plugin of tests/conftest.py), the
demo users' password, logging in, and waiting on a run's progress box. Screenshots go to ARTIFACTS.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
PASSWORD = "browser-test-pw"
RUN_TIMEOUT_MS = 300_000


def chromium() -> str:
    """Debian's chromium, installed when missing (Playwright's own browser download is not reachable)."""
    path = shutil.which("chromium")
    if path is None:
        subprocess.run(["apt-get", "install", "-y", "chromium"], check=True, capture_output=True)
        path = shutil.which("chromium")
    assert path, "chromium is not installed and apt-get could not install it"
    return path


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium, one per test module (its pages share nothing across modules)."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an asyncio loop on this thread, which makes Django refuse ORM calls here
    # ("async context"); the test's own ORM calls are plain synchronous ones, as Django's docs allow.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=["--no-sandbox"])
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def login(browser, url: str, username: str):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/")  # every page needs a login
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")
    return page


def wait_for_run(page, state: str = "succeeded") -> str:
    """Watch the progress box until the run is final and the page has reloaded with its new sample."""
    page.wait_for_function("() => ['succeeded','failed','refused'].includes("
                           "document.getElementById('progress-state').textContent.trim())", timeout=RUN_TIMEOUT_MS)
    final = page.inner_text("#progress-state").strip()
    assert final == state, page.inner_text("#progress-detail")
    page.wait_for_url(re.compile(r".*[?&]done=\d+"), timeout=60_000)
    page.wait_for_function("() => document.getElementById('progress-state').textContent.trim() === "
                           f"'{state}'", timeout=30_000)
    return page.inner_text("#completion").strip()
