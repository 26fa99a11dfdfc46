"""Judge agents (seed 000): the model, the four built-in templates, and the store."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

import prompts
from judges.errors import InputError, NotFoundError, did_you_mean
from judges.models.registry import jury_models, model_string
from judges.store.database import Database, timestamp

TOP_K_MAX = 50  # most guideline chunks one search returns (an agent's rag_config.top_k, search_guidelines' top_k)


class RagConfig(BaseModel):
    top_k: int = Field(default=5, description=f"Most guideline chunks retrieved per evaluation (1–{TOP_K_MAX}).")
    similarity_threshold: float | None = Field(
        default=None,
        description="Least cosine similarity (0–1) a chunk needs; null: the server's default for its embedding "
        "model (JUDGE_MCP_SIMILARITY_THRESHOLD, 0.3 for all-MiniLM-L6-v2; the seed's 0.7 finds nothing there).",
    )


class ScoreScale(BaseModel):
    """The scale a judge's prompt asks it to score on; readings are mapped from it to 0–100."""

    min: float = Field(default=0, description="Lowest score the prompt allows, e.g. 1 for MT-Bench-style prompts.")
    max: float = Field(default=100, description="Highest score the prompt allows, e.g. 10.")

    def describe(self) -> str:
        return f"{self.min:g}–{self.max:g}"

    def to_100(self, value: float) -> float:
        return round((value - self.min) / (self.max - self.min) * 100.0, 4)


class Agent(BaseModel):
    id: str
    organization_id: str
    name: str
    system_prompt: str
    evaluation_categories: str | None = None
    scoring_weight: float = Field(description="Influence on the aggregate score, 0–100.")
    optimization_weight: float = Field(description="Influence on prompt optimisation, 0–100.")
    rag_config: RagConfig
    template_id: str | None = None
    model: str | None = Field(default=None, description="Model override for this agent, e.g. 'anthropic:<model>'.")
    models: list[str] | None = Field(default=None, description=(
        "A jury: 2 to 8 different models that each judge (e.g. ['anthropic:<model>', 'openai:<model>']); the "
        "evaluation's score is their mean. A call's own `models` takes precedence."))
    score_scale: ScoreScale = Field(default_factory=ScoreScale, description=(
        "The scale the agent's prompt scores on (default 0–100); a reading outside it is a typed failure "
        "out_of_range, never clamped, and a reading inside it is mapped to 0–100 (raw_score and scale are kept)."))
    created_at: str
    updated_at: str
    deleted_at: str | None = None


@dataclass(frozen=True)
class AgentTemplate:
    id: str
    name: str
    prompt_id: str
    evaluation_categories: str
    scoring_weight: float
    optimization_weight: float

    def system_prompt(self) -> str:
        return prompts.render(self.prompt_id)


TEMPLATES: dict[str, AgentTemplate] = {
    t.id: t
    for t in (
        AgentTemplate(
            "brand_compliance", "Brand Compliance Judge", "agents/brand_compliance@v1",
            "brandAccuracy: logo, colours, typography and tone follow the brand guidelines\n"
            "textAccuracy: visible text matches the brief exactly\n"
            "brandSafety: nothing the guidelines forbid",
            80, 80,
        ),
        AgentTemplate(
            "composition", "Composition Judge", "agents/composition@v1",
            "framing: focal subject, crop, negative space\n"
            "lighting: direction, softness, consistency\n"
            "balance: visual weight and perspective",
            50, 50,
        ),
        AgentTemplate(
            "product_accuracy", "Product Accuracy Judge", "agents/product_accuracy@v1",
            "shape: contours and proportions match the product\n"
            "labels: label text and placement are exact\n"
            "materials: colours and finishes match the specification",
            80, 70,
        ),
        AgentTemplate(
            "technical_quality", "Technical Quality Judge", "agents/technical_quality@v1",
            "artifacts: no generation artefacts\n"
            "sharpness: resolution and focus\n"
            "realism: physically plausible materials and light",
            50, 40,
        ),
    )
}

SortKey = Literal["name", "created_at", "updated_at"]
_EDITABLE = ("name", "system_prompt", "evaluation_categories", "scoring_weight", "optimization_weight",
             "rag_config", "template_id", "model", "score_scale", "models")



