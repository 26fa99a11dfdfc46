"""The views as a user meets them: a real `judge-mcp` over HTTP (demo model, two organizations), its tools
called through the real MCP client, and each view drawn by a real headless Chromium: as an MCP Apps view in a
sandboxed iframe fed by postMessage (a stand-in host page), and as a /ui/ web page behind the bearer check.
Each is checked for the run's brief and each judge's name and score, a non-blank screenshot, and that no request
left the page."""

from __future__ import annotations

import base64
import html
import io
import json
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chromium import Chromium, Visit
from tests.mcp_helpers import JUDGE_MCP, free_port, server_env, wait_for_port

# No skip without Chromium: tests/chromium.py fails saying how to install it (.ci/run does).
pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TOKENS = "tok-a=org-a,tok-am=org-a:member,tok-b=org-b:member"
BRIEF = "A red bicycle on a beach at dawn"
INSTRUCTION = "Explain recursion to a new programmer"
TEXTS = ["Recursion is a function that calls itself on a smaller input until a base case stops it.",
         "It is a loop.", "Recursion: see recursion."]


def png(color: str) -> str:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (96, 64), color).save(out, "PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


class Calls:
    """What one real server answered, kept for the tests of the module."""

    base: str
    tools: dict[str, Any]
    views: dict[str, tuple[str, str]]  # uri → (mime type, html)
    image_args: dict[str, Any]
    image: dict[str, Any]
    pair: dict[str, Any]
    rank: dict[str, Any]
    calibration: dict[str, Any]


async def _call(c: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await c.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Calls]:
    import anyio

    home = tmp_path_factory.mktemp("views")
    port = free_port()
    err = (home / "stderr.log").open("w")
    proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)], cwd="/", stdout=subprocess.DEVNULL,
                            stderr=err, env=server_env(home, JUDGE_MCP_MODEL="demo", JUDGE_MCP_TOKENS=TOKENS))
    try:
        assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
        calls = Calls()
        calls.base = f"http://127.0.0.1:{port}"
        anyio.run(_make_calls, calls)
        yield calls
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def _make_calls(calls: Calls) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": "Bearer tok-a"}, timeout=120)
    async with Client(streamable_http_client(f"{calls.base}/mcp", http_client=http)) as c:
        calls.tools = {t.name: t for t in (await c.list_tools()).tools}
        for name, template in (("Brand", "brand_compliance"), ("Composition", "composition")):
            await _call(c, "create_agent", {"name": name, "template_id": template})
        first = await _call(c, "evaluate_image", {"brief": BRIEF, "images": [png("firebrick"), png("steelblue")]})
        calls.image_args = {"brief": BRIEF, "images": [png("darkorange"), png("seagreen")], "run_id": first["run_id"]}
        calls.image = await _call(c, "evaluate_image", calls.image_args)
        calls.pair = await _call(c, "pairwise_compare", {"instruction": INSTRUCTION, "candidates": TEXTS[:2]})
        calls.rank = await _call(c, "rank_texts", {"instruction": INSTRUCTION, "candidates": TEXTS})
        dataset = [{"id": f"item-{i}", "text": TEXTS[i % 3], "instruction": INSTRUCTION,
                    "human_scores": [i % 5, (i * 3 + 1) % 5]} for i in range(12)]
        calls.calibration = await _call(c, "calibrate_judge", {"judge": "score_text", "dataset": dataset,
                                                               "rubric": "helpfulness", "background": False})
        calls.views = {}
        for resource in (await c.list_resources()).resources:
            if str(resource.uri).startswith("ui://"):
                content = (await c.read_resource(str(resource.uri))).contents[0]
                calls.views[str(resource.uri)] = (content.mime_type, content.text)


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    chromium = Chromium()
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def host_page(folder: Path, name: str, view_html: str, arguments: dict[str, Any], result: dict[str, Any]) -> str:
    """A stand-in MCP host: the view in a sandboxed iframe (scripts only, an opaque origin, as hosts frame it),
    answering its ui/initialize, then sending ui/notifications/tool-input and tool-result (SEP-1865)."""
    def script_json(value: Any) -> str:
        return json.dumps(value).replace("</", "<\\/")

    page = folder / f"host-{name}.html"
    page.write_text(f"""<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">
<iframe id="view" sandbox="allow-scripts" style="border:0;width:100%;height:1000px" srcdoc="{html.escape(view_html)}"></iframe>
<script>
var frame = document.getElementById("view"), args = {script_json(arguments)}, result = {script_json(result)};
window.addEventListener("message", function (ev) {{
  if (ev.source !== frame.contentWindow) return;
  var m = ev.data;
  if (m.method === "ui/initialize") frame.contentWindow.postMessage({{jsonrpc: "2.0", id: m.id, result: {{
    protocolVersion: "2026-01-26", hostInfo: {{name: "test-host", version: "1"}}, hostCapabilities: {{}}, hostContext: {{}}}}}}, "*");
  else if (m.method === "ui/notifications/initialized") {{
    frame.contentWindow.postMessage({{jsonrpc: "2.0", method: "ui/notifications/tool-input", params: {{arguments: args}}}}, "*");
    frame.contentWindow.postMessage({{jsonrpc: "2.0", method: "ui/notifications/tool-result", params: result}}, "*");
  }} else if (m.method === "ui/notifications/size-changed") frame.style.height = m.params.height + "px";
}});
</script></body></html>""", encoding="utf-8")
    return page.as_uri()


