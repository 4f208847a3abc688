"""The student's report as a browser shows it: headless Chromium renders it to a PNG, and the
picture holds the where-is-it-wrong map (red cells) and the speed bars (blue), offline."""

from __future__ import annotations

import os
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
