"""The student's report as a browser shows it: headless Chromium renders it to a PNG, and the
picture holds the where-is-it-wrong map (red cells) and the speed bars (blue), offline."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from grader import report
from test_report import _grade

MAP_RED = (179, 38, 30)  # a fully wrong cell of the map
BAR_BLUE = (52, 101, 164)  # the bar of your time


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.skip("no Chromium here (Debian: apt-get install chromium); the report's HTML is tested in test_report.py")


def _pillow():
    try:
        from PIL import Image
    except ImportError:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "pillow"], capture_output=True)
        if done.returncode != 0:
            pytest.skip("Pillow, needed to read the screenshot, could not be installed")
        from PIL import Image
    return Image


def _count_near(pixels: np.ndarray, colour: tuple[int, int, int], slack: int) -> int:
    return int((np.abs(pixels - np.array(colour)) <= slack).all(axis=1).sum())


def test_report_renders_in_a_browser_with_its_map_and_bars(tmp_path):
    chromium, image = _chromium(), _pillow()
    started = time.perf_counter()
    html = report.render_html(_grade())
    render_s = time.perf_counter() - started
    page = tmp_path / "report.html"
    page.write_text(html)
    assert page.stat().st_size <= 500_000 and render_s <= 1.0, (page.stat().st_size, render_s)
    png = tmp_path / "report.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1000,1600"]
    dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    subprocess.run([chromium, *flags, f"--screenshot={png}", page.as_uri()], capture_output=True, timeout=120)
    shutil.copy(png, tmp_path.parent / "report-screenshot.png")  # kept beside the test's folder, to look at
    assert "Where it is wrong" in dom.stdout and dom.stdout.count("<svg") == 3, dom.stderr[-2000:]
    assert png.exists() and png.stat().st_size > 10_000
    pixels = np.asarray(image.open(png).convert("RGB"), dtype=np.int32).reshape(-1, 3)
    reds = _count_near(pixels, MAP_RED, slack=40)
    blues = _count_near(pixels, BAR_BLUE, slack=10)
    assert reds > 100, "the map's wrong cells did not show"
    assert blues > 1000, "the speed bars did not show"
