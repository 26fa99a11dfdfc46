"""Long work as hosts meet it: progress notifications from every long tool, background jobs (get, cancel,
list, restart), resources and run history, the per-call log line with the job id, and MCP log notifications.
Real `judge-mcp` processes over stdio (and HTTP for organizations) through the mcp client; model replies
from the loopback fake model server through the real OpenAI SDK."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.mcp_helpers import JUDGE_MCP, call, error_of, server_env
from tests.test_analysis import GOOD, category_reply
from tests.test_code_judge import VERDICT, make_project

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def png_b64(colour: str = "red") -> str:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def image_verdict(score: float) -> str:
    return json.dumps({"score": score, "TOP_ISSUE": {"problem": "dull", "severity": "major", "fix": "brighten"},
                       "whatWorked": ["lighting"], "promptInstructions": [], "feedback": "ok"})


def replies(rec: Recorded) -> Scripted:
    """One fake model for every tool, answering by what the request is."""
    text = rec.text()
    if "senior code reviewer" in text:
        return Scripted(text=json.dumps(VERDICT))
    if "Return the patch JSON" in text:
        return Scripted(text=json.dumps({"ops": [{"kind": "add", "path": "notes.txt", "content": "ok\n"}]}))
    if "- evidence_support:" in text or "- brand_voice:" in text or "- strategic_depth:" in text:
        return category_reply(rec)
    if "You are judge" in text:
        return Scripted(text=image_verdict(80 if "judge A" in text else 60))
    if "winner" in text.lower() or "Response A" in text or "response_a" in text.lower():
        return Scripted(text='{"winner": "A"}')
    return Scripted(text=json.dumps({"prompt": "a brighter red square", "addressed": ["dull"]}))


class Running:
    def __init__(self, client: Any, pid: int, log: Path):
        self.client, self.pid, self.log = client, pid, log

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


def model_env(fake: FakeModelServer) -> dict[str, str]:
    return {"JUDGE_MCP_MODEL": "openai:gpt-fake", "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake.openai_url}


@asynccontextmanager
async def judge_mcp(home: Path, name: str, *, mode: str = "auto", log_level: str | None = None,
                    logging_callback: Any = None, **env: str) -> AsyncIterator[Running]:
    """A judge-mcp process as a host starts it (the shell records its pid, then execs it)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home.mkdir(parents=True, exist_ok=True)
    pidfile, log = home / f"{name}.pid", home / f"{name}.stderr"
    params = StdioServerParameters(command="/bin/sh", args=["-c", f'echo $$ > "{pidfile}"; exec "$0"', JUDGE_MCP],
                                   env=server_env(home, **env))
    with log.open("a") as err:
        async with Client(stdio_client(params, errlog=err), mode=mode, log_level=log_level,  # type: ignore[arg-type]
                          logging_callback=logging_callback) as client:
            yield Running(client, int(pidfile.read_text()), log)


@pytest.fixture
def fake(fake_server: FakeModelServer) -> FakeModelServer:
    fake_server.respond_with(replies)
    return fake_server


async def with_progress(client: Any, tool: str, **args: Any) -> tuple[dict[str, Any], list[tuple[float, float | None, str]]]:
    """A successful call's structured result and the progress notifications it sent."""
    seen: list[tuple[float, float | None, str]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message or ""))

    result = await client.call_tool(tool, args, progress_callback=on_progress)
    assert not result.is_error, result.content[0].text
    return result.structured_content, seen


async def agents(c: Any, *names: str) -> list[str]:
    return [str((await call(c, "create_agent", name=n, system_prompt=f"You are judge {n}."))["id"]) for n in names]


async def wait_job(c: Any, job_id: str, until: Callable[[dict[str, Any]], bool], timeout_s: float = 60) -> dict[str, Any]:
    with anyio.fail_after(timeout_s):
        while True:
            job = await call(c, "get_job", job_id=job_id)
            if until(job):
                return job
            await anyio.sleep(0.05)


async def first_model_request(fake: FakeModelServer, timeout_s: float = 30) -> None:
    """Returns once the fake model has been asked something (the work is under way)."""
    with anyio.fail_after(timeout_s):
        while True:
            if fake.requests:
                return
            await anyio.sleep(0.05)


