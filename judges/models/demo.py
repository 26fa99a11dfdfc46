"""The demo model (`JUDGE_MCP_MODEL=demo`): plausible, clearly labelled replies without any key, so a
newcomer can try every tool (e.g. in the MCP Inspector) before configuring a real model.

Its replies are text like any backend's and go through the one reading path (judges/reading/), so
what a tool shows is what it would show for a real model that wrote the same. Every reply says it is
the demo's: text fields start with "[demo model]".

Its replies vary with what is judged and only with that: each reply draws its score, verdict, ratings and
top issue from a hash of the request's content (the images' bytes, the judged texts, the judge's own
prompt, the sample index). Two different images get different scores, the same image under the same brief
gets the same score every time (so a ranking, a plateau or a calibration shows what it is for), and a
pairwise verdict is decided by the candidates' content, never their position (so it survives the swap).

How a reply is chosen: a request that asks for structured output carries a JSON Schema whose title
is the judge's output model (ImageVerdict, JudgeVerdict, ...). A title in `REPLIES` gets that judge's
hand-written reply; any other schema gets a value synthesised from the schema itself (so a new judge
works with the demo at once); a request without a schema (pairwise, VIEScore, an agent's own format)
gets one labelled JSON object holding a `winner`, a `score` and a `reasoning`, which every
free-format reader of ours accepts. A new judge teaches the demo its reply with `@reply_for("<its
output model's name>")` here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from judges.models.protocol import ImagePart, ModelReply, ModelRequest, TextPart, Usage

LABEL = "[demo model]"

Reply = Callable[[ModelRequest, dict[str, Any]], Any]
REPLIES: dict[str, Reply] = {}
T = TypeVar("T")


def reply_for(title: str) -> Callable[[Reply], Reply]:
    """Register the demo's reply to requests whose JSON Schema is titled `title` (the output model's name)."""

    def register(fn: Reply) -> Reply:
        REPLIES[title] = fn
        return fn

    return register


def request_text(request: ModelRequest) -> str:
    """The system prompt and every text part of the messages, in order."""
    parts = [request.system or ""]
    for message in request.messages:
        parts.extend(p.text for p in message.content if isinstance(p, TextPart))
    return "\n".join(parts)


def request_images(request: ModelRequest) -> list[str]:
    """The request's images (base64), in order."""
    return [p.data_base64 for m in request.messages for p in m.content if isinstance(p, ImagePart)]


def _fenced(text: str, tag: str) -> str | None:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    return match.group(1).strip() if match else None


def _all_fenced(text: str, tag: str) -> list[str]:
    return [m.strip() for m in re.findall(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)]