def assert_not_blank(shot: bytes, path: Path) -> None:
    from PIL import Image

    path.write_bytes(shot)
    image = Image.open(io.BytesIO(shot)).convert("RGB")
    assert image.width == 1280 and image.height >= 600
    colours = image.getcolors(maxcolors=1 << 22)
    assert colours is not None and len(colours) > 50  # text, badges, bars: not one flat colour
    white = max(count for count, colour in colours if colour == (255, 255, 255)) if any(
        colour == (255, 255, 255) for _, colour in colours) else 0
    assert white < 0.97 * image.width * image.height


def assert_no_request_left(visit: Visit, page_url: str) -> None:
    """Only the page itself (and the data: images it holds) was asked for."""
    assert [u for u in visit.requests if u != page_url and not u.startswith("data:")] == []


async def app_visit(browser: Chromium, served: Calls, shots: Path, uri: str, name: str, arguments: dict[str, Any],
                    result: dict[str, Any]) -> Visit:
    mime, view_html = served.views[uri]
    assert mime == "text/html;profile=mcp-app"
    url = host_page(shots, name, view_html, arguments, {"content": [{"type": "text", "text": json.dumps(result)}],
                                                        "structuredContent": result, "isError": False})
    visit = await browser.visit(url, in_frame=True)
    assert_not_blank(visit.screenshot, shots / f"app-{name}.png")
    assert_no_request_left(visit, url)
    return visit


def score_text(score: float, digits: int = 1) -> str:
    """A number as the views write it (`digits` decimals, an integer without)."""
    return str(int(score)) if float(score).is_integer() else f"{score:.{digits}f}"


# --- MCP Apps --------------------------------------------------------------------------------------------------

def test_judging_tools_link_their_views(served: Calls) -> None:
    links = {name: tool.meta["ui"]["resourceUri"] for name, tool in served.tools.items() if tool.meta and "ui" in tool.meta}
    assert links == {"evaluate_image": "ui://judge-mcp/image-run.html", "get_run": "ui://judge-mcp/image-run.html",
                     "pairwise_compare": "ui://judge-mcp/pairwise.html", "rank_texts": "ui://judge-mcp/ranking.html",
                     "calibrate_judge": "ui://judge-mcp/calibration.html",
                     "get_calibration": "ui://judge-mcp/calibration.html"}
    assert set(served.views) == set(links.values())