# --- progress --------------------------------------------------------------------------------------------

async def test_evaluate_image_reports_progress_per_judge_and_image(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", "s", **model_env(fake)) as s:
        await agents(s.client, "A", "B")
        _, seen = await with_progress(s.client, "evaluate_image", brief="a red square", images=[png_b64(), png_b64("blue")])
    assert [p for p, _, _ in seen] == [0, 1, 2, 3, 4] and {t for _, t, _ in seen} == {4}
    assert all("judged image" in m for _, _, m in seen[1:])
    assert seen[-1][2].endswith("(4 of 4 judgements)")


async def test_pairwise_compare_reports_each_order(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", "s", **model_env(fake)) as s:
        _, seen = await with_progress(s.client, "pairwise_compare", instruction="say hi", candidates=["hi", "hello"],
                                      candidate_type="text")
    assert [(p, t) for p, t, _ in seen] == [(0, 2), (1, 2), (2, 2)]
    assert "order judged" in seen[-1][2]


async def test_evaluate_analysis_reports_each_check_and_category(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", "s", **model_env(fake)) as s:
        _, seen = await with_progress(s.client, "evaluate_analysis", analysis=json.dumps(GOOD),
                                      input_url="acme-robotics.com")
    assert [p for p, _, _ in seen] == [0, 1, 2, 3, 4, 5, 6, 7] and {t for _, t, _ in seen} == {7}
    assert [m for _, _, m in seen[1:6]] == ["D-1 json_validation passed", "D-2 schema_compliance passed",
                                            "D-3 format_compliance passed", "D-4 field_cardinality passed",
                                            "D-5 url_preservation passed"]
    assert sorted(m.split(" (")[0] for _, _, m in seen[6:]) == ["category founder_resonance passed",
                                                              "category general_quality passed"]


async def test_optimize_prompt_reports_each_stage(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", "s", **model_env(fake)) as s:
        await agents(s.client, "A")
        run = await call(s.client, "evaluate_image", brief="a red square", images=[png_b64()])
        _, seen = await with_progress(s.client, "optimize_prompt", brief="a red square", prompt="red square",
                                      run_id=run["run_id"])
    assert [(p, t) for p, t, _ in seen] == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert seen[2][2] == "asking the model for the next prompt"


async def test_judge_code_reports_each_gate_and_the_model_call(tmp_path: Path, fake: FakeModelServer) -> None:
    home = tmp_path / "home"
    project = make_project(home / "shop")
    async with judge_mcp(home, "s", JUDGE_MCP_GATE_SANDBOX="none", **model_env(fake)) as s:
        _, seen = await with_progress(s.client, "judge_code", spec="cart totals", root=str(project),
                                      gates=["lint", "types"])
    assert [(p, t) for p, t, _ in seen] == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert seen[1][2].startswith("gate lint failed") and seen[2][2].startswith("gate types failed")
    assert seen[2][2].endswith("(2 of 2 gates); asking the model for a verdict")
    assert seen[3][2] == "verdict: revise"


async def test_a_judge_code_tournament_reports_each_candidate_then_the_winners_gates(
        tmp_path: Path, fake: FakeModelServer) -> None:
    broken = [{"path": "mod.py", "content": "import os\n\ndef f() -> int:\n    return 'x'\n"}]
    good = [{"path": "mod.py", "content": "def f() -> int:\n    return 1\n"}]
    async with judge_mcp(tmp_path / "home", "s", JUDGE_MCP_GATE_SANDBOX="none", **model_env(fake)) as s:
        result, seen = await with_progress(s.client, "judge_code", spec="f returns 1", candidates=[broken, good],
                                           gates=["lint"])
    assert [(p, t) for p, t, _ in seen] == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert sorted(m.split(":")[0] for _, _, m in seen[1:3]) == ["candidate 1 gated", "candidate 2 gated"]
    assert seen[3][2].startswith("gate lint passed") and result["winner_index"] == 1


async def test_propose_patch_reports_each_gate_and_fixer_call(tmp_path: Path, fake: FakeModelServer) -> None:
    home = tmp_path / "home"
    project = make_project(home / "shop")
    async with judge_mcp(home, "s", JUDGE_MCP_GATE_SANDBOX="none", **model_env(fake)) as s:
        result, seen = await with_progress(s.client, "propose_patch", spec="cart totals", root=str(project))
    assert [(p, t) for p, t, _ in seen] == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert [m.split(" in ")[0] for _, _, m in seen[1:4]] == [
        "diagnostics: gate lint failed", "diagnostics: gate types failed", "diagnostics: gate tests failed"]
    # On a failure, say why: the fixer's error as the result carries it, and the end of the server's log.
    assert seen[4][2] == "round 1: the fixer proposed 1 op(s), ok", (
        f"error: {result.get('error')!r}; raw: {result.get('raw_response')!r}\nserver log:\n{s.stderr()[-4000:]}")


# --- background jobs -------------------------------------------------------------------------------------

@pytest.mark.usefixtures("on_engine")
async def test_a_background_call_returns_a_job_that_completes_with_the_tools_result(
        tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", "s", **model_env(fake)) as s:
        await agents(s.client, "A", "B")
        started = await s.client.call_tool("evaluate_image", {"brief": "a red square", "images": [png_b64()],
                                                              "background": True})
        job = started.structured_content
        done = await wait_job(s.client, job["job_id"], lambda j: j["status"] != "working")
        listed = await call(s.client, "list_jobs", status="completed")
    assert not started.is_error and job["status"] == "working" and job["tool"] == "evaluate_image"
    assert [c.uri for c in started.content if c.type == "resource_link"] == [f"judge://jobs/{job['job_id']}"]
    assert done["status"] == "completed" and (done["progress"], done["total"]) == (2, 2)
    assert done["result"]["iteration"] == 1 and done["result"]["ranking"][0]["aggregate_score"] == 70
    assert [j["job_id"] for j in listed["jobs"]] == [job["job_id"]]
    assert "tool=evaluate_image org=default" in s.stderr() and f"job={job['job_id']}" in s.stderr()


@pytest.mark.usefixtures("on_engine")
async def test_a_failed_job_keeps_the_foreground_error_text_and_logs_its_outcome_with_the_job_id(
        tmp_path: Path) -> None:
    async with judge_mcp(tmp_path / "home", "s", JUDGE_MCP_MODEL="openai:gpt-fake", OPENAI_API_KEY="sk-test") as s:
        # An image is read by the work (a bad argument the tool can check first is refused without a job).
        await call(s.client, "create_agent", name="Judge", system_prompt="Score it.")
        foreground = await error_of(s.client, "evaluate_image", brief="a red square", images=["missing.png"])
        job = await call(s.client, "evaluate_image", brief="a red square", images=["missing.png"], background=True)
        failed = await wait_job(s.client, job["job_id"], lambda j: j["status"] != "working")
    # The same text, without the SDK's "Error executing tool …: " prefix.
    assert failed["status"] == "failed"
    assert failed["error"] == foreground.removeprefix("Error executing tool evaluate_image: ")
    assert failed["error"].startswith("invalid input: images[0]: path 'missing.png'")
    own_line = [line for line in s.stderr().splitlines() if f"job={job['job_id']}" in line]
    assert len(own_line) == 2 and "outcome=ok" in own_line[0] and "outcome=invalid_input" in own_line[1]


async def test_every_long_tool_publishes_an_output_schema_that_admits_a_job(tmp_path: Path) -> None:
    import jsonschema

    async with judge_mcp(tmp_path / "home", "s") as s:
        tools = {t.name: t for t in (await s.client.list_tools()).tools}
    started = {"job_id": "x", "status": "working", "tool": "t", "message": "m"}
    long_tools = ["evaluate_image", "optimize_prompt", "pairwise_compare", "judge_code", "propose_patch",
                  "evaluate_analysis"]
    for name in long_tools:
        schema = tools[name].output_schema
        assert schema["type"] == "object" and "background" in tools[name].input_schema["properties"]
        jsonschema.validate(started, schema)
    assert {"get_job", "cancel_job", "list_jobs", "list_runs", "get_run"} <= set(tools)


@pytest.mark.usefixtures("on_engine")
async def test_cancel_job_stops_a_working_job(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text=image_verdict(50), delay_s=30))
    async with judge_mcp(tmp_path / "home", "s", **model_env(fake_server)) as s:
        await agents(s.client, "A")
        job = await call(s.client, "evaluate_image", brief="a red square", images=[png_b64()], background=True)
        await first_model_request(fake_server)
        cancelled = await call(s.client, "cancel_job", job_id=job["job_id"])
        await anyio.sleep(0.5)
        later = await call(s.client, "get_job", job_id=job["job_id"])
        runs = await call(s.client, "list_runs")
    assert cancelled["status"] == "cancelled" and cancelled["error"] == "cancelled with cancel_job"
    assert later["status"] == "cancelled" and later["result"] is None
    assert [r["iterations"] for r in runs["runs"]] == [0]  # the iteration was never recorded


async def test_a_restart_marks_the_killed_servers_working_jobs_interrupted(tmp_path: Path,
                                                                         fake_server: FakeModelServer) -> None:
    # pairwise_compare records no units: its job is interrupted (resumable tools' are taken over:
    # tests/test_resumable_jobs.py).
    fake_server.respond_with(lambda rec: Scripted(text="A", delay_s=60))
    home = tmp_path / "home"
    async with judge_mcp(home, "first", **model_env(fake_server)) as s:
        job = await call(s.client, "pairwise_compare", instruction="say hi", candidates=["hi", "hello"],
                         candidate_type="text", background=True)
        await first_model_request(fake_server)
        os.kill(s.pid, signal.SIGKILL)
    async with judge_mcp(home, "second", **model_env(fake_server)) as s:
        after = await call(s.client, "get_job", job_id=job["job_id"])
        working = await call(s.client, "list_jobs", status="working")
    assert after["status"] == "interrupted" and "ended before it finished" in after["error"]
    assert working["jobs"] == []


@pytest.mark.usefixtures("on_engine")
async def test_a_server_that_stops_marks_its_working_jobs_interrupted(tmp_path: Path,
                                                                   fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text="A", delay_s=60))  # pairwise_compare records no units
    home = tmp_path / "home"
    with anyio.fail_after(45):  # the stop does not wait for the 60 s reply
        async with judge_mcp(home, "first", **model_env(fake_server)) as s:
            job = await call(s.client, "pairwise_compare", instruction="say hi", candidates=["hi", "hello"],
                             candidate_type="text", background=True)
            await first_model_request(fake_server)
    async with judge_mcp(home, "second", **model_env(fake_server)) as s:
        after = await call(s.client, "get_job", job_id=job["job_id"])
    assert after["status"] == "interrupted" and after["error"] == "the server stopped before the job finished; call the tool again"


@pytest.mark.usefixtures("on_engine")
async def test_an_unknown_job_id_is_not_found(tmp_path: Path) -> None:
    async with judge_mcp(tmp_path / "home", "s") as s:
        message = await error_of(s.client, "get_job", job_id="nope")
    assert "no job 'nope' in this organization" in message


# --- resources and history -------------------------------------------------------------------------------

@pytest.mark.usefixtures("on_engine")
async def test_a_run_is_readable_as_resources_and_linked_from_the_result(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", "s", **model_env(fake)) as s:
        (agent,) = await agents(s.client, "A")
        result = await s.client.call_tool("evaluate_image", {"brief": "a red square", "images": [png_b64()]})
        run_id = result.structured_content["run_id"]
        run = await s.client.read_resource(f"judge://runs/{run_id}")
        chart = await s.client.read_resource(f"judge://runs/{run_id}/chart.png")
        agent_doc = await s.client.read_resource(f"judge://agents/{agent}")
        templates = (await s.client.list_resource_templates()).resource_templates
        listed = (await s.client.list_resources()).resources
        prompt = await s.client.read_resource("judge://prompts/image/judge/v1")
    links = [c.uri for c in result.content if c.type == "resource_link"]
    assert links == [f"judge://runs/{run_id}", f"judge://runs/{run_id}/chart.png"]
    assert json.loads(run.contents[0].text)["run_id"] == run_id
    assert base64.b64decode(chart.contents[0].blob).startswith(b"\x89PNG")
    assert json.loads(agent_doc.contents[0].text)["id"] == agent
    assert {t.uri_template for t in templates} >= {
        "judge://agents/{agent_id}", "judge://agents/{agent_id}/documents/{document_id}", "judge://runs/{run_id}",
        "judge://runs/{run_id}/chart.png", "judge://jobs/{job_id}", "judge://prompts/{+prompt_id}/{version}"}
    assert "judge://prompts/image/judge/v1" in {str(r.uri) for r in listed}
    assert "iteration" in prompt.contents[0].text


@pytest.mark.usefixtures("on_engine")
async def test_a_listener_hears_that_a_run_it_subscribed_to_has_a_new_iteration(tmp_path: Path,
                                                                                fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", "s", **model_env(fake)) as s:
        await agents(s.client, "A")
        first = await call(s.client, "evaluate_image", brief="a red square", images=[png_b64()])
        uri = f"judge://runs/{first['run_id']}"
        async with s.client.listen(resource_subscriptions=[uri]) as sub:
            await call(s.client, "evaluate_image", brief="a red square", images=[png_b64()], run_id=first["run_id"])
            with anyio.fail_after(30):
                event = await sub.__anext__()
    assert event.uri == uri


@pytest.mark.usefixtures("on_engine")
async def test_continuing_a_run_keeps_its_panel_unless_agent_ids_change_it(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", "s", **model_env(fake)) as s:
        a, b = await agents(s.client, "A", "B")
        first = await call(s.client, "evaluate_image", brief="a red square", images=[png_b64()], agent_ids=[a, b])
        await agents(s.client, "C", "D", "E", "F", "G")
        second = await call(s.client, "evaluate_image", brief="a red square", images=[png_b64()],
                            run_id=first["run_id"])
        third = await call(s.client, "evaluate_image", brief="a red square", images=[png_b64()],
                           run_id=first["run_id"], agent_ids=[a])
        history = await call(s.client, "get_run", run_id=first["run_id"])
        runs = await call(s.client, "list_runs")
    assert sorted(e["agent_id"] for e in second["evaluations"]) == sorted([a, b])
    assert [e["agent_id"] for e in third["evaluations"]] == [a]
    assert history["panel"] == [a] and [it["iteration"] for it in history["iterations"]] == [1, 2, 3]
    assert [(r["run_id"], r["iterations"], r["best"]) for r in runs["runs"]] == [(first["run_id"], 3, 80)]


@pytest.mark.usefixtures("on_engine")
async def test_two_calls_continuing_one_run_at_once_get_consecutive_iterations(tmp_path: Path,
                                                                                fake: FakeModelServer) -> None:
    fake.respond_with(lambda rec: Scripted(text=image_verdict(70), delay_s=0.3))  # both calls are judging at once
    continued: list[int] = []
    async with judge_mcp(tmp_path / "home", "s", **model_env(fake)) as s:
        (a,) = await agents(s.client, "A")
        first = await call(s.client, "evaluate_image", brief="a red square", images=[png_b64()], agent_ids=[a])

        async def one() -> None:
            result = await call(s.client, "evaluate_image", brief="a red square", images=[png_b64()],
                                run_id=first["run_id"])
            continued.append(result["iteration"])

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
        history = await call(s.client, "get_run", run_id=first["run_id"])
    assert sorted(continued) == [2, 3]
    assert [it["iteration"] for it in history["iterations"]] == [1, 2, 3]


# --- logs ------------------------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging/setLevel: a 2025 client
async def test_a_client_that_set_a_level_gets_log_notifications_and_one_that_did_not_gets_none(
        tmp_path: Path, fake: FakeModelServer) -> None:
    heard: list[str] = []

    async def on_log(params: Any) -> None:
        heard.append(str(params.data))

    async with judge_mcp(tmp_path / "home", "quiet", mode="legacy", logging_callback=on_log, **model_env(fake)) as s:
        await call(s.client, "pairwise_compare", instruction="say hi", candidates=["hi", "hello"], candidate_type="text")
    quiet = list(heard)
    async with judge_mcp(tmp_path / "home", "loud", mode="legacy", logging_callback=on_log, **model_env(fake)) as s:
        await s.client.set_logging_level("info")
        await call(s.client, "pairwise_compare", instruction="say hi", candidates=["hi", "hello"], candidate_type="text")
        capabilities = s.client.server_capabilities
    assert quiet == [] and capabilities.logging is not None
    assert heard[0] == "asking the judge in both orders" and any("order judged" in h for h in heard)


async def test_a_2026_client_gets_log_notifications_at_the_level_it_asks_for(tmp_path: Path, fake: FakeModelServer) -> None:
    heard: list[tuple[str, str]] = []

    async def on_log(params: Any) -> None:
        heard.append((params.level, str(params.data)))

    async with judge_mcp(tmp_path / "home", "s", log_level="notice", logging_callback=on_log, **model_env(fake)) as s:
        await call(s.client, "pairwise_compare", instruction="say hi", candidates=["hi", "hello"], candidate_type="text")
        job = await call(s.client, "pairwise_compare", instruction="say hi", candidates=["hi", "hello"],
                         candidate_type="text", background=True)
    assert heard == [("notice", f"pairwise_compare started as job {job['job_id']}")]


# --- organizations over HTTP -----------------------------------------------------------------------------

@pytest.fixture
def http_server(tmp_path: Path, fake: FakeModelServer) -> Any:
    import subprocess

    from tests.mcp_helpers import free_port, wait_for_port

    port = free_port()
    with (tmp_path / "http.stderr").open("w") as err:
        proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)], stdout=subprocess.DEVNULL,
                                stderr=err, env=server_env(tmp_path / "home", JUDGE_MCP_TOKENS="tok-a=org-a,tok-b=org-b",
                                                           **model_env(fake)))
        assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
        yield f"http://127.0.0.1:{port}/mcp"
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.usefixtures("on_engine")
async def test_another_organizations_jobs_runs_and_resources_are_not_found(http_server: str) -> None:
    from mcp.shared.exceptions import MCPError

    from tests.test_transports import client_with_token

    async with client_with_token(http_server, "tok-a") as a:
        (agent,) = await agents(a, "A")
        job = await call(a, "evaluate_image", brief="a red square", images=[png_b64()], background=True)
        done = await wait_job(a, job["job_id"], lambda j: j["status"] != "working")
        run_id = done["result"]["run_id"]
    async with client_with_token(http_server, "tok-b") as b:
        job_error = await error_of(b, "get_job", job_id=job["job_id"])
        cancel_error = await error_of(b, "cancel_job", job_id=job["job_id"])
        run_error = await error_of(b, "get_run", run_id=run_id)
        jobs = await call(b, "list_jobs")
        runs = await call(b, "list_runs")
        unread = []
        for uri in (f"judge://runs/{run_id}", f"judge://runs/{run_id}/chart.png", f"judge://agents/{agent}",
                    f"judge://jobs/{job['job_id']}"):
            with pytest.raises(MCPError) as raised:
                await b.read_resource(uri)
            unread.append(raised.value.error.message)
    assert done["status"] == "completed"
    assert f"no job '{job['job_id']}' in this organization" in job_error and "no job" in cancel_error
    assert f"no run '{run_id}' in this organization" in run_error
    assert jobs["jobs"] == [] and runs["runs"] == []
    assert [m.split(" (")[0] for m in unread] == [f"no run '{run_id}' in this organization"] * 2 + [
        f"no agent with id '{agent}' in this organization", f"no job '{job['job_id']}' in this organization"]


@pytest.mark.usefixtures("on_engine")
async def test_created_agents_and_documents_are_linked_and_readable_as_resources(tmp_path: Path) -> None:
    async with judge_mcp(tmp_path / "home", "s") as s:
        created = await s.client.call_tool("create_agent", {"name": "Brand", "system_prompt": "You are the judge."})
        agent = created.structured_content["id"]
        uploaded = await s.client.call_tool("upload_guideline", {"agent_id": agent, "filename": "rules.md",
                                                                 "text": "# Rules\n\nThe brand blue is #488EFF."})
        doc = uploaded.structured_content
        read = await s.client.read_resource(f"judge://agents/{agent}/documents/{doc['id']}")
    assert [c.uri for c in created.content if c.type == "resource_link"] == [f"judge://agents/{agent}"]
    assert [c.uri for c in uploaded.content if c.type == "resource_link"] == [
        f"judge://agents/{agent}/documents/{doc['id']}"]
    assert json.loads(read.contents[0].text) == doc
