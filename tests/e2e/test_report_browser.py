"""The HTML report in headless Chromium, as a person sees it: it loads, every image loads, the console stays clean,
the first screen of a laptop (1366×900) shows the first benchmark's figure whole, its gender gaps included, every
figure has its alt text and its CSV, no page is wider than the window at 1366 px or on a 390 px phone (a table scrolls
in its box), the navigation takes one line on the phone, and the gender-gap tables fit 1366 px.

Needs the Debian packages chromium and chromium-driver; the session fixture installs them with
apt-get when they are missing (CI runs as root). Saves a screenshot of the first screen of the report
built from the repository's reports as reports/screenshot.png (not tracked by git; docs/first_screen.png is the
committed copy the docs show).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gece.io.settings.params import load_params
from gece.pipeline import report as report_stage

from ..conftest import ROOT

pytestmark = pytest.mark.slow

CHROME_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)
WIDTH = 1400
FIRST_SCREEN = (1366, 900)  # a common laptop viewport: the first figure must fit in it without scrolling
PHONE = (390, 844)  # a common phone viewport
SCREENSHOT = ROOT / "reports" / "screenshot.png"


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    """Paths of chromium and chromedriver, installed from Debian's packages when missing."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser and driver):
        if not shutil.which("apt-get") or os.geteuid() != 0:
            pytest.fail("chromium and chromedriver are missing: apt-get install chromium chromium-driver (as root)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"]):
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500, check=False)
            assert res.returncode == 0, f"{' '.join(cmd)} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
        browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert browser and driver
    return browser, driver


