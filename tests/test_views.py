"""The views' HTML (server/views/): one sandboxed template, data as escaped JSON, a CSP that allows no request."""

from __future__ import annotations

import html as markup
import json
import re

import pytest

from server import views

REPORT = {
    "tool": "score_text", "dataset": "items.jsonl", "started_at": "2026-11-28T03:40:00Z",
    "finished_at": "2026-11-28T03:41:10Z",
    "items": [{"index": 0, "id": "a", "arguments": {"text": "</script><script>alert(1)</script>"}, "is_error": False,
               "result": {"score": 4}, "error": None,
               "assertions": [{"name": "score >= 3", "passed": True, "expected": 3, "actual": 4}],
               "passed": True, "cached": False, "cost_usd": 0.0012}],
    "summary": {"items": 1, "passed": 1, "failed": 0, "errors": 0, "pass_rate": 1.0, "min_pass_rate": 1.0,
                "ok": True, "cost_usd": 0.0012, "model_requests": 1},
}


def _data_block(html: str) -> str:
    match = re.search(r'<script type="application/json" id="view-data">(.*?)</script>', html, re.S)
    assert match is not None
    return match.group(1)


def test_eval_report_carries_the_report_as_json_the_page_reads_back():
    html = views.render_eval_report(REPORT)
    assert json.loads(_data_block(html)) == REPORT


def test_caller_text_cannot_close_the_data_block():
    html = views.render_eval_report(REPORT)
    assert "</script><script>alert(1)" not in html
    assert html.count("</script>") == 2  # the data block's and the view script's own


def test_page_policy_allows_no_request():
    html = views.render_eval_report(REPORT)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy is not None
    directives = dict(d.strip().split(" ", 1) for d in markup.unescape(policy.group(1)).split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["connect-src"] == "'none'"
    assert directives["img-src"] == "data:"
    assert directives["script-src"].startswith("'sha256-")


def test_title_is_escaped():
    html = views.render_eval_report({**REPORT, "dataset": "<b>x</b>.jsonl"})
    assert "<title>judge-mcp eval: score_text on &lt;b&gt;x&lt;/b&gt;.jsonl (1/1 passed)</title>" in html


def test_unknown_view_is_refused_naming_the_views():
    with pytest.raises(ValueError, match="unknown view 'nope'; one of image_run, pairwise"):
        views.render_page("nope", "t", {})  # type: ignore[arg-type]