class Draw:
    """Deterministic choices from a hash of `parts`: the same parts give the same choices, in the same order."""

    def __init__(self, *parts: object) -> None:
        self.seed = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8", "surrogatepass")).digest()
        self.count = 0

    def fraction(self, salt: object = None) -> float:
        """A number in [0, 1); with `salt`, the same number for the same salt whatever was drawn before."""
        if salt is None:
            self.count += 1
            salt = self.count
        digest = hashlib.sha256(self.seed + str(salt).encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def between(self, low: float, high: float, digits: int = 1, salt: object = None) -> float:
        return round(low + self.fraction(salt) * (high - low), digits)

    def whole(self, low: float, high: float, salt: object = None) -> int:
        """A whole number from low to high, both included."""
        return int(low + min(int(self.fraction(salt) * (high - low + 1)), high - low))

    def pick(self, options: Sequence[T], salt: object = None) -> T:
        return options[int(self.fraction(salt) * len(options))]


def _content(request: ModelRequest) -> Draw:
    """Choices drawn from everything the request shows the judge (its text and images) and its sample index."""
    return Draw(request_text(request), *request_images(request), request.sample)


# Image issues the demo may report, each with the fix the next prompt should carry and a verbatim instruction.
IMAGE_ISSUES = (
    ("the subject sits off-centre", "centre the subject and leave space around it", "subject centred"),
    ("the colours look washed out", "ask for saturated, high-contrast colours", "vivid colours"),
    ("the background is cluttered", "ask for a plain, uncluttered background", "plain background"),
    ("the lighting is flat", "ask for soft directional light from the left", "soft side light"),
    ("the main subject is cropped at the edge", "show the whole subject with a clear margin", "whole subject in frame"),
    ("fine detail is blurred", "ask for sharp focus on the subject", "sharp focus"),
)
IMAGE_STRENGTHS = ("clear subject", "readable colours", "balanced composition", "matches the brief's setting",
                   "clean edges", "pleasant light")


def _severity(share: float) -> str:
    """A lower score, a graver top issue (share: the score's place on its scale, 0..1)."""
    return "minor" if share >= 0.8 else "moderate" if share >= 0.65 else "major" if share >= 0.5 else "critical"


def _category_names(text: str) -> list[str]:
    """The names an agent's categories give: a line's "name: description" is named before its colon (the
    description may hold commas, as the templates' do); a line without a colon may list several, by commas."""
    names: list[str] = []
    for line in re.split(r"[\n;]", text):
        head, colon, _ = line.partition(":")
        names += [head.strip()] if colon else [c.strip() for c in line.split(",")]
    return [n for n in dict.fromkeys(names) if n][:12]


@reply_for("ImageVerdict")
def _image(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    text = request_text(request)
    # The image, the brief, the prompt and the judge decide; the iteration context (earlier scores) does not,
    # so the same image keeps its score in a later iteration.
    draw = Draw(request.system, *request_images(request), _fenced(text, "brief"), _fenced(text, "generation_prompt"),
                _fenced(text, "categories"), request.sample)
    low, high = _scale(text)
    share = draw.between(0.3, 0.95, 3)
    problem, fix, instruction = draw.pick(IMAGE_ISSUES)
    categories = _category_names(_fenced(text, "categories") or "")
    worked = sorted({draw.pick(IMAGE_STRENGTHS), draw.pick(IMAGE_STRENGTHS)})
    return {
        "score": round(low + share * (high - low), 1),
        "top_issue": {"problem": f"{LABEL} {problem}", "severity": _severity(share), "fix": f"{LABEL} {fix}"},
        "category_scores": {c: draw.between(30, 95, 0, salt=c) for c in categories},
        "what_worked": [f"{LABEL} {w}" for w in worked],
        "prompt_instructions": [instruction],
        "checklist": [{"item": f"{LABEL} matches the brief", "passed": share >= 0.6, "note": None}],
        "feedback": f"{LABEL} An example verdict drawn from the image's content; configure a real model to judge it.",
    }


def _scale(text: str) -> tuple[float, float]:
    match = re.search(r"overall score (-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)", text)
    return (float(match.group(1)), float(match.group(2))) if match else (0.0, 100.0)


CODE_DIMENSIONS = ("compilation", "tests_functional", "tests_edge", "types", "style", "security", "boundaries",
                   "schema")
CODE_CAUSES = (
    ("an edge case of the spec is not handled", "handle the empty input before the main loop"),
    ("a name does not follow the glossary", "rename it as the glossary spells it"),
    ("an error is swallowed instead of reported", "raise the error with the failing value in its message"),
    ("the spec's rounding rule is not applied", "round once, at the end, as the spec says"),
)


@reply_for("JudgeVerdict")
def _code(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    # The spec, the project and the gates' findings decide (not the gates' timings or log lines).
    try:
        data = json.loads(_fenced(request_text(request), "judge_input") or "{}")
    except ValueError:
        data = {}
    signals = data.get("signals", {}) if isinstance(data, dict) else {}
    findings = {k: signals.get(k) for k in ("lintErrors", "typeErrors", "boundaryErrors")}
    test = signals.get("test") or {}
    failed = bool(test.get("failed")) if isinstance(test, dict) else False
    draw = Draw(json.dumps([data.get("spec"), data.get("brief"), findings, failed], sort_keys=True, default=str),
                request.sample)
    broken = {"style": bool(findings["lintErrors"]), "types": bool(findings["typeErrors"]),
              "boundaries": bool(findings["boundaryErrors"]), "tests_functional": failed}
    scores = {d: 0.0 if broken.get(d) else draw.between(0.5, 1.0, 1, salt=d) for d in CODE_DIMENSIONS}
    cause, fix = draw.pick(CODE_CAUSES)
    verdict = "revise" if any(broken.values()) else draw.pick(("accept", "accept", "revise"))
    return {
        "verdict": verdict,
        "scores": scores,
        "explanations": {"root_cause": f"{LABEL} {cause}" if verdict != "accept" else f"{LABEL} none found",
                         "minimal_fix": f"{LABEL} {fix}" if verdict != "accept" else f"{LABEL} none needed"},
        "fix_plan": [],
    }


@reply_for("FixerPatch")
def _fixer(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    # A new file, so the patch validates against any tree (an edit would need text the demo cannot know).
    return {"ops": [{"kind": "add", "path": "DEMO_MODEL_SUGGESTION.md",
                     "content": f"{LABEL} A real model would propose minimal edits to your files here.\n"}]}


@reply_for("NextPrompt")
def _next_prompt(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    text = request_text(request)
    current = _fenced(text, "current_prompt") or "the current prompt"
    issues = [i.replace(LABEL, "").strip() for i in _all_fenced(text, "issue")]
    problems = [i.split(" -- fix: ")[0] for i in issues]
    added = [i for i in _all_fenced(text, "instruction") if i not in current]
    return {"prompt": ", ".join([current, *added]) if added else current,
            "addressed": [f"{LABEL} {p}" for p in dict.fromkeys(problems)]}


ANALYSIS_RATINGS = ("poor", "sufficient", "sufficient", "impressive", "impressive")


@reply_for("CategoryReply")
def _analysis(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    draw = _content(request)
    reply = {}
    for criterion in schema.get("properties", {}):
        rating = draw.pick(ANALYSIS_RATINGS, salt=criterion)
        reply[criterion] = {"rating": rating,
                            "rationale": f"{LABEL} {criterion.replace('_', ' ')} is {rating} in this example reply.",
                            "inputs_evaluated": [{"field": "analysis", "value": "(the whole analysis)"}]}
    return reply


def _count(text: str, label: str) -> int:
    """How many numbered items (`Claim 1:`, `Context 2:` ...) the prompt holds."""
    return len(re.findall(rf"^{label} \d+:", text, re.M))


def _score_range(text: str) -> tuple[float, float]:
    match = re.search(r'"score": <(?:number from )?(-?\d+(?:\.\d+)?) to (-?\d+(?:\.\d+)?)>', text)
    return (float(match.group(1)), float(match.group(2))) if match else (1.0, 5.0)


def _text_score(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    low, high = _score_range(request_text(request))
    return {"score": _content(request).whole(low, high),
            "reasoning": f"{LABEL} An example score drawn from the text; configure a real model for real judgements."}


reply_for("CriterionVerdict")(_text_score)
reply_for("RelevanceReading")(_text_score)


@reply_for("TrajectoryReading")
def _trajectory(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    score = _content(request).whole(1, 5)
    return {"goal_reached": score >= 3, "unnecessary_steps": [], "ignored_failures": [], "score": score,
            "reasoning": f"{LABEL} An example reading of the steps, drawn from their content."}


@reply_for("ReferenceVerdict")
def _reference(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    verdict = _content(request).pick(("equivalent", "partially_correct", "incorrect"))
    return {"verdict": verdict,
            "missing": [f"{LABEL} a detail of the reference"] if verdict == "partially_correct" else [],
            "wrong": [f"{LABEL} the main fact"] if verdict == "incorrect" else [],
            "reasoning": f"{LABEL} An example comparison; configure a real model for real judgements."}


@reply_for("FaithfulnessReading")
def _faithfulness(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    text = request_text(request)
    contexts, draw = _count(text, "Context"), _content(request)
    claims = []
    for i in range(1, _count(text, "Claim") + 1):
        verdict = draw.pick(("supported", "supported", "supported", "contradicted", "not_found"), salt=i) \
            if contexts else "not_found"
        claims.append({"claim": i, "verdict": verdict,
                       "context": draw.whole(1, contexts, salt=f"context {i}") if verdict != "not_found" else None,
                       "reason": f"{LABEL} an example verdict"})
    return {"claims": claims}


@reply_for("ContextRelevanceReading")
def _context_relevance(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    draw = _content(request)
    return {"contexts": [{"context": i, "relevant": draw.fraction(salt=i) < 0.7, "reason": f"{LABEL} an example verdict"}
                         for i in range(1, _count(request_text(request), "Context") + 1)]}


@reply_for("EvaluationSteps")
def _steps(request: ModelRequest, schema: dict[str, Any]) -> dict[str, Any]:
    return {"steps": [f"{LABEL} read the response", f"{LABEL} check it against the criterion"]}


def synthesise(schema: dict[str, Any], node: dict[str, Any] | None = None, name: str = "value") -> Any:
    """A plausible value for `node` (default: the whole schema): labelled strings, numbers inside their bounds."""
    node = schema if node is None else node
    if "$ref" in node:
        target: Any = schema
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return synthesise(schema, target, name)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"] or node["anyOf"]
        return synthesise(schema, options[0], name)
    if "enum" in node:
        return node["enum"][len(node["enum"]) // 2]
    if "const" in node:
        return node["const"]
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        return {key: synthesise(schema, sub, key) for key, sub in node.get("properties", {}).items()}
    if kind == "array":
        items = node.get("items")
        return [synthesise(schema, items, name)] if isinstance(items, dict) else []
    if kind in ("number", "integer"):
        low, high = node.get("minimum", 0), node.get("maximum", 10)
        value = low + 0.7 * (high - low)
        return round(value) if kind == "integer" else round(value, 2)
    if kind == "boolean":
        return True
    return f"{LABEL} {node.get('title') or name}"


def _preferred(request: ModelRequest) -> str:
    """A or B (tie when they are the same), chosen by the candidates' content, never by their position,
    so the demo's verdict survives the position swap."""
    images = request_images(request)
    text = request_text(request)
    a, b = _fenced(text, "response_a"), _fenced(text, "response_b")
    if a is None and len(images) >= 2:
        a, b = images[-2], images[-1]
    if a is None or b is None or a == b:
        return "A" if a is None or b is None else "tie"
    if not images and len(a) != len(b):
        return "A" if len(a) > len(b) else "B"  # texts: the fuller answer, as a lenient judge would
    digest = [hashlib.sha256(x.encode()).hexdigest() for x in (a, b)]
    return "A" if digest[0] > digest[1] else "B"


def _free_scale(text: str) -> tuple[float, float]:
    """The scale a free-form prompt asks for ("From 0 to 10", "<0-10>"); 0–10 when it names none."""
    match = re.search(r"[Ff]rom (-?\d+(?:\.\d+)?) to (-?\d+(?:\.\d+)?)", text) or re.search(
        r'"score": <(-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)>', text)
    return (float(match.group(1)), float(match.group(2))) if match else (0.0, 10.0)


def demo_reply(request: ModelRequest) -> str:
    """The demo's text for `request` (JSON, read by the judge's own reader like any model's reply)."""
    schema = request.json_schema
    if schema is not None:
        make = REPLIES.get(str(schema.get("title", "")))
        value = make(request, schema) if make is not None else synthesise(schema)
        return json.dumps(value, ensure_ascii=False)
    text = request_text(request)
    low, high = _free_scale(text)
    return json.dumps({
        "winner": _preferred(request),
        "score": Draw(text, *request_images(request), request.sample).whole(low + (high - low) * 0.3, high),
        "reasoning": f"{LABEL} An example answer: this server runs with JUDGE_MCP_MODEL=demo, which answers "
                     "every prompt with a placeholder drawn from its content. Configure a real model for real "
                     "judgements.",
    })


class DemoClient:
    """A ModelClient that answers every request locally with a labelled example reply."""

    name = "demo"

    async def complete(self, request: ModelRequest) -> ModelReply:
        text = demo_reply(request)
        asked = len(request_text(request))
        return ModelReply(text=text, model="demo", usage=Usage(input_tokens=asked // 4, output_tokens=len(text) // 4))