async def test_image_run_view_shows_the_brief_each_judge_and_score(browser: Chromium, served: Calls, shots: Path) -> None:
    visit = await app_visit(browser, served, shots, "ui://judge-mcp/image-run.html", "image-run",
                            served.image_args, served.image)
    assert BRIEF in visit.text
    assert len(served.image["evaluations"]) == 4  # two judges × two images
    for evaluation in served.image["evaluations"]:
        assert f"{evaluation['agent_name']}\n{score_text(evaluation['score'])}" in visit.text
        assert evaluation["top_issue"]["problem"] in visit.text
    assert "#1 winner" in visit.text and "ITERATIONS" in visit.text.upper()


async def test_pairwise_view_shows_both_candidates_and_each_order(browser: Chromium, served: Calls, shots: Path) -> None:
    visit = await app_visit(browser, served, shots, "ui://judge-mcp/pairwise.html", "pairwise",
                            {"instruction": INSTRUCTION, "candidates": TEXTS[:2]}, served.pair)
    assert INSTRUCTION in visit.text and TEXTS[0] in visit.text and TEXTS[1] in visit.text
    assert served.pair["value"] in visit.text
    orders = served.pair["meta"]["orders"]
    assert [o["order"] for o in orders] == ["original", "swapped"]
    for order in orders:
        assert f"{order['order']}\t{'B' if order['order'] == 'swapped' else 'A'}\t{order['verdict']}\t{order['mapped']}" in visit.text


async def test_ranking_view_shows_the_leaderboard_and_games(browser: Chromium, served: Calls, shots: Path) -> None:
    visit = await app_visit(browser, served, shots, "ui://judge-mcp/ranking.html", "ranking",
                            {"instruction": INSTRUCTION, "candidates": TEXTS}, served.rank)
    assert INSTRUCTION in visit.text and "judge demo" in visit.text
    for row in served.rank["ranking"]:
        strength, elo = score_text(row["bradley_terry"], 3), score_text(row["elo"], 0)
        assert f"{strength}\n\t{elo}\t{row['wins']}\t{row['losses']}\t{row['ties']}" in visit.text
    assert len(served.rank["games"]) == 3
    assert visit.text.count("original: ") == 3


async def test_calibration_view_shows_agreement_and_every_item(browser: Chromium, served: Calls, shots: Path) -> None:
    report = served.calibration
    visit = await app_visit(browser, served, shots, "ui://judge-mcp/calibration.html", "calibration", {}, report)
    assert "Calibration · score_text" in visit.text and "judge demo" in visit.text
    assert f"{report['scores']['spearman']:.3f}" in visit.text
    assert all(f"item-{i}\t" in visit.text for i in range(12))
    assert "12 items · page 1 of 1" in visit.text


async def test_a_view_shows_a_tool_error_as_an_error(browser: Chromium, served: Calls, shots: Path) -> None:
    view_html = served.views["ui://judge-mcp/pairwise.html"][1]
    url = host_page(shots, "error", view_html, {}, {"content": [{"type": "text", "text": "candidates: give two"}],
                                                    "isError": True})
    visit = await browser.visit(url, in_frame=True)
    assert "The tool reported an error\ncandidates: give two" in visit.text


# --- /ui/ over HTTP ------------------------------------------------------------------------------------------------

async def test_ui_run_page_shows_the_brief_each_judge_and_score(browser: Chromium, served: Calls, shots: Path) -> None:
    url = f"{served.base}/ui/runs/{served.image['run_id']}"
    visit = await browser.visit(url, headers={"Authorization": "Bearer tok-am"})  # a member of org-a
    assert BRIEF in visit.text and "2 iterations" in visit.text
    for evaluation in served.image["evaluations"]:
        assert f"{evaluation['agent_name']}\n{score_text(evaluation['score'])}" in visit.text
    assert_not_blank(visit.screenshot, shots / "ui-run.png")
    assert_no_request_left(visit, url)


