"""The HTML reports open in a real browser, offline, with every chart drawn and no script error.

``tokenplan plan --report`` (the default plan) and ``tokenplan report`` (a generate run, a bench
sweep and the plan JSON) are each loaded in headless Chromium with the network emulated off:
every plotly chart must have drawn its SVG with at least one trace, the console must hold no
SEVERE entry and no ``error`` event may fire. A full-page screenshot of each page is saved in the
test's temporary folder; with ``TOKENPLAN_REPORT_SCREENSHOT=PATH`` the plan report's top (table,
answer and first chart) is also saved to PATH — that is how docs/report.png is made.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
PLAN_CHARTS = ["chart-throughput", "chart-roofline", "chart-cost_time", "chart-memory", "chart-speedup"]
MEASURED_CHARTS = ["chart-bench_throughput", "chart-bench_latency", "chart-runs"]
ERROR_HOOK = "window.__errors=[];window.addEventListener('error',e=>window.__errors.push(String(e.message)));"
RENDERED = """
const divs = [...document.querySelectorAll('div.js-plotly-plot')];
return divs.map(d => [d.id, !!d.querySelector('svg.main-svg'),
                      d.querySelectorAll('g.trace, g.scatterlayer path.js-line, g.barlayer g.point').length]);
"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory, run_dir, bench_file, tokenplan_cmd) -> dict[str, Path]:
    """The default plan's report (and its JSON), then the measurements report beside that plan."""

    def _run(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([*tokenplan_cmd, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done

    out = tmp_path_factory.mktemp("reports")
    plan_json = out / "plan.json"
    plan_json.write_text(_run("plan", "--json", "--report", str(out / "plan.html")).stdout)
    _run("report", str(run_dir), "--plan", str(plan_json), "--bench", str(bench_file), "-o", str(out / "measured.html"))
    return {"plan": out / "plan.html", "measured": out / "measured.html"}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium through chromedriver, network emulated off, errors recorded from the start."""
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        missing = "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):  # .ci/run installs them: a skip there would hide a broken install
            pytest.fail(missing)
        pytest.skip(missing)
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0},
    )
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": ERROR_HOOK})
    yield driver
    driver.quit()


def _viewport(driver, height: int) -> None:
    """Size the window so that the page area (not the window) is 1280 × ``height`` pixels."""
    chrome = driver.execute_script("return window.outerHeight - window.innerHeight")
    driver.set_window_size(1280, int(height) + chrome)


def _open_and_check(driver, page: Path, charts: list[str], shot: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.as_uri())
    WebDriverWait(driver, 20).until(
        lambda d: (
            len(d.execute_script(RENDERED)) == len(charts) and all(svg for _, svg, _ in d.execute_script(RENDERED))
        )
    )
    rendered = driver.execute_script(RENDERED)
    assert [r[0] for r in rendered] == charts
    assert all(svg and traces > 0 for _, svg, traces in rendered), rendered
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe
    assert driver.execute_script("return window.__errors") == []
    _viewport(driver, driver.execute_script("return document.documentElement.scrollHeight"))
    shot.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(shot))
    driver.set_window_size(1280, 900)


def test_plan_report_renders_every_chart_offline_without_script_errors(browser, reports, tmp_path):
    shot = tmp_path / "report-full.png"
    _open_and_check(browser, reports["plan"], PLAN_CHARTS, shot)
    assert shot.stat().st_size > 50_000
    assert "Options compared" in browser.page_source and "Assumptions" in browser.page_source
    if os.environ.get("TOKENPLAN_REPORT_SCREENSHOT"):
        bottom = browser.execute_script(
            "window.scrollTo(0, 0); return "
            "document.querySelector('#chart-throughput svg.main-svg').getBoundingClientRect().bottom;"
        )
        _viewport(browser, bottom + 16)
        assert browser.save_screenshot(os.environ["TOKENPLAN_REPORT_SCREENSHOT"])


def test_measurements_report_renders_plan_bench_and_runs_offline(browser, reports, tmp_path):
    _open_and_check(browser, reports["measured"], MEASURED_CHARTS, tmp_path / "report-measured.png")
    assert browser.execute_script("return document.getElementById('chart-runs')._fullLayout.xaxis.type") == "category"
    text = browser.find_element("tag name", "body").text
    # bench level 512: 41,000 tok/s over 8 GPUs = 5,125 tok/s/GPU; run: 2.5 M tokens in 7,200 s = 347 tok/s
    assert "5,125" in text and "347" in text


@pytest.mark.parametrize("name", ["plan", "measured"])
def test_report_needs_no_network(reports, name):
    html = reports[name].read_text(encoding="utf-8")
    assert re.findall(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", html) == []
    assert re.findall(r"@import\s+url\(\s*[\"']?(?:https?:)?//", html) == []
    from plotly.offline import get_plotlyjs

    assert html.count(get_plotlyjs()[:300]) == 1  # plotly.js inlined, exactly once
