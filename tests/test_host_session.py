"""The scripted host session (issue 17's "Done when"): the block `judge-mcp config claude-desktop` prints,
started exactly as it says from `/` with the demo model, driven by the real MCP client over stdio through
every tool, with a few exact error texts. Also: every tool answers with the demo model, no key needed."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import MODEL_CACHE

JUDGE_MCP = str(Path(sys.executable).with_name("judge-mcp"))
REPO = str(Path(__file__).resolve().parents[1])
LABEL = "[demo model]"


def printed_block(project: Path, **settings: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    done = subprocess.run([JUDGE_MCP, "config", "claude-desktop", "--root", str(project)], cwd=project,
                          env=env | settings | {"PYTHONPATH": REPO}, capture_output=True, text=True,
                          timeout=60, check=True)
    block: dict[str, Any] = json.loads(done.stdout)
    return block


def png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (32, 24), "red").save(out, "PNG")
    return out.getvalue()


@pytest.mark.anyio
@pytest.mark.e2e
async def test_a_host_session_from_the_printed_config_calls_every_tool(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    (project / "bike.png").write_bytes(png())
    # The shell's settings (the demo model, a data home, the model cache) travel in the printed block.
    settings = {"JUDGE_MCP_MODEL": "demo", "JUDGE_MCP_HOME": str(tmp_path / "data"),
                "JUDGE_MCP_MODEL_CACHE": str(MODEL_CACHE)}
    entry = printed_block(project, **settings)["mcpServers"]["judge"]
    assert entry["env"] == settings | {"JUDGE_MCP_ALLOWED_ROOTS": str(project.resolve())}
    # What a host passes: a small environment of its own, then the block's env on top.
    host_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": REPO, "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=host_env | entry["env"], cwd="/")
    image = str(project / "bike.png")
    async with Client(stdio_client(params)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        called: set[str] = set()

        progress: dict[str, list[tuple[float, float | None, str | None]]] = {}

        async def call(tool: str, **args: Any) -> dict[str, Any]:
            seen = progress[tool] = []  # the last call of each tool

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                seen.append((done, total, message))

            result = await client.call_tool(tool, args, progress_callback=on_progress)
            assert not result.is_error, f"{tool}: {result.content[0].text}"
            called.add(tool)
            return result.structured_content  # type: ignore[no-any-return]

        async def error(tool: str, **args: Any) -> str:
            result = await client.call_tool(tool, args)
            assert result.is_error, tool
            return result.content[0].text  # type: ignore[no-any-return]

        agent = await call("create_agent", name="Brand", template_id="brand_compliance")
        assert (await call("get_agent", agent_id=agent["id"]))["name"] == "Brand"
        assert (await call("update_agent", agent_id=agent["id"], scoring_weight=70))["scoring_weight"] == 70
        assert [a["id"] for a in (await call("list_agents"))["agents"]] == [agent["id"]]
        doc = await call("upload_guideline", agent_id=agent["id"], filename="brand.md",
                         text="Use the brand blue #488EFF. The logo sits top left, never cropped.")
        assert doc["processing_status"] == "processed"
        assert [d["id"] for d in (await call("list_guidelines", agent_id=agent["id"]))["documents"]] == [doc["id"]]
        chunks = (await call("search_guidelines", agent_id=agent["id"], query="logo placement"))["chunks"]
        assert chunks[0]["document_id"] == doc["id"]

        run = await call("evaluate_image", brief="A red bicycle on a beach at dawn", images=[image],
                         prompt="red bicycle, beach, dawn light")
        evaluation = run["evaluations"][0]
        assert evaluation["status"] == "ok" and evaluation["model"] == "demo" and 0 <= evaluation["score"] <= 100
        assert evaluation["top_issue"]["problem"].startswith(LABEL)
        report = await call("get_run", run_id=run["run_id"])
        assert report["iterations"][0]["best"] == evaluation["score"]
        better = await call("optimize_prompt", brief="A red bicycle on a beach at dawn",
                            prompt="red bicycle, beach, dawn light", run_id=run["run_id"])
        assert better["prompt"].startswith("red bicycle, beach, dawn light, ")  # the judge's instruction added
        assert better["addressed"] == [evaluation["top_issue"]["problem"]]

        texts = await call("pairwise_compare", instruction="Where is the station?",
                           candidates=["Two blocks north, next to the bakery.", "north"])
        assert texts["value"] == "Response A" and texts["consistent"] is True
        assert LABEL in texts["meta"]["raw_response"]
        labelled = "\n".join(json.dumps({"instruction": "Where is the station?", "candidates": pair, "human_winner": w})
                              for pair, w in ((["Two blocks north, next to the bakery.", "north"], "A"),
                                              (["north", "Two blocks north, next to the bakery."], "B")))
        calibration = await call("calibrate_judge", judge="pairwise_compare", dataset=labelled, background=False)
        assert (calibration["pairwise"]["accuracy"], calibration["position_bias"]["flip_rate"]) == (1.0, 0.0)
        assert await call("get_calibration", calibration_id=calibration["calibration_id"]) == calibration
        cert = await call("certify_judge", judge="pairwise_compare", dataset=labelled, background=False)
        assert (cert["certified"], cert["tpr"]["value"], cert["tnr"]["value"]) == (False, 1.0, 1.0)
        assert cert["needed"] == {"positives": 15, "negatives": 15}  # 16 of 16 is the first lower bound over 0.8
        answers = [{"text": t, "human_score": s} for t, s in (("Paris.", 1), ("Lyon.", 0), ("Paris!", 1), ("Nice.", 0))]
        aligned = await call("align_judge", agent_id=agent["id"], dataset=answers, background=False)
        assert aligned["kept"] is False and aligned["new_agent_id"] is None
        images = await call("pairwise_compare", instruction="Make the sky blue", candidates=[image, image])
        assert images["value"] == "Tie" and images["consistent"] is True
        vie = await call("pairwise_compare", instruction="Make the sky blue", candidates=[image], method="viescore")
        assert vie["type"] == "single_score" and 0 <= vie["value"] <= 10

        verdict = await call("judge_code", spec="add(a, b) returns the sum", root=str(project), gates=["lint"])
        assert verdict["verdict"] in ("accept", "revise") and verdict["explanations"]["root_cause"].startswith(LABEL)
        proposal = await call("propose_patch", spec="add(a, b) returns the sum", root=str(project),
                              diagnostics="calc.py:1: nothing wrong")
        assert proposal["validation"]["ok"] is True
        assert proposal["patch"]["ops"][0]["path"] == "DEMO_MODEL_SUGGESTION.md"
        checked = await call("validate_patch", patch=proposal["patch"], root=str(project))
        assert checked["ok"] is True
        applied = await call("apply_patch", patch={"ops": [
            {"kind": "edit", "path": "calc.py", "find": "return a + b", "replace": "return b + a"}]}, root=str(project))
        assert applied["applied"] is True and applied["files_changed"] == ["calc.py"]

        analysis = await call("evaluate_analysis", analysis={"company_name": "Acme"}, deterministic_checks=["D-1"])
        assert analysis["partial"] is False
        assert analysis["categories"]["general_quality"]["checks"]["evidence_support"]["rationale"].startswith(
            f"{LABEL} evidence support is ")

        scored = await call("score_text", text="Paris is the capital of France.", rubric="correctness",
                            instruction="What is the capital of France?")
        assert scored["scored"] == 1 and scored["criteria"][0]["reasoning"].startswith(LABEL)
        same = await call("compare_to_reference", text="Paris.", reference="paris")
        assert (same["verdict"], same["decided_by"], same["usage"]["requests"]) == ("equivalent", "normalised_match", 0)
        ranked = await call("rank_texts", instruction="Say where the station is",
                            candidates=["Two blocks north.", "north", "I do not know."], method="score")
        assert sorted(r["index"] for r in ranked["ranking"]) == [0, 1, 2]
        rag = await call("evaluate_rag_answer", question="When are returns accepted?",
                         answer="Returns are accepted within 30 days.", contexts=["Returns: within 30 days."])
        assert [c["claim"] for c in rag["claims"]] == ["Returns are accepted within 30 days."]
        trajectory = await call("evaluate_trajectory", goal="Find the weather", expected_tools=["search"], steps=[
            {"tool": "search", "arguments": {"q": "weather"}, "result": "sunny"}])
        assert trajectory["checks"]["missing_tools"] == []

        # Long tools report progress a person can read, rising to the total (each tool's last call).
        for tool in ("evaluate_image", "pairwise_compare", "judge_code", "propose_patch", "evaluate_analysis",
                     "optimize_prompt", "score_text", "rank_texts", "evaluate_rag_answer"):
            dones = [done for done, _, _ in progress[tool]]
            assert dones and dones == sorted(dones) and all(m for _, _, m in progress[tool]), tool
            assert progress[tool][-1][0] == progress[tool][-1][1], tool

        # One long call as a background job, run to completion and read back.
        started = await call("score_text", text="Short and clear.", rubric="conciseness", background=True)
        assert started["status"] == "working" and started["tool"] == "score_text"
        for _ in range(200):
            job = await call("get_job", job_id=started["job_id"])
            if job["status"] != "working":
                break
            await anyio.sleep(0.05)
        assert job["status"] == "completed" and job["result"]["scored"] == 1
        assert started["job_id"] in [j["job_id"] for j in (await call("list_jobs"))["jobs"]]
        assert (await call("cancel_job", job_id=started["job_id"]))["status"] == "completed"  # already done

        # The run as a resource, and in the run history.
        assert [r["run_id"] for r in (await call("list_runs"))["runs"]] == [run["run_id"]]
        resource = await client.read_resource(f"judge://runs/{run['run_id']}")
        assert json.loads(resource.contents[0].text)["run_id"] == run["run_id"]  # type: ignore[union-attr]
        usage = await call("get_usage", days=1)  # the demo model: requests counted, nothing spent
        assert [(d["model"], d["cost_usd"]) for d in usage["days"]] == [("demo", 0.0)] and usage["days"][0]["requests"] > 0

        assert await error("evaluate_image", brief="x", images=["/etc/passwd"]) == (
            f"Error executing tool evaluate_image: invalid input: images[0]: path '/etc/passwd' is outside the "
            f"allowed roots ({project.resolve()}); set JUDGE_MCP_ALLOWED_ROOTS to allow it")
        assert (await call("delete_guideline", agent_id=agent["id"], document_id=doc["id"]))["deleted"] is True
        assert (await call("delete_agent", agent_id=agent["id"]))["id"] == agent["id"]
        assert called == tools  # every tool the server offers was called and answered

        assert await error("get_agent", agent_id=agent["id"]) == (
            f"Error executing tool get_agent: invalid input: no agent with id '{agent['id']}' in this organization "
            "(list_agents shows the ids)")
        assert await error("evaluate_image", brief="x", images=[image]) == (
            "Error executing tool evaluate_image: invalid input: no judge agents: create some with create_agent "
            "(e.g. template_id='brand_compliance')")
        assert await error("create_agent", system_prompt="Score it.") == (
            "Error executing tool create_agent: invalid input: name is required, e.g. 'Brand Compliance Judge'.")
        assert await error("apply_patch", patch={"ops": [{"kind": "remove", "path": "nope.py"}]},
                           root=str(project)) == (
            "The patch was not applied and no file changed: op 0 (remove nope.py): the file does not exist.")

        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert "agents/brand_compliance@v1" in prompts
        got = await client.get_prompt("text/assessment/pairwise@v1", {
            "instruction": "Say hi", "response_a": "hi", "response_b": "hello"})
        assert "Response A" in got.messages[0].content.text  # type: ignore[union-attr]
