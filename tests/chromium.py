"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol: open a page, wait until its view is
drawn, read its text (in the page or in a sandboxed iframe, as an MCP host shows a view), take a screenshot, and
record every request the page made. The tests of server/views/ use it; .ci/run installs chromium."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Visit:
    text: str  # the drawn view's text (document.body.innerText)
    screenshot: bytes  # PNG
    requests: list[str]  # every URL the page asked for, the page itself included
    console: list[str] = field(default_factory=list)  # console messages and log entries (CSP reports among them)


class Chromium:
    """One headless browser for a test module."""

    def __init__(self) -> None:
        assert CHROMIUM is not None, "chromium is not installed (apt-get install -y chromium; .ci/run does it)"
        self.profile = tempfile.TemporaryDirectory(prefix="judge-views-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-port=0", "--disable-features=IsolateSandboxedIframes", "--disable-site-isolation-trials",
             f"--user-data-dir={self.profile.name}", "--window-size=1280,1000",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 30
        self.port = 0
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if match := re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line):
                self.port = int(match.group(1))
                break
        assert self.port, "chromium did not start its DevTools endpoint within 30 s"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.profile.cleanup()

    async def visit(self, url: str, *, headers: dict[str, str] | None = None, in_frame: bool = False,
                    script: str | None = None, timeout_s: float = 20.0) -> Visit:
        """Open `url` in a new tab; with `in_frame`, the view is the page's (sandboxed) iframe. `script`, when
        given, is run in the view once it is drawn (an attack's request, say) before the requests are read."""
        import httpx
        import websockets

        async with httpx.AsyncClient(trust_env=False) as http:
            tab = (await http.put(f"http://127.0.0.1:{self.port}/json/new?about:blank")).json()
        try:
            async with websockets.connect(tab["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024) as ws:
                return await _Tab(ws).visit(url, headers or {}, in_frame, script, timeout_s)
        finally:
            async with httpx.AsyncClient(trust_env=False) as http:
                await http.get(f"http://127.0.0.1:{self.port}/json/close/{tab['id']}")


class _Tab:
    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.requests: list[str] = []
        self.console: list[str] = []
        self.contexts: dict[int, str] = {}  # execution context id → frame id
        self.main_frame = ""

    def _event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.executionContextCreated":
            context = params["context"]
            if context.get("auxData", {}).get("isDefault"):
                self.contexts[context["id"]] = context["auxData"]["frameId"]
        elif method == "Runtime.consoleAPICalled":
            self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
        elif method == "Log.entryAdded":
            self.console.append(params["entry"]["text"])

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        await self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(await self.ws.recv())
            if msg.get("id") == ident:
                assert "error" not in msg, (method, msg["error"])
                return msg["result"]  # type: ignore[no-any-return]
            self._event(msg)

    async def pump(self, seconds: float) -> None:
        import anyio

        with anyio.move_on_after(seconds):
            while True:
                self._event(json.loads(await self.ws.recv()))

    async def evaluate(self, expression: str, frame: bool) -> Any:
        params: dict[str, Any] = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        if frame:
            others = [c for c, f in self.contexts.items() if f != self.main_frame]
            if not others:
                return None
            params["contextId"] = others[-1]
        result = await self.send("Runtime.evaluate", **params)
        return result.get("result", {}).get("value")

    async def visit(self, url: str, headers: dict[str, str], in_frame: bool, script: str | None,
                    timeout_s: float) -> Visit:
        for domain in ("Network", "Page", "Runtime", "Log"):
            await self.send(f"{domain}.enable")
        if headers:
            await self.send("Network.setExtraHTTPHeaders", headers=headers)
        self.main_frame = (await self.send("Page.navigate", url=url))["frameId"]
        drawn = "document.readyState === 'complete' && !!document.getElementById('view') && " \
                "!document.getElementById('waiting')"
        deadline = time.monotonic() + timeout_s
        while not await self.evaluate(drawn, in_frame):
            assert time.monotonic() < deadline, f"the view at {url} was not drawn within {timeout_s} s: {self.console}"
            await self.pump(0.1)
        if script is not None:
            await self.evaluate(script, in_frame)
        await self.pump(0.5)  # any request the page makes late is recorded too
        text = await self.evaluate("document.body.innerText", in_frame)
        height = await self.evaluate("Math.min(document.documentElement.scrollHeight, 4000)", False)
        await self.send("Emulation.setDeviceMetricsOverride", width=1280, height=int(height or 1000),
                        deviceScaleFactor=1, mobile=False)
        shot = await self.send("Page.captureScreenshot", format="png")
        return Visit(text=str(text), screenshot=base64.b64decode(shot["data"]), requests=list(self.requests),
                     console=list(self.console))