async def test_ui_calibration_page_shows_the_report(browser: Chromium, served: Calls, shots: Path) -> None:
    url = f"{served.base}/ui/calibrations/{served.calibration['calibration_id']}"
    visit = await browser.visit(url, headers={"Authorization": "Bearer tok-a"})
    assert f"calibration {served.calibration['calibration_id']}" in visit.text
    assert_not_blank(visit.screenshot, shots / "ui-calibration.png")
    assert_no_request_left(visit, url)


async def test_ui_index_lists_the_organizations_runs_and_calibrations(browser: Chromium, served: Calls,
                                                                      shots: Path) -> None:
    visit = await browser.visit(f"{served.base}/ui/", headers={"Authorization": "Bearer tok-am"})
    assert visit.text.startswith("judge-mcp · org-a") and BRIEF in visit.text and "score_text\tdemo\t12" in visit.text
    assert_not_blank(visit.screenshot, shots / "ui-index.png")


async def test_another_organizations_member_sees_none_of_it(served: Calls) -> None:
    import httpx2

    b = {"Authorization": "Bearer tok-b"}
    async with httpx2.AsyncClient(timeout=30) as http:
        index = await http.get(f"{served.base}/ui/", headers=b)
        run = await http.get(f"{served.base}/ui/runs/{served.image['run_id']}", headers=b)
        calibration = await http.get(f"{served.base}/ui/calibrations/{served.calibration['calibration_id']}", headers=b)
    shown = re.search(r'<script type="application/json" id="view-data">(.*?)</script>', index.text, re.S)
    assert index.status_code == 200 and shown is not None
    assert json.loads(shown.group(1)) == {"organization": "org-b", "runs": [], "calibrations": []}
    assert BRIEF not in index.text
    assert run.status_code == 404 and run.text.startswith(f"no run '{served.image['run_id']}' in this organization")
    assert calibration.status_code == 404 and "no calibration" in calibration.text


async def test_ui_pages_need_a_valid_bearer_token(served: Calls) -> None:
    import httpx2

    async with httpx2.AsyncClient(timeout=30) as http:
        none = await http.get(f"{served.base}/ui/runs/{served.image['run_id']}")
        wrong = await http.get(f"{served.base}/ui/", headers={"Authorization": "Bearer tok-nobody"})
    assert none.status_code == 401 and none.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401 and BRIEF not in wrong.text


async def test_ui_pages_send_a_policy_that_allows_no_request(served: Calls) -> None:
    import httpx2

    async with httpx2.AsyncClient(timeout=30) as http:
        page = await http.get(f"{served.base}/ui/", headers={"Authorization": "Bearer tok-a"})
    policy = page.headers["content-security-policy"]
    assert policy.startswith("default-src 'none'; script-src 'sha256-") and "connect-src 'none'" in policy
    assert policy.endswith("frame-ancestors 'none'") and page.headers["cache-control"] == "no-store"


async def test_a_script_run_in_the_page_cannot_reach_the_network(browser: Chromium, served: Calls) -> None:
    """An attacker's script in the page (as if caller text had become markup) still cannot send the run away:
    fetch, an image and a form post to a listening loopback server are all refused by the page's policy."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    hits: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            hits.append(conn.recv(1024))
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    target = f"http://127.0.0.1:{listener.getsockname()[1]}"
    attack = (f"fetch('{target}/fetch').catch(function () {{}}); new Image().src = '{target}/img';"
              f"var s = document.createElement('link'); s.rel = 'stylesheet'; s.href = '{target}/css'; "
              "document.head.appendChild(s); 'sent'")
    url = f"{served.base}/ui/runs/{served.image['run_id']}"
    try:
        visit = await browser.visit(url, headers={"Authorization": "Bearer tok-a"}, script=attack)
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
    assert hits == []
    assert any("Content Security Policy" in line for line in visit.console), visit.console