@pytest.fixture
def browser(chromium, tmp_path, monkeypatch):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_AVOID_STATS", "true")  # selenium's own telemetry: no network
    options = webdriver.ChromeOptions()
    options.binary_location = chromium[0]
    for arg in CHROME_ARGS:
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.add_argument(f"--window-size={WIDTH},1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=chromium[1]), options=options)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


def load(driver, page: Path) -> dict:
    """Open the page with every <details> expanded and every image loaded; report what failed."""
    driver.get(page.resolve().as_uri())
    driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    # the page loads its images lazily (when scrolled to): ask for all of them, to check every source
    driver.execute_script("document.querySelectorAll('img').forEach(i => { i.loading = 'eager'; })")
    deadline = time.time() + 60
    while time.time() < deadline:
        pending = driver.execute_script("return Array.from(document.images).filter(i => !i.complete).length")
        if pending == 0:
            break
        time.sleep(0.25)
    images = driver.execute_script(
        "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])"
    )
    return {
        "title": driver.title,
        "images": images,
        "broken": [src for src, complete, width in images if not complete or width == 0],
        "severe": [e for e in driver.get_log("browser") if e["level"] == "SEVERE"],
        "tables": driver.execute_script("return document.querySelectorAll('table').length"),
    }


def viewport(driver, size: tuple[int, int]) -> None:
    width, height = size
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def screenshot(driver, out: Path) -> None:
    """The first screen at 1366×900, as a reader opening the page sees it."""
    viewport(driver, FIRST_SCREEN)
    driver.execute_script("window.scrollTo(0, 0)")
    png = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(base64.b64decode(png["data"]))


# elements wider than the window, outside a box that scrolls them (a table's .scroll; on a phone the navigation, one
# line that scrolls sideways); SVG inside a figure is scaled to it
OVERFLOW = """
const W = window.innerWidth;
return [document.documentElement.scrollWidth, W,
  Array.from(document.querySelectorAll('body *'))
    .filter(e => !(e instanceof SVGElement) && !(e.parentElement && e.parentElement.closest('.scroll, nav'))
                 && e.getBoundingClientRect().right > W + 1)
    .slice(0, 5).map(e => e.tagName + '.' + e.className + ': ' + e.textContent.slice(0, 60))];
"""


def overflow(driver, page: Path) -> list:
    """At each width, what is wider than the window on ``page`` (every <details> open); empty when nothing is."""
    found = []
    for size in (FIRST_SCREEN, PHONE):
        viewport(driver, size)
        driver.get(page.resolve().as_uri())
        driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
        scroll_width, width, wide = driver.execute_script(OVERFLOW)
        if scroll_width > width or wide:
            found.append((page.name, size, scroll_width, wide))
    return found


def test_full_report_loads_without_missing_images_or_console_errors(browser, built_report):
    reports, result = built_report
    state = load(browser, reports / "index.html")
    assert state["title"].startswith("gece report")
    assert len(state["images"]) >= len(result["figures"]) - len(
        [p for p in result["figures"] if "calibration_" in p]  # the calibration figures are on its detail page
    )
    assert state["broken"] == []
    assert state["severe"] == []
    assert state["tables"] + sum(load(browser, reports / rel)["tables"] for rel in result["pages"]) > 20


def test_repository_report_in_the_browser(browser, reference_reports, tmp_path):
    """The report of the pipeline's reports of the reference runs (built afresh by the stage commands,
    tests/conftest.py: reference_reports), written into a temporary directory."""
    out = tmp_path / "report"
    report_stage.report_stage(
        load_params(reference_reports / "params.yaml"),
        reference_reports / "reports",
        reference_reports / "artifacts" / "scores",
        out,
        ROOT / "data.dvc",
        root=reference_reports,
    )
    state = load(browser, out / "index.html")
    assert state["broken"] == [] and state["severe"] == []
    assert len(state["images"]) > 18
    assert overflow(browser, out / "index.html") == []
    screenshot(browser, SCREENSHOT)
    assert SCREENSHOT.stat().st_size > 30_000


def test_the_first_screen_is_the_first_figure_and_nothing_overflows(browser, built_report):
    """At 1366×900 the first benchmark's figure is whole on the first screen; every figure has alt text stating its
    finding and a CSV; no page is wider than the window at 1366 or 390 px; every detail page index.html links
    loads, with its images and without console errors."""
    reports, result = built_report
    width, height = FIRST_SCREEN
    viewport(browser, FIRST_SCREEN)
    browser.get((reports / "index.html").resolve().as_uri())
    assert browser.execute_script("return [window.innerWidth, window.innerHeight, window.scrollY]") == [
        width,
        height,
        0,
    ]
    figures = browser.execute_script(
        "return Array.from(document.querySelectorAll('figure.answer')).map(f => { const r = f.querySelector('svg')"
        ".getBoundingClientRect(); const img = f.querySelector('[role=img]'); return [f.id, f.dataset.csv, "
        "img ? img.getAttribute('aria-label') : '', r.top, r.bottom, r.width]; })"
    )
    assert figures and figures[0][0].startswith("calibration_")  # the first benchmark's forest plot opens the page
    name, _, _, top, bottom, drawn_width = figures[0]
    assert top > 0 and bottom <= height and drawn_width > 500, f"{name} is not whole on the first screen"
    # which gender gaps are real: each run's gap with its interval at Holm's level, drawn on that first screen
    gaps = browser.execute_script(
        f'return Array.from(document.querySelectorAll(\'#{name} g[id*="-gap_"][id$="-ci"]\'))'
        ".map(g => g.getBoundingClientRect().bottom)"
    )
    assert len(gaps) >= 2 * 3 and max(gaps) <= height, gaps
    for name, csv, alt, *_ in figures:
        assert alt.startswith(name.split("_", 1)[1]) and ("lowest ECE" in alt or "stereotype share" in alt), alt
        assert (reports / csv).stat().st_size > 100, csv
    nav = browser.execute_script(
        "return Array.from(document.querySelectorAll('nav a')).map(a => a.getAttribute('href'))"
    )
    assert set(result["pages"]) <= set(nav)  # every detail page one click from the top
    problems = overflow(browser, reports / "index.html")
    for rel in result["pages"]:
        problems += overflow(browser, reports / rel)
    assert problems == []
    # on a phone the navigation is one line that scrolls sideways, not half the first screen
    viewport(browser, PHONE)
    browser.get((reports / "index.html").resolve().as_uri())
    assert browser.execute_script("return document.querySelector('nav').getBoundingClientRect().height") < 50
    # at 1366 px every column of the gender-gap tables is in view, the "Δ female − male (human)" the answers quote too
    viewport(browser, FIRST_SCREEN)
    browser.get((reports / "pages" / "gender_gap.html").resolve().as_uri())
    boxes = browser.execute_script(
        "return Array.from(document.querySelectorAll('.scroll')).map(e => [e.scrollWidth, e.clientWidth])"
    )
    assert boxes and all(wide <= shown for wide, shown in boxes), boxes
    for rel in result["pages"]:
        state = load(browser, reports / rel)
        assert state["title"].startswith("gece report: ")
        assert state["broken"] == [] and state["severe"] == [], (rel, state)
    assert load(browser, reports / "pages" / "calibration.html")["images"]  # the calibration figures moved along


def test_committed_report_in_the_browser(browser, workspace_reports):
    """The committed reports/index.html with the DVC-cached figures it shows, where `make repro` has put them
    (on a clean clone tests/test_git_outputs.py checks that every file the page links is in git or is an output
    of a pipeline stage)."""
    state = load(browser, workspace_reports / "index.html")
    assert state["broken"] == [] and state["severe"] == []
    assert state["images"]