def _check_weight(field: str, value: float) -> float:
    if not 0 <= value <= 100:
        raise InputError(f"{field} must be between 0 and 100 (got {value:g})")
    return float(value)


def _check_rag(rag: RagConfig) -> RagConfig:
    if not 1 <= rag.top_k <= TOP_K_MAX:
        raise InputError(f"rag_config.top_k must be between 1 and {TOP_K_MAX} (got {rag.top_k})")
    if rag.similarity_threshold is not None and not 0 <= rag.similarity_threshold <= 1:
        raise InputError(f"rag_config.similarity_threshold must be between 0 and 1 (got {rag.similarity_threshold:g})")
    return rag


def _check_fields(fields: dict[str, Any]) -> dict[str, Any]:
    out = dict(fields)
    if "name" in out:
        out["name"] = (out["name"] or "").strip()
        if not out["name"]:
            raise InputError("name must not be empty")
    if "system_prompt" in out and not (out["system_prompt"] or "").strip():
        raise InputError("system_prompt must not be empty (or give a template_id to use a built-in one)")
    for w in ("scoring_weight", "optimization_weight"):
        if w in out:
            out[w] = _check_weight(w, out[w])
    if "rag_config" in out:
        rag = out["rag_config"]
        out["rag_config"] = _check_rag(rag if isinstance(rag, RagConfig) else RagConfig.model_validate(rag))
    if out.get("template_id") is not None and out["template_id"] not in TEMPLATES:
        raise InputError(f"template_id {out['template_id']!r} is unknown; {did_you_mean(out['template_id'], TEMPLATES)}"
                         f"choose one of: {', '.join(TEMPLATES)}")
    if out.get("score_scale") is not None:
        scale = out["score_scale"]
        scale = scale if isinstance(scale, ScoreScale) else ScoreScale.model_validate(scale)
        if not (math.isfinite(scale.min) and math.isfinite(scale.max)) or scale.min >= scale.max:
            raise InputError(f"score_scale: min must be below max, e.g. {{\"min\": 1, \"max\": 10}} "
                             f"(got {scale.min:g}–{scale.max:g})")
        out["score_scale"] = scale
    if out.get("models"):
        try:
            out["models"] = jury_models(out["models"])
        except ValueError as exc:
            raise InputError(str(exc)) from None
    if out.get("model"):
        try:
            out["model"] = model_string(out["model"])
        except ValueError as exc:
            raise InputError(str(exc)) from None
    return out


