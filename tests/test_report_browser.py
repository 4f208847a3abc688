"""The student's report as a browser shows it: headless Chromium renders it to a PNG, and the
picture holds the where-is-it-wrong map (red cells) and the speed bars (blue), offline."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from grader.judging import verdicts as judging
from grader.reporting import report
from grader.messages.reports import Activity, BenchReport, Timings
from grader.reporting.results import Grade, TestResult
from grader.assignment.loading import load_assignments
from test_report import _class_grade, _grade

MAP_RED = (179, 38, 30)  # a fully wrong cell of the map
BAR_BLUE = (52, 101, 164)  # the bar of your time
STATUS_PARTIAL = (154, 103, 0)  # a part that lost some points says "partial" in this colour


BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _installed() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def _chromium() -> str:
    """Chromium's path; where it is missing, Debian's package is installed when this runs as root
    with apt-get (about 25 s on a fresh Debian 12 machine), and otherwise the test skips, saying why."""
    if path := _installed():
        return path
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("no Chromium here, and no root apt-get to install it (Debian: apt-get install chromium); "
                    "the report's HTML is tested in test_report.py")  # fmt: skip
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        except subprocess.TimeoutExpired:
            pytest.skip(f"Chromium could not be installed: {' '.join(command)} took over 15 minutes")
        if done.returncode != 0:
            pytest.skip(f"Chromium could not be installed ({' '.join(command)}: {done.stderr.strip()[-300:]})")
    return _installed() or pytest.skip("apt-get installed chromium, yet no browser is on the PATH")


def _pillow():
    try:
        from PIL import Image
    except ImportError:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "pillow"], capture_output=True)
        if done.returncode != 0:
            pytest.skip("Pillow, needed to read the screenshot, could not be installed")
        from PIL import Image
    return Image


FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]


def measure(chromium: str, page, script: str, width: int = 1280, height: int = 800):
    """What `script` (a JavaScript expression) gives once Chromium has laid `page` out at
    width x height, read back as JSON."""
    probe = page.with_name(page.stem + "-measured.html")
    wrapper = f"<script>document.body.insertAdjacentHTML('beforeend', '<pre id=measured>' + JSON.stringify({script}) + '</pre>');</script>"
    probe.write_text(page.read_text().replace("</body>", wrapper + "</body>"))
    dom = subprocess.run([chromium, *FLAGS, f"--window-size={width},{height}", "--virtual-time-budget=2000", "--dump-dom",
                          probe.as_uri()], capture_output=True, text=True, timeout=120)  # fmt: skip
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


def screenshot(chromium: str, page, png, width: int = 1280, height: int | None = None) -> None:
    """`page` at `width` px, as tall as its content (or `height`), to `png`."""
    height = height or measure(chromium, page, "document.documentElement.scrollHeight", width)
    subprocess.run([chromium, *FLAGS, f"--window-size={width},{height}", f"--screenshot={png}", page.as_uri()],
                   capture_output=True, timeout=120)  # fmt: skip
    assert png.exists() and png.stat().st_size > 10_000, f"no screenshot of {page}"


def _count_near(pixels: np.ndarray, colour: tuple[int, int, int], slack: int) -> int:
    return int((np.abs(pixels - np.array(colour)) <= slack).all(axis=1).sum())


def test_report_renders_in_a_browser_with_its_map_and_bars(tmp_path):
    chromium, image = _chromium(), _pillow()
    page = tmp_path / "report.html"
    page.write_text(report.render_html(_grade()))  # how long that takes: tests/bench_report.py
    assert page.stat().st_size <= 500_000, page.stat().st_size
    png = tmp_path / "report.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1000,1600"]
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    subprocess.run([chromium, *flags, f"--screenshot={png}", page.as_uri()], capture_output=True, timeout=120)
    shutil.copy(png, tmp_path.parent / "report-screenshot.png")  # kept beside the test's folder, to look at
    assert "Where it is wrong" in dom.stdout and dom.stdout.count("<svg") == 4, dom.stderr[-2000:]
    assert png.exists() and png.stat().st_size > 10_000
    pixels = np.asarray(image.open(png).convert("RGB"), dtype=np.int32).reshape(-1, 3)
    reds = _count_near(pixels, MAP_RED, slack=40)
    blues = _count_near(pixels, BAR_BLUE, slack=10)
    assert reds > 100, "the map's wrong cells did not show"
    assert blues > 1000, "the speed bars did not show"


# Appended to a copy of the page: where each part's row of the glance table lies on the first screen.
LAYOUT = """<script>
const rows = [...document.querySelectorAll("#glance tr[data-part]")];
const out = rows.map(r => [r.dataset.part, Math.round(r.getBoundingClientRect().bottom)]);
document.body.insertAdjacentHTML("beforeend", "<pre id=layout>" + JSON.stringify([innerHeight, out]) + "</pre>");
</script>"""


def test_the_first_screen_shows_every_parts_points_and_status(tmp_path):
    """At 1280x800, the size of a laptop's browser, every part's row (points, status, what failed,
    speed) is on screen before any scrolling, whatever the report holds below."""
    chromium, image = _chromium(), _pillow()
    grade = _class_grade()
    parts = {(t.assignment, t.part) for t in grade.tests}
    page = tmp_path / "report.html"
    page.write_text(report.render_html(grade).replace("</body>", LAYOUT + "</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,800"]
    dom = subprocess.run([chromium, *flags, "--virtual-time-budget=2000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    height, rows = json.loads(html.unescape(found.group(1)))
    assert {tuple(part.split("/")) for part, _ in rows} == parts and len(parts) >= 10
    below = {part: bottom for part, bottom in rows if bottom > height}
    assert not below, f"rows below the first screen ({height} px): {below}"
    png = tmp_path / "top.png"
    subprocess.run([chromium, *flags, f"--screenshot={png}", page.as_uri()], capture_output=True, timeout=120)
    shutil.copy(png, tmp_path.parent / "report-first-screen.png")  # kept beside the test's folder, to look at
    pixels = np.asarray(image.open(png).convert("RGB"), dtype=np.int32).reshape(-1, 3)
    assert _count_near(pixels, STATUS_PARTIAL, slack=30) > 50, "the parts that lost points did not show as partial"


# Appended to a copy of the page: each speed bar's width on screen, in CSS pixels.
BARS = """<script>
const bars = [...document.querySelectorAll("svg.chart rect.bar")].map(r => r.getBoundingClientRect().width);
document.body.insertAdjacentHTML("beforeend", "<pre id=bars>" + JSON.stringify(bars) + "</pre>");
</script>"""


def test_no_speed_bar_flattens_beside_a_fused_chain(tmp_path):
    """bias_gelu_scale at 15.9x torch beside kernels at 0.5x to 2x: on the chart's log scale every bar
    shows as a bar in the browser, and a factor of two is as long below 1x as above it."""
    from test_report import _speed

    chromium = _chromium()
    ratios = (0.5, 1.0, 2.0, 15.9)
    tests = [_speed(f"p{i}", {"bytes": 10**8}, 0.1, 0.1 * ratio) for i, ratio in enumerate(ratios)]
    page = tmp_path / "report.html"
    page.write_text(report.render_html(Grade("s", tests, {"device": "cuda", "tier": "GPU"}, 1.0)).replace(
        "</body>", BARS + "</body>"))  # fmt: skip
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,800"]
    dom = subprocess.run([chromium, *flags, "--virtual-time-budget=2000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    found = re.search(r'<pre id="bars">(.*?)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    half, even, double, fused = json.loads(html.unescape(found.group(1)))
    assert min(half, even, double) >= 30, f"a bar flattened to a sliver: {half, even, double} px beside {fused} px"
    assert abs((double - even) - (even - half)) <= 1.0, "each factor of two one step on the axis"
