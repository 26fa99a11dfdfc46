"""All settings, from JUDGE_MCP_* environment variables (and the SDKs' own variables)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from judges.code.gates import GateSettings
from judges.code.sandbox import Limits as GateLimits
from judges.image.service import ImageSettings
from judges.inputs.images import ImagePolicy
from judges.inputs.sizes import SizeLimits
from judges.models.guard import CallPolicy
from judges.models.prices import Price
from judges.models.registry import parse_model_string
from judges.patches.ops import DEFAULT_LIMITS, PatchLimits
from judges.store.access import ROLES
from judges.store.guidelines import IngestSettings
from rag.formats import Limits as DocumentLimits

# Every limit's number is written once, as the default of the judges' (or rag's) own Limits object;
# Settings owns the environment variable and builds those objects from it (server/context.py, code_tools.py).
CALLS, INGEST, DOCUMENTS, GATE_LIMITS = CallPolicy(), IngestSettings(), DocumentLimits(), GateLimits()
SIZES = SizeLimits()


def parse_tokens(text: str) -> dict[str, str]:
    """'token=organization' or 'token=organization:role' pairs (commas or lines; '#' comments). Each pair splits
    at its LAST '=': organizations may not contain '=', tokens may (base64). The role (member, admin,
    superadmin; default admin) follows the organization's last ':'. Errors name the pair's position, never the
    token."""
    tokens: dict[str, str] = {}
    position = 0
    for item in text.replace("\n", ",").split(","):
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        position += 1
        token, sep, org = item.rpartition("=")
        token, org = token.strip(), org.strip()
        if not sep or not org:
            raise ValueError(f"pair {position} is not 'token=organization' (e.g. 'Zm9vYmFy=acme')")
        if not token:
            raise ValueError(f"pair {position} has an empty token")
        name, colon, role = org.rpartition(":")
        if colon and role not in ROLES:
            raise ValueError(f"pair {position} names the role {role!r}; roles are {', '.join(ROLES)} "
                             "(e.g. 'Zm9vYmFy=acme:member')")
        if colon and not name.strip():
            raise ValueError(f"pair {position} has a role but no organization (e.g. 'Zm9vYmFy=acme:member')")
        if token in tokens:
            raise ValueError(f"pair {position} repeats the token of an earlier pair; each token names one organization")
        tokens[token] = org
    return tokens


def _default_home() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "judge-mcp"


class Settings(BaseSettings):
    """Every setting of the server. A bad value stops the server at start, naming the variable."""

    model_config = SettingsConfigDict(env_prefix="JUDGE_MCP_", extra="ignore", populate_by_name=True)

    home: Path = Field(default_factory=_default_home, description="Data directory (SQLite, embedded Chroma).")
    org: str = Field(default="default", min_length=1, description="Organization of a stdio server.")
    model: str = Field(default="auto", description="auto | sampling | anthropic:<m> | openai:<m> | "
                       "openai-compatible:<m> | demo (labelled example replies, no key)")
    allowed_roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Directories that file paths may lie in, separated like PATH. Unset: the client's MCP "
                    "roots (stdio), else no file access. Never '/' and never the working directory implicitly.",
    )
    tokens: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict, description="HTTP bearer tokens: 'token1=orgA,token2=orgB:member', or @/path/to/file. "
        "Each token's role follows its organization's last ':' (member, admin, superadmin); default admin.",
    )
    stateless_http: bool = Field(default=True, description="Streamable HTTP without sessions: every request stands "
                                 "alone, so any replica behind a load balancer can answer it. 0: the SDK's "
                                 "sessions (Mcp-Session-Id), which lets the server ask the client (sampling, roots).")
    http_keepalive_s: int = Field(default=75, ge=1, description="Seconds an idle HTTP connection is kept open. Longer "
                                  "than a load balancer's or client pool's idle timeout (commonly 60 s), so a request "
                                  "sent on a reused connection never meets one the server is just closing.")
    rate_limit_per_minute: int | None = Field(default=None, ge=1, description="HTTP tool calls one organization may "
                                              "make per minute, counted in the database (so across replicas); unset: "
                                              "no limit.")
    readyz_check_model: bool = Field(default=False, description="/readyz also checks that the model backend's "
                                     "address answers (an HTTP request to its base URL).")
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Host headers accepted on a non-loopback HTTP bind (comma-separated)."
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Origin headers accepted on a non-loopback HTTP bind (comma-separated)."
    )
    database_url: str | None = Field(default=None, description="A PostgreSQL database for the state (agents, "
                                     "documents, runs, jobs) instead of SQLite in the data home, e.g. "
                                     "postgresql://judge:secret@127.0.0.1:5432/judge; several replicas share it.")
    lease_s: float = Field(default=15.0, gt=0, le=3600, description="How long a background job or upload stays held "
                           "by a replica that stopped heartbeating before another marks it interrupted.")
    chroma_url: str | None = Field(default=None, description="A Chroma server (chroma run) to use instead of the "
                                   "embedded store, e.g. http://127.0.0.1:8001.")

    concurrency: int = Field(default=16, ge=1, le=256, description="Model calls in flight at once, all judges together.")
    call_deadline_s: float = Field(default=CALLS.deadline_s, gt=0, description="Total time one model call may take, retries included.")
    max_retries: int = Field(default=CALLS.max_retries, ge=0, le=10, description="Retries of a failed model call (rate limits, "
                             "server errors), within its deadline.")
    max_retry_wait_s: float = Field(default=CALLS.max_retry_wait_s, ge=0, description="Longest wait before one retry (a "
                                    "Retry-After beyond it fails the call).")
    anthropic_model: str = Field(default="claude-sonnet-4-5", description="The model JUDGE_MCP_MODEL=auto uses "
                                 "with ANTHROPIC_API_KEY.")
    openai_model: str = Field(default="gpt-4.1-mini", description="The model auto uses with OPENAI_API_KEY.")
    compatible_model: str = Field(default="default", description="The model auto uses with an "
                                  "OpenAI-compatible base URL.")
    compatible_base_url: str | None = Field(default=None, description="An OpenAI-compatible server (vLLM, Ollama, "
                                            "llama.cpp), e.g. http://127.0.0.1:8080/v1.")
    log_level: str = Field(default="INFO", pattern="^(DEBUG|INFO|WARNING|ERROR|CRITICAL)$",
                           description="Our log on stderr (one line per tool call at INFO); libraries log from WARNING.")

    # Guideline documents (seed 001) and retrieval.
    embedding_backend: str = Field(default="minilm-onnx-int8", pattern="^(minilm-onnx-int8|sentence-transformers)$",
                                   description="How guideline chunks are embedded: int8 ONNX MiniLM, or "
                                   "sentence-transformers (torch).")
    embedding_model: str = Field(default="packaged", description="'packaged' (all-MiniLM-L6-v2) or a model name/path.")
    model_cache: Path | None = Field(default=None, description="Where exported models are kept; default <home>/models.")
    warm_embeddings: bool = Field(default=True, description="Load the embedding model and the store in the background at start.")
    warm_delay_s: float = Field(default=1.0, ge=0, description="Seconds after start before the warm-up begins.")
    similarity_threshold: float = Field(default=INGEST.default_threshold, ge=0, le=1, description="Default least similarity (MiniLM).")
    max_upload_bytes: int = Field(default=INGEST.max_file_bytes, ge=1, description="Largest guideline document.")
    max_request_bytes: int | None = Field(
        default=None, ge=1024, description="Largest HTTP request body; default: room for one upload of "
        "max_upload_bytes (or one image of max_image_bytes) in base64, plus 1 MiB.")
    chunk_size: int = Field(default=INGEST.chunk_size, ge=100, le=20000, description="Characters per guideline chunk.")
    chunk_overlap: int = Field(default=INGEST.chunk_overlap, ge=0, description="Characters shared by neighbouring chunks.")
    parse_timeout_s: float = Field(default=INGEST.parse_timeout_s, gt=0, description="Time one document may take to parse.")
    parse_memory_mb: int = Field(default=INGEST.parse_memory_mb, ge=128, description="Memory limit of a parse worker process.")
    parse_workers: int = Field(default=INGEST.parse_workers, ge=1, le=16, description="Parse worker processes kept warm; "
                               "at most this many documents are parsed at once, the rest wait their turn.")
    max_pdf_pages: int = Field(default=DOCUMENTS.max_pages, ge=1, description="Most pages read from one PDF.")
    max_docx_uncompressed_bytes: int = Field(default=DOCUMENTS.max_docx_uncompressed, ge=1, description="Largest unpacked DOCX "
                                             "(a zip bomb is refused).")
    max_docx_ratio: float = Field(default=DOCUMENTS.max_docx_ratio, gt=1, description="Largest DOCX compression ratio accepted.")
    retrieval: str = Field(default="hybrid", pattern="^(hybrid|dense|bm25)$", description="How guideline chunks "
                           "are ranked: hybrid (dense + BM25, reciprocal rank fusion), dense or bm25.")
    search_cache_vectors: int = Field(
        default=100_000, ge=0, description="Guideline vectors kept in memory for exact search (all agents together; "
        "384 floats each). An agent with more is searched through Chroma's own index.")

    # Image judging (seed 000).
    max_image_bytes: int = Field(default=ImagePolicy.max_bytes, ge=1, description="Largest image accepted.")
    max_image_side: int = Field(default=ImagePolicy.max_side, ge=64, description="Longer images are downscaled before sending.")
    max_image_pixels: int = Field(default=ImagePolicy.max_pixels, ge=1, description="Images with more pixels are refused "
                                  "(read from the header, before decoding).")
    max_images: int = Field(default=ImageSettings.max_images, ge=1, le=64, description="Most images in one evaluate_image call.")
    allow_image_urls: bool = Field(default=ImagePolicy.allow_urls, description="Accept http(s) image URLs (public addresses only).")
    max_iterations: int = Field(default=ImageSettings.max_iterations, ge=1, le=100, description="Default iteration budget of a run.")
    plateau_window: int = Field(default=ImageSettings.plateau_window, ge=1, description="Iterations compared to detect a plateau.")
    plateau_threshold: float = Field(default=ImageSettings.plateau_threshold, ge=0, le=1, description="Least relative gain over the window "
                                     "that is not a plateau.")
    analysis_categories_dir: Path | None = Field(
        default=None, description="Extra evaluate_analysis categories: <dir>/<name>/{system.j2,user.j2,spec.json}.")
    gate_timeout_s: float = Field(default=GateSettings.timeout_s, gt=0, description="Wall-clock limit of one quality gate.")
    patch_max_ops: int = Field(default=DEFAULT_LIMITS.max_ops, ge=1, description="Most ops in one patch "
                               "(validate_patch, apply_patch, the fixer); a tool call's max_ops overrides it.")
    patch_max_bytes: int = Field(default=DEFAULT_LIMITS.max_bytes, ge=1, description="Most bytes of text in one "
                                 "patch; a tool call's max_bytes overrides it.")
    pairwise_retries: int = Field(default=2, ge=0, le=10, description="pairwise_compare's repair round: 0 turns "
                                  "it off; any other value gives the one repair round every judge has (the "
                                  "reading path asks again once, carrying what was wrong).")
    max_samples: int = Field(default=10, ge=1, le=100, description=(
        "Most repeated samples one scoring call may ask for (`samples` on evaluate_image, pairwise_compare, "
        "judge_code, evaluate_analysis, score_text); the n requests run concurrently."))
    rank_max_calls: int = Field(default=120, ge=2, le=10_000, description=(
        "Most model calls one rank_texts call may plan (2 per game, both orders; 1 per candidate for method "
        "score); a larger plan is refused before any call, naming a cheaper method."))
    max_text_chars: int = Field(default=SIZES.text_chars, ge=1, description=(
        "Longest text argument of the text judges (score_text, compare_to_reference, rank_texts, "
        "evaluate_rag_answer, evaluate_trajectory: each text, answer, reference, context, candidate, goal) and of "
        "search queries, in characters; a longer one is refused before any work."))
    max_list_items: int = Field(default=SIZES.list_items, ge=1, description=(
        "Most entries in one list argument of the text judges (evaluate_trajectory's steps and expected_tools, "
        "contexts); a longer list is refused before any work."))
    max_analysis_chars: int = Field(default=SIZES.analysis_chars, ge=1, description=(
        "Largest evaluate_analysis analysis (and schema), in characters of JSON; a larger one is refused before "
        "any check runs."))
    parse_fallback_score: float | None = Field(
        default=None, ge=0, le=100,
        description="Opt-in: score given to a judge whose reply cannot be parsed (the seed used 50). Off by default.",
    )

    # The result cache, prices and budgets (judges/store/metering.py).
    cache_ttl_s: float = Field(default=7 * 24 * 3600, ge=0, description=(
        "How long a cached model reply is reused (seconds; default a week). 0 turns the result cache off."))
    cache_max_entries: int = Field(default=10_000, ge=1, description=(
        "Most cached model replies kept per organization; the oldest go first."))
    prices: dict[str, Price] = Field(default_factory=dict, description=(
        'USD per million tokens per model, as JSON, added to (or overriding) the built-in table, e.g. '
        '{"gpt-4.1-mini": {"input": 0.4, "output": 1.6}}; a key is a model name or a full model string '
        "(openai-compatible:llama3). A model with no price has a null cost."))
    daily_budget_usd: float | None = Field(default=None, ge=0, description=(
        "Each organization's daily budget in USD (UTC days): a call that would ask a model once it is spent "
        "is refused; calls already running finish. Unset: no budget."))
    org_budgets_usd: dict[str, float] = Field(default_factory=dict, description=(
        'Daily budgets of particular organizations, as JSON, overriding JUDGE_MCP_DAILY_BUDGET_USD, e.g. '
        '{"acme": 5.0}.'))

    # The official SDKs' variables, read here so nothing else reads the environment.
    anthropic_api_key: str | None = Field(default=None, validation_alias=AliasChoices("ANTHROPIC_API_KEY"),
                                           description="Anthropic API key (as the SDK reads it).")
    anthropic_base_url: str | None = Field(default=None, validation_alias=AliasChoices("ANTHROPIC_BASE_URL"),
                                            description="Another Anthropic endpoint (a proxy or gateway).")
    openai_api_key: str | None = Field(default=None, validation_alias=AliasChoices("OPENAI_API_KEY"),
                                        description="OpenAI API key (as the SDK reads it).")
    openai_base_url: str | None = Field(default=None, validation_alias=AliasChoices("OPENAI_BASE_URL"),
                                         description="Another OpenAI endpoint; alone, an OpenAI-compatible server.")

    @field_validator("allowed_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: object) -> object:
        if isinstance(value, str):
            return [p for p in value.split(os.pathsep) if p.strip()]
        return value

    @field_validator("allowed_roots")
    @classmethod
    def _resolve_roots(cls, value: list[Path]) -> list[Path]:
        roots = [p.expanduser().resolve() for p in value]
        for i, root in enumerate(roots, 1):
            if root == Path(root.anchor):
                raise ValueError(f"entry {i} is {str(root)!r}, which would open the whole filesystem; "
                                 "name the project directories instead, e.g. /home/me/project")
        return roots

    @field_validator("allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip()]
        return value

    @field_validator("tokens", mode="before")
    @classmethod
    def _parse_tokens(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("@"):
            text = Path(text[1:]).expanduser().read_text(encoding="utf-8")
        return parse_tokens(text)

    @field_validator("model", mode="after")
    @classmethod
    def _check_model(cls, value: str) -> str:
        parse_model_string(value)
        return value

    @model_validator(mode="after")
    def _home_absolute(self) -> Settings:
        self.home = self.home.expanduser().resolve()
        return self

    @model_validator(mode="after")
    def _overlap_below_size(self) -> Settings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("JUDGE_MCP_CHUNK_OVERLAP must be smaller than JUDGE_MCP_CHUNK_SIZE")
        return self

    def size_limits(self) -> SizeLimits:
        """The size limits of the text and analysis judges' arguments."""
        return SizeLimits(self.max_text_chars, self.max_list_items, self.max_analysis_chars)

    def patch_limits(self, max_ops: int | None = None, max_bytes: int | None = None) -> PatchLimits:
        """The patch limits, with a tool call's own values where it gave them."""
        return PatchLimits(self.patch_max_ops, self.patch_max_bytes).with_overrides(max_ops, max_bytes)

    @property
    def request_body_limit(self) -> int:
        """The HTTP body limit: explicit, or big enough for the largest inline upload the README promises."""
        if self.max_request_bytes is not None:
            return self.max_request_bytes
        largest = max(self.max_upload_bytes, self.max_image_bytes)
        return -(-largest // 3) * 4 + 1024 * 1024

    @property
    def database_path(self) -> Path:
        return self.home / "judge.sqlite3"

    @property
    def chroma_path(self) -> Path:
        return self.home / "chroma"

    @property
    def model_cache_dir(self) -> Path:
        return self.model_cache or self.home / "models"

    # The gate sandbox (judge_code / propose_patch run the caller's code in their gates).
    gate_sandbox: str = Field(default="auto", pattern="^(auto|bwrap|none)$", description=(
        "auto: bubblewrap when it works here, else none; bwrap: required (the server stops at start without it); "
        "none: gates run unisolated (refused over HTTP with tokens unless JUDGE_MCP_UNSANDBOXED_GATES=1)."))
    unsandboxed_gates: bool = Field(default=False, description=(
        "1 lets an HTTP server with several organizations run gates without the sandbox (never the default)."))
    gate_memory_mb: int = Field(default=GATE_LIMITS.memory_mb, ge=256, description="Address-space limit of one gate's processes.")
    gate_max_processes: int = Field(default=GATE_LIMITS.processes, ge=16, le=100_000,
                                    description="Processes and threads one sandboxed gate may have at once.")
    gate_disk_mb: int = Field(default=GATE_LIMITS.work_mb, ge=16, description="Size of the sandboxed work copy's filesystem.")


def load_settings() -> Settings:
    """Settings from the environment; a bad value raises SystemExit naming the variable."""
    from pydantic import ValidationError

    try:
        return Settings()
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "?"
            info = Settings.model_fields.get(field)
            alias = info.validation_alias if info else None
            var = alias.choices[0] if isinstance(alias, AliasChoices) else f"JUDGE_MCP_{field.upper()}"
            lines.append(f"{var}: {err['msg']}")
        raise SystemExit("judge-mcp: bad setting\n  " + "\n  ".join(lines)) from None
