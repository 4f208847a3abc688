"""Not a test: a small driver of headless Chromium through its DevTools protocol (a websocket,
websocket-client), for the service's browser test: open a page, run an expression in it, set a
file input, take a screenshot. Enough to act as a person with a browser would, nothing more."""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

websocket = pytest.importorskip("websocket", reason="the browser test drives Chromium with websocket-client")

WAIT_S = 120  # a hang guard for Chromium's start and each command, on a busy machine


class Browser:
    def __init__(self, chromium: str, profile: Path, port: int):
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1280,1000",
                 f"--remote-debugging-port={port}", f"--user-data-dir={profile}", "about:blank"]  # fmt: skip
        self.process = subprocess.Popen([chromium, *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ids = itertools.count(1)
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as answer:
                    pages = [t for t in json.load(answer) if t["type"] == "page"]
                if pages:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                pytest.fail("Chromium's DevTools did not answer")
            time.sleep(0.3)
        self.socket = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=WAIT_S,
                                                  suppress_origin=True)  # fmt: skip
        self.send("Page.enable")

    def send(self, method: str, **params) -> dict:
        number = next(self.ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str):
        """The expression's value in the page; None while a navigation replaces the page."""
        try:
            found = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        except RuntimeError:
            return None
        return found.get("result", {}).get("value")

    def open(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.until(f"location.href === {json.dumps(url)} && document.readyState === 'complete'", f"open {url}")

    def until(self, expression: str, what: str, stall_s: float = WAIT_S):
        """Evaluate until the value is true (a page that reloads itself is evaluated again)."""
        deadline = time.monotonic() + stall_s
        while not (value := self.evaluate(expression)):
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not true after {stall_s:.0f} s: {expression}")
            time.sleep(0.3)
        return value

    def set_file(self, selector: str, path: Path) -> None:
        root = self.send("DOM.getDocument")["root"]["nodeId"]
        node = self.send("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
        self.send("DOM.setFileInputFiles", nodeId=node, files=[str(path)])

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        if getattr(self, "socket", None):
            self.socket.close()
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
