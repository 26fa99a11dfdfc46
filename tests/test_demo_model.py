"""The demo model (JUDGE_MCP_MODEL=demo): labelled replies read through the one reading path. Every tool
through a real server with it: tests/test_host_session.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from judges.models.demo import LABEL, DemoClient, demo_reply
from judges.models.guard import CallPolicy
from judges.models.protocol import Message, ModelRequest
from judges.models.registry import BackendConfig, ModelRegistry, parse_model_string
from judges.pairwise.judge import pairwise
from judges.reading.parsing import run_judge
from judges.store.agents import TEMPLATES
from tests.mcp_helpers import StdioSession, server_env


class ToneVerdict(BaseModel):
    """An output model the demo has never seen (a judge added later)."""

    tone: str
    politeness: float = Field(ge=0, le=1)
    level: int = Field(ge=1, le=5)
    flags: list[str] = []


def test_demo_is_a_model_string() -> None:
    assert parse_model_string("demo") == ("demo", "")


def test_the_registry_builds_the_demo_client_without_any_key() -> None:
    registry = ModelRegistry("demo", BackendConfig(), CallPolicy(deadline_s=5, max_retries=0, max_retry_wait_s=0), 2)
    assert registry.resolve().name == "demo"


@pytest.mark.anyio
async def test_an_unknown_judge_gets_a_labelled_reply_built_from_its_schema() -> None:
    request = ModelRequest(messages=[Message.user("Judge the tone.")])
    judged = await run_judge(DemoClient(), request, ToneVerdict)
    assert judged.value == ToneVerdict(tone=f"{LABEL} Tone", politeness=0.7, level=4, flags=[f"{LABEL} flags"])
    assert judged.read_as == "json" and judged.model == "demo"


def test_a_free_form_prompt_gets_one_labelled_object_with_winner_score_and_reasoning() -> None:
    reply = json.loads(demo_reply(ModelRequest(messages=[Message.user("Rate it 0-10.")])))
    assert set(reply) == {"winner", "score", "reasoning"} and reply["reasoning"].startswith(LABEL)


@pytest.mark.anyio
async def test_the_demo_pairwise_verdict_survives_the_position_swap() -> None:
    result = await pairwise(DemoClient(), kind="text", instruction="Where is the station?",
                            candidates=["Two blocks north, next to the bakery.", "north"], source=None,
                            prompt_id="text/assessment/pairwise@v1", swap=True, retries=1)
    assert (result.value, result.consistent) == ("Response A", True)


# Replies that vary with what is judged, and only with that (issue 29.7).

def png(colour: str) -> str:
    import base64
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (32, 24), colour).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def image_request(image: str, brief: str = "A red bicycle", iteration: str = "This is iteration 1 of 10.",
                  sample: int = 0, categories: str = "logo, colour") -> ModelRequest:
    from judges.image.judge import ImageVerdict
    from judges.models.protocol import ImagePart

    text = (f"## Iteration context\n{iteration}\n\n<brief>\n{brief}\n</brief>\n\n<generation_prompt>\nred bike\n"
            f"</generation_prompt>\n\n<categories>\n{categories}\n</categories>\n"
            '"score": <overall score 0-100>')
    return ModelRequest(system="You are a judge.", sample=sample, json_schema=ImageVerdict.model_json_schema(),
                        messages=[Message.user(text, ImagePart(media_type="image/png", data_base64=image))])


def test_two_different_images_get_different_scores() -> None:
    scores = [json.loads(demo_reply(image_request(png(c))))["score"] for c in ("red", "blue", "green", "white")]
    assert len(set(scores)) == 4 and all(30 <= s <= 95 for s in scores)


def test_the_same_image_gets_the_same_score_whatever_the_iteration_context_says() -> None:
    first = json.loads(demo_reply(image_request(png("red"))))
    later = json.loads(demo_reply(image_request(png("red"), iteration="This is iteration 3 of 10. Previous: [51.0]")))
    assert first == later


def test_another_sample_of_the_same_image_is_another_draw() -> None:
    assert json.loads(demo_reply(image_request(png("red"), sample=1)))["score"] != json.loads(
        demo_reply(image_request(png("red"))))["score"]


def test_the_image_reply_scores_each_named_category_and_grades_its_issue_by_the_score() -> None:
    reply = json.loads(demo_reply(image_request(png("blue"))))
    assert set(reply["category_scores"]) == {"logo", "colour"}
    share = reply["score"] / 100
    expected = "minor" if share >= 0.8 else "moderate" if share >= 0.65 else "major" if share >= 0.5 else "critical"
    assert reply["top_issue"]["severity"] == expected and reply["top_issue"]["problem"].startswith(LABEL)


@pytest.mark.anyio
@pytest.mark.parametrize("colour", ["red", "blue", "green", "black", "white", "yellow"])
async def test_the_image_reply_is_read_as_json_on_the_agents_scale(colour: str) -> None:
    from judges.image.judge import ImageVerdict

    request = image_request(png(colour))
    request.messages[0].content[0].text = request.messages[0].content[0].text.replace("0-100", "1-10")  # type: ignore[union-attr]
    judged = await run_judge(DemoClient(), request, ImageVerdict)
    assert judged.read_as == "json" and judged.value is not None and 1 <= judged.value.score <= 10


@pytest.mark.anyio
async def test_a_code_verdict_zeroes_the_dimension_a_gate_found_wrong() -> None:
    from judges.code.judge import JudgeVerdict

    payload = {"spec": "add", "brief": {}, "signals": {"lintErrors": ["E501 line too long"], "typeErrors": [],
                                                      "boundaryErrors": [], "test": {"failed": 0}}}
    request = ModelRequest(json_schema=JudgeVerdict.model_json_schema(),
                           messages=[Message.user(f"<judge_input>\n{json.dumps(payload)}\n</judge_input>")])
    judged = await run_judge(DemoClient(), request, JudgeVerdict)
    assert judged.value is not None and judged.value.verdict == "revise" and judged.value.scores.style == 0.0


# Through a real server (JUDGE_MCP_MODEL=demo): every result shows what its tool is for.

@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StdioSession, Path]]:
    import base64

    home = tmp_path_factory.mktemp("demo").resolve()
    for colour in ("red", "blue"):
        (home / f"{colour}.png").write_bytes(base64.b64decode(png(colour)))
    running = StdioSession(server_env(home, JUDGE_MCP_MODEL="demo", JUDGE_MCP_WARM_EMBEDDINGS="false",
                                      JUDGE_MCP_LOG_LEVEL="WARNING"))
    try:
        for template in ("brand_compliance", "composition"):
            assert not running.call("create_agent", {"name": template, "template_id": template}).is_error
        yield running, home
    finally:
        running.close()


def called(session: StdioSession, tool: str, **args: Any) -> dict[str, Any]:
    result = session.call(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


@pytest.mark.e2e
def test_a_real_server_scores_two_different_images_apart_and_the_same_image_alike(
        demo_server: tuple[StdioSession, Path]) -> None:
    session, home = demo_server
    red, blue = str(home / "red.png"), str(home / "blue.png")
    run = called(session, "evaluate_image", brief="A red bicycle", images=[red, blue, red], prompt="red bike")
    aggregate = {r["image_index"]: r["aggregate_score"] for r in run["ranking"]}
    assert aggregate[0] == aggregate[2] != aggregate[1]
    assert run["winner_index"] == max(aggregate, key=aggregate.__getitem__)
    per_judge = {(e["agent_name"], e["image_index"]): e["score"] for e in run["evaluations"]}
    assert per_judge[("brand_compliance", 0)] != per_judge[("composition", 0)]  # each judge has its own view


@pytest.mark.e2e
def test_a_run_that_shows_the_same_images_again_reaches_a_plateau(demo_server: tuple[StdioSession, Path]) -> None:
    session, home = demo_server
    images = [str(home / "red.png"), str(home / "blue.png")]
    run = called(session, "evaluate_image", brief="A blue bicycle", images=images, prompt="blue bike")
    assert len({r["aggregate_score"] for r in run["ranking"]}) == 2  # a winner, not a tie
    for _ in range(3):
        run = called(session, "evaluate_image", brief="A blue bicycle", images=images, prompt="blue bike",
                     run_id=run["run_id"])
    history = run["plateau"]["history"]
    assert len(history) == 4 and len(set(history)) == 1
    assert (run["plateau"]["detected"], run["plateau"]["detected_at"]) == (True, 4)


@pytest.mark.e2e
def test_samples_of_one_image_show_a_spread(demo_server: tuple[StdioSession, Path]) -> None:
    session, home = demo_server
    run = called(session, "evaluate_image", brief="A red bicycle", images=[str(home / "red.png")], prompt="red",
                 samples=3, agent_ids=[called(session, "list_agents", query="composition")["agents"][0]["id"]])
    stats = run["evaluations"][0]["samples"]
    assert stats["scored"] == 3 and len(set(stats["values"])) == 3 and stats["sd"] > 0


@pytest.mark.e2e
def test_viescore_gives_two_different_images_their_own_scores(demo_server: tuple[StdioSession, Path]) -> None:
    session, home = demo_server
    result = called(session, "pairwise_compare", instruction="Make the sky blue", method="viescore",
                    candidates=[str(home / "red.png"), str(home / "blue.png")])
    first, second = result["meta"]["vie_score"]
    assert first != second and result["value"] == ("Image A" if first > second else "Image B")


@pytest.mark.e2e
def test_a_score_text_calibration_reports_defined_agreement(demo_server: tuple[StdioSession, Path]) -> None:
    session, _ = demo_server
    items = [("Paris.", 5), ("Lyon.", 1), ("It is Paris, in France.", 4), ("I don't know", 1), ("paris", 4)]
    dataset = "\n".join(json.dumps({"text": t, "instruction": "Capital of France?", "human_score": h})
                         for t, h in items)
    report = called(session, "calibrate_judge", judge="score_text", dataset=dataset, rubric="correctness",
                    human_scale={"min": 1, "max": 5}, background=False)
    assert report["judged"] == 5 and len({r["judge"] for r in report["results"]}) > 1
    assert report["scores"]["spearman"] is not None


def test_the_image_reply_names_a_template_category_by_what_comes_before_its_colon() -> None:
    categories = TEMPLATES["brand_compliance"].evaluation_categories
    reply = json.loads(demo_reply(image_request(png("blue"), categories=categories)))
    assert list(reply["category_scores"]) == ["brandAccuracy", "textAccuracy", "brandSafety"]
