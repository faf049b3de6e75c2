"""Every built page in real headless Chromium: images decode, no console errors, tables present.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages
separated by NUL bytes on file descriptors 3 and 4), so the test needs only the standard library.
It skips when Chromium is missing, except under CI (CI=true), where that is a failure.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import sitebuild  # noqa: E402

pytestmark = pytest.mark.browser

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe"]
TIMEOUT = 30.0

# Runs in the page: wait until every <img> has finished loading, then report what the DOM holds.
PROBE = """
(async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(img => img.complete ? null : new Promise(done => {
    img.addEventListener('load', done); img.addEventListener('error', done);
  })));
  return JSON.stringify({
    title: document.title,
    images: imgs.map(img => [img.getAttribute('src'), img.naturalWidth]),
    tables: document.querySelectorAll('article table').length,
    headings: document.querySelectorAll('article h1').length,
  });
})()
"""


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """A minimal DevTools-protocol client over Chromium's debugging pipe."""

    def __init__(self, exe: str, profile: Path):
        child_in, self._to_child = os.pipe()
        self._from_child, child_out = os.pipe()
        # Move the child's ends above 9 so `3<&` / `4>&` cannot clobber one with the other.
        child_in, child_out = (_high_fd(fd) for fd in (child_in, child_out))
        # Chromium reads commands on fd 3 and writes replies on fd 4; bash puts them there
        # (dash cannot redirect from descriptors above 9).
        self.proc = subprocess.Popen(
            [shutil.which("bash") or "/bin/bash", "-c",
             f'exec "$0" "$@" 3<&{child_in} 4>&{child_out}', exe, *FLAGS,
             f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(child_in, child_out))
        os.close(child_in)
        os.close(child_out)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable", session=True)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from Chromium")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the debugging pipe")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: bool = False) -> dict:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + TIMEOUT
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._read_message(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def visit(self, url: str) -> tuple[dict[str, Any], list[str]]:
        """Load `url`; return the probe's findings and the console / log errors seen."""
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_for("Page.loadEventFired")
        result = self.call("Runtime.evaluate", {"expression": PROBE, "awaitPromise": True,
                                                "returnByValue": True}, session=True)
        time.sleep(0.2)  # let late console messages arrive
        self.call("Runtime.evaluate", {"expression": "0"}, session=True)
        return json.loads(result["result"]["value"]), _errors(self.events)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)


def _high_fd(fd: int) -> int:
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                              for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            out.append("exception: " + params.get("exceptionDetails", {}).get("text", ""))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            out.append(f"log: {entry.get('text')} {entry.get('url', '')}")
    return out


@pytest.fixture(scope="module")
def chromium() -> str:
    exe = find_chromium()
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Chromium is required under CI (apt-get install chromium)")
        pytest.skip("Chromium not installed (apt-get install chromium); set CI=true to require it")
    return exe


@pytest.fixture(scope="module")
def served_site():
    built = sitebuild.shared_site()
    assert built.build.returncode == 0, built.build.stderr
    handler = functools.partial(_QuietHandler, directory=str(built.site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield built.site, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


def test_every_page_loads_images_without_console_errors(chromium, served_site, tmp_path):
    site, base = served_site
    pages = sorted(p.relative_to(site).parent.as_posix() for p in site.rglob("index.html"))
    assert "benchmarks/cpu" in pages and "benchmarks/gpu" in pages
    browser = Browser(chromium, tmp_path / "profile")
    try:
        seen = {}
        for page in pages:
            url = f"{base}/{'' if page == '.' else page + '/'}"
            found, errors = browser.visit(url)
            assert not errors, f"{url}: {errors}"
            assert found["headings"] == 1, url
            broken = [src for src, width in found["images"] if width <= 0]
            assert not broken, f"{url}: images that did not decode: {broken}"
            seen[page] = found
    finally:
        browser.close()
    assert len(seen["benchmarks/cpu"]["images"]) >= 10
    assert seen["benchmarks/cpu"]["tables"] >= 10
    assert seen["benchmarks/gpu"]["tables"] >= 5 and seen["benchmarks/gpu"]["images"]
    assert seen["benchmarks"]["tables"] >= 2  # headline speedups + run environments


def test_probe_catches_a_broken_image(chromium, served_site, tmp_path):
    """The check can fail: a page with a missing image is reported as broken."""
    site, base = served_site
    broken = site / "broken.html"
    broken.write_text('<html><body><h1>x</h1><img src="missing.svg"></body></html>')
    browser = Browser(chromium, tmp_path / "profile")
    try:
        found, errors = browser.visit(f"{base}/broken.html")
    finally:
        browser.close()
        broken.unlink()  # the site is shared with the build tests
    assert found["images"] == [["missing.svg", 0]]
    assert any("404" in e or "Failed to load" in e for e in errors), errors
