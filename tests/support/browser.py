"""One headless Chromium for all the page tests of a session, driven over the DevTools
protocol on a pipe (`--remote-debugging-pipe`: commands in on fd 3, answers out on fd 4,
each message JSON ended by a NUL byte), so a test opens a page in a new tab instead of
starting a browser (a launch costs 1-5 s here; the page tests open about 40 pages).

Why no library: Playwright and pyppeteer talk to Chromium over a websocket and bring
their own browser builds or a Node driver; the pipe needs nothing but the standard
library and Debian's chromium.

`Browser.start(profile)`; `browser.open(page, window, fragment)` loads a file in a fresh
tab sized `window`, waits for its load and for its script to set `<body data-ready="1">`
(at most `settle_s`), and gives a `Tab`: `dom()` (the serialized document, as
`--dump-dom` prints it), `errors` (console errors and uncaught exceptions),
`screenshot(path)` (a PNG of the viewport) and `close()`. `close()` stops the browser.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chromium import CHROMIUM

READY = """new Promise(done => {
  const began = Date.now();
  (function look() {
    if ((document.body && document.body.dataset.ready === "1") || Date.now() - began > LIMIT)
      done(true);
    else setTimeout(look, 10);
  })();
})"""


class BrowserError(RuntimeError):
    """Chromium answered a command with an error, or stopped answering."""


@dataclass
class Browser:
    process: subprocess.Popen[bytes]
    commands: Any  # file object: our end of fd 3
    answers: Any  # file object: our end of fd 4
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    events: list[dict[str, Any]] = field(default_factory=list)
    buffer: bytes = b""

    @classmethod
    def start(cls, profile: Path) -> Browser:
        if CHROMIUM is None:
            raise BrowserError(
                "this test needs Debian's chromium: apt-get install -y chromium (.ci/run does)"
            )
        to_chromium_r, to_chromium_w = os.pipe()
        from_chromium_r, from_chromium_w = os.pipe()

        def child_fds() -> None:
            # Chromium reads fd 3 and writes fd 4; our pipes may be any numbers, 3 and 4
            # among them, so they go through free high numbers first. (Popen closes the
            # fds not in pass_fds after this runs: 3 and 4 are the ones kept.)
            os.dup2(to_chromium_r, 1000)
            os.dup2(from_chromium_w, 1001)
            os.dup2(1000, 3)
            os.dup2(1001, 4)

        process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--force-device-scale-factor=1",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=child_fds,  # a test helper: no threads of ours at launch
        )
        os.close(to_chromium_r)
        os.close(from_chromium_w)
        return cls(process, os.fdopen(to_chromium_w, "wb"), os.fdopen(from_chromium_r, "rb"))

    def send(self, method: str, params: dict[str, Any] | None = None, session: str = "") -> Any:
        """One command; its result (events that arrive meanwhile are kept)."""
        ident = next(self.ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.commands.write(json.dumps(message).encode() + b"\0")
        self.commands.flush()
        while True:
            answer = self._read()
            if answer.get("id") == ident:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_event(self, method: str, session: str, timeout_s: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            for index, event in enumerate(self.events):
                if event.get("method") == method and event.get("sessionId") == session:
                    return self.events.pop(index)
            if time.monotonic() > deadline:
                raise BrowserError(f"no {method} within {timeout_s} s")
            self.events.append(self._read())

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            chunk = os.read(self.answers.fileno(), 1 << 16)
            if not chunk:
                raise BrowserError(f"Chromium stopped (exit code {self.process.poll()})")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)  # type: ignore[no-any-return]

    def open(
        self,
        page: Path,
        window: tuple[int, int] = (1400, 1500),
        fragment: str = "",
        settle_s: float = 5.0,
    ) -> Tab:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.send(domain, session=session)
        width, height = window
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        self.send("Page.navigate", {"url": page.as_uri() + fragment}, session)
        self.wait_event("Page.loadEventFired", session)
        self.send(
            "Runtime.evaluate",
            {
                "expression": READY.replace("LIMIT", str(int(settle_s * 1000))),
                "awaitPromise": True,
            },
            session,
        )
        return Tab(self, target, session)

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):  # it may have stopped already
            self.send("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.commands.close()
        self.answers.close()


@dataclass
class Tab:
    browser: Browser
    target: str
    session: str

    @property
    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions of this tab so far."""
        found = []
        for event in self.browser.events:
            if event.get("sessionId") != self.session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                found.append(f"exception: {details.get('exception', {}).get('description')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                found.append(f"console.error: {[a.get('value') for a in params.get('args', [])]}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                found.append(f"log: {params['entry'].get('text')}")
        return found

    def dom(self) -> str:
        """The document as `--dump-dom` prints it (after the page's script ran)."""
        result = self.browser.send(
            "Runtime.evaluate",
            {"expression": "document.documentElement.outerHTML", "returnByValue": True},
            self.session,
        )
        return str(result["result"]["value"])

    def screenshot(self, path: Path) -> None:
        """The viewport as a PNG at `path`."""
        data = self.browser.send("Page.captureScreenshot", {"format": "png"}, self.session)
        path.write_bytes(base64.b64decode(data["data"]))

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})
        self.browser.events = [e for e in self.browser.events if e.get("sessionId") != self.session]