class AgentStore:
    """Agents in SQLite, always scoped to one organization; soft delete keeps the row."""

    def __init__(self, db: Database):
        self.db = db

    def create(
        self,
        org: str,
        *,
        name: str,
        system_prompt: str | None = None,
        evaluation_categories: str | None = None,
        scoring_weight: float | None = None,
        optimization_weight: float | None = None,
        rag_config: RagConfig | dict[str, Any] | None = None,
        template_id: str | None = None,
        model: str | None = None,
        score_scale: ScoreScale | dict[str, Any] | None = None,
        models: list[str] | None = None,
    ) -> Agent:
        template = None
        if template_id is not None:
            template = TEMPLATES.get(template_id)
            if template is None:
                raise InputError(f"template_id {template_id!r} is unknown; {did_you_mean(template_id, TEMPLATES)}"
                                 f"choose one of: {', '.join(TEMPLATES)}")
        if system_prompt is None and template is None:
            raise InputError("system_prompt is required (or give a template_id to use a built-in one)")
        fields = _check_fields(
            {
                "name": name,
                "system_prompt": system_prompt if system_prompt is not None else template.system_prompt(),  # type: ignore[union-attr]
                "evaluation_categories": evaluation_categories
                if evaluation_categories is not None
                else (template.evaluation_categories if template else None),
                "scoring_weight": scoring_weight if scoring_weight is not None else (template.scoring_weight if template else 50),
                "optimization_weight": optimization_weight
                if optimization_weight is not None
                else (template.optimization_weight if template else 50),
                "rag_config": rag_config if rag_config is not None else RagConfig(),
                "template_id": template_id,
                "model": model or None,
                "score_scale": score_scale if score_scale is not None else ScoreScale(),
                "models": models or None,
            }
        )
        now = timestamp()
        agent = Agent(id=str(uuid.uuid4()), organization_id=org, created_at=now, updated_at=now, **fields)
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO agents (id, organization_id, name, system_prompt, evaluation_categories, scoring_weight, "
                "optimization_weight, rag_config, template_id, model, created_at, updated_at, deleted_at, score_scale, "
                "models) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,NULL,?,?)",
                (agent.id, org, agent.name, agent.system_prompt, agent.evaluation_categories, agent.scoring_weight,
                 agent.optimization_weight, agent.rag_config.model_dump_json(), agent.template_id, agent.model,
                 now, now, agent.score_scale.model_dump_json(), _models_json(agent.models)),
            )
        return agent

    def get(self, org: str, agent_id: str) -> Agent:
        rows = self.db.query(
            "SELECT * FROM agents WHERE id=? AND organization_id=? AND deleted_at IS NULL", (agent_id, org)
        )
        if not rows:
            raise NotFoundError(f"no agent with id {agent_id!r} in this organization (list_agents shows the ids)")
        return _agent(rows[0])

    def list(self, org: str, *, query: str | None = None, sort_by: SortKey = "created_at",
             order: Literal["asc", "desc"] = "desc") -> list[Agent]:
        if sort_by not in ("name", "created_at", "updated_at"):
            raise InputError(f"sort_by must be name, created_at or updated_at (got {sort_by!r})")
        if order not in ("asc", "desc"):
            raise InputError(f"order must be asc or desc (got {order!r})")
        sql = "SELECT * FROM agents WHERE organization_id=? AND deleted_at IS NULL"
        params: list[object] = [org]
        if query:
            find = "instr" if self.db.kind == "sqlite" else "strpos"  # (haystack, needle) in both
            sql += f" AND ({find}(lower(name), ?) > 0 OR {find}(lower(system_prompt), ?) > 0)"
            params += [query.lower(), query.lower()]
        key = "lower(name)" if sort_by == "name" else sort_by
        sql += f" ORDER BY {key} {order.upper()}, {self.db.insertion_order} {order.upper()}"
        return [_agent(r) for r in self.db.query(sql, tuple(params))]

    def update(self, org: str, agent_id: str, changes: dict[str, Any]) -> Agent:
        unknown = set(changes) - set(_EDITABLE)
        if unknown:
            raise InputError(f"cannot update {', '.join(sorted(unknown))}; editable: {', '.join(_EDITABLE)}")
        current = self.get(org, agent_id)
        fields = _check_fields({k: v for k, v in changes.items() if v is not None})
        if "model" in fields:
            fields["model"] = fields["model"] or None  # "" clears the override
        if "models" in fields:
            fields["models"] = fields["models"] or None  # [] clears the jury
        if not fields:
            return current
        updated = current.model_copy(update={**fields, "updated_at": timestamp()})
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE agents SET name=?, system_prompt=?, evaluation_categories=?, scoring_weight=?, "
                "optimization_weight=?, rag_config=?, template_id=?, model=?, updated_at=?, score_scale=?, models=? "
                "WHERE id=? AND organization_id=? AND deleted_at IS NULL",
                (updated.name, updated.system_prompt, updated.evaluation_categories, updated.scoring_weight,
                 updated.optimization_weight, updated.rag_config.model_dump_json(), updated.template_id,
                 updated.model, updated.updated_at, updated.score_scale.model_dump_json(),
                 _models_json(updated.models), agent_id, org),
            )
        return updated

    def delete(self, org: str, agent_id: str) -> Agent:
        agent = self.get(org, agent_id)
        deleted = agent.model_copy(update={"deleted_at": timestamp()})
        with self.db.transaction() as conn:
            conn.execute("UPDATE agents SET deleted_at=? WHERE id=? AND organization_id=?",
                         (deleted.deleted_at, agent_id, org))
        return deleted


def _models_json(models: list[str] | None) -> str | None:
    return json.dumps(models) if models else None


def _agent(row: Any) -> Agent:
    data = dict(row)
    data["models"] = json.loads(data["models"]) if data.get("models") else None
    data["rag_config"] = RagConfig.model_validate(json.loads(data["rag_config"]))
    scale = data.pop("score_scale", None)
    data["score_scale"] = ScoreScale.model_validate(json.loads(scale)) if scale else ScoreScale()
    return Agent.model_validate(data)
