"""All settings, from JUDGE_MCP_* environment variables (and the SDKs' own variables)."""

from __future__ import annotations

import os
import re
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from judges.code.gates import GateSettings
from judges.code.sandbox import Limits as GateLimits
from judges.errors import SECRETS
from judges.image.service import ImageSettings
from judges.inputs.images import ImagePolicy
from judges.inputs.sizes import SizeLimits
from judges.models.guard import CallPolicy
from judges.models.prices import Price
from judges.models.registry import parse_model_string
from judges.patches.ops import DEFAULT_LIMITS, PatchLimits
from judges.store.access import ROLES
from judges.store.database import START_WAIT_S
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


_SECRET_PARAM = re.compile(r"(?i)pass|key|token|secret")
def checked_roots(value: list[Path]) -> list[Path]:
    """Configured roots, `~` expanded and real paths resolved; each an existing directory, none '/'."""
    roots = [Path(os.path.realpath(p.expanduser())) for p in value]
    for i, (given, root) in enumerate(zip(value, roots, strict=True), 1):
        if root == Path(root.anchor):
            raise ValueError(f"entry {i} is {str(given)!r}, which would open the whole filesystem; "
                             "name the project directories instead, e.g. /home/me/project")
        if not root.exists():
            raise ValueError(f"entry {i}, {str(given)!r}, does not exist; create it or name an existing directory, "
                             "e.g. /home/me/project")
        if not root.is_dir():
            raise ValueError(f"entry {i}, {str(given)!r}, is not a directory; name a directory, e.g. /home/me/project")
    return roots


def parse_org_roots(text: str) -> dict[str, list[Path]]:
    """'org=dir:dir;org2=dir' (';' or new lines between organizations, each one's directories like PATH)."""
    out: dict[str, list[Path]] = {}
    for position, item in enumerate((i.strip() for i in text.replace("\n", ";").split(";")), 1):
        if not item:
            continue
        org, sep, dirs = item.partition("=")
        org = org.strip()
        if not sep or not org:
            raise ValueError(f"entry {position} is not 'organization=directory' (e.g. 'acme=/srv/acme')")
        paths = [Path(p.strip()) for p in dirs.split(os.pathsep) if p.strip()]
        if not paths:
            raise ValueError(f"entry {position} (organization {org!r}) names no directory (e.g. '{org}=/srv/{org}')")
        if org in out:
            raise ValueError(f"entry {position} names organization {org!r} again; list all of its directories "
                             f"in one entry (e.g. '{org}=/srv/a:/srv/b')")
        out[org] = paths
    return out


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
    org_roots: Annotated[dict[str, list[Path]], NoDecode] = Field(
        default_factory=dict,
        description="On HTTP with several organizations, each organization's own roots: 'org=dir:dir;org2=dir' "
                    "(organizations separated by ';', each one's directories like PATH), e.g. "
                    "'acme=/srv/acme:/srv/shared-acme;globex=/srv/globex'. An organization not named has no file "
                    "access. Replaces JUDGE_MCP_ALLOWED_ROOTS (set one of the two).",
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
    rate_limit_per_minute: int | None = Field(default=None, ge=1, description="Requests one organization may make "
                                              "per minute: tool calls, resource reads, prompts and lists, and every "
                                              "model request a call sends, counted together in the database (so "
                                              "across replicas); unset: no limit.")
    metrics: bool = Field(default=True, description="Prometheus metrics at /metrics on the HTTP transport.")
    metrics_token: str | None = Field(default=None, description=(
        "A bearer token /metrics asks for (Authorization: Bearer <it>). Unset: /metrics is open when the server has "
        "no tokens, and refused (403) when it has some, so a member's token never reads every organization's "
        "figures."))
    readyz_check_model: bool = Field(default=False, description="/readyz also checks that the model backend's "
                                     "address answers (an HTTP request to its base URL).")
    toolsets: Annotated[list[str] | None, NoDecode] = Field(
        default=None, description="The groups of tools listed and callable, comma-separated: agents, images, "
        "compare, code, patches, analysis, text, calibration, jobs. Unset: all.")
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Host headers accepted on a non-loopback HTTP bind (comma-separated)."
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Origin headers accepted on a non-loopback HTTP bind (comma-separated)."
    )
    database_url: str | None = Field(default=None, description="A PostgreSQL database for the state (agents, "
                                     "documents, runs, jobs) instead of SQLite in the data home, e.g. "
                                     "postgresql://judge:secret@127.0.0.1:5432/judge; several replicas share it.")
    database_start_wait_s: float = Field(default=START_WAIT_S, gt=0, le=3600, description=(
        "How long a starting server waits for JUDGE_MCP_DATABASE_URL to answer (replicas may start before the "
        "database), in seconds; then it stops, saying which database did not answer."))
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
    compatible_api_key: str | None = Field(default=None, description="The key of JUDGE_MCP_COMPATIBLE_BASE_URL's "
                                           "server, sent only there (OPENAI_API_KEY goes only to OpenAI's own "
                                           "address, or OPENAI_BASE_URL). Unset: no key is sent.")
    key_rejected_s: float = Field(default=30.0, ge=0, le=3600, description=(
        "After the backend rejects the API key (401/403), calls of that model fail at once, without a request, "
        "for this many seconds; then one call tries again alone (the others wait for its answer)."))
    org_concurrency: int | None = Field(default=None, ge=1, le=256, description=(
        "Model requests one organization may have in flight at once; the shared pool (JUDGE_MCP_CONCURRENCY) is "
        "served round-robin between the organizations waiting. Default: three quarters of the pool (at least 1), "
        "so another organization always finds a free slot."))
    max_jobs_per_org: int = Field(default=8, ge=1, le=10_000, description=(
        "Background jobs one organization may have running at once (counted in the database, so across "
        "replicas); one more is refused until one finishes."))
    log_level: str = Field(default="INFO", pattern="^(DEBUG|INFO|WARNING|ERROR|CRITICAL)$",
                           description="Our log on stderr (one line per tool call at INFO); libraries log from WARNING.")

    # Guideline documents (seed 001) and retrieval.
    embedding_backend: str = Field(default="minilm-onnx-int8", pattern="^(minilm-onnx-int8|sentence-transformers)$",
                                   description="How guideline chunks are embedded: int8 ONNX MiniLM, or "
                                   "sentence-transformers (torch).")
    embedding_model: str = Field(default="packaged", description="'packaged' (all-MiniLM-L6-v2) or a model name/path.")
    model_cache: Path | None = Field(default=None, description=(
        "Where the sentence-transformers backend keeps a model it downloads by name (with HF_HUB_OFFLINE=0); "
        "default <home>/models. The default embedding model ships in the package."))
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
    retrieval: str = Field(default="hybrid", pattern="^(hybrid|dense|bm25|hybrid-maxsim)$", description="How guideline "
                           "chunks are ranked: hybrid (dense + BM25, reciprocal rank fusion), dense, bm25, or "
                           "hybrid-maxsim (hybrid's top 20 reread by MiniLM token vectors).")
    search_cache_vectors: int = Field(
        default=100_000, ge=0, description="Guideline vectors kept in memory for exact search (all agents together; "
        "384 floats each). An agent with more is searched through Chroma's own index.")

    # Image judging (seed 000).
    max_image_bytes: int = Field(default=ImagePolicy.max_bytes, ge=1, description="Largest image accepted.")
    max_image_side: int = Field(default=ImagePolicy.max_side, ge=64, description="Longer images are downscaled before sending.")
    max_image_pixels: int = Field(default=ImagePolicy.max_pixels, ge=1, description="Images with more pixels are refused "
                                  "(read from the header, before decoding).")
    max_images: int = Field(default=ImageSettings.max_images, ge=1, le=64, description="Most images in one evaluate_image call.")
    image_max_calls: int = Field(default=ImageSettings.max_calls, ge=1, le=100_000, description=(
        "Most model calls one evaluate_image call may plan (each image by each agent's models, each `samples` "
        "times); a larger plan is refused before any call."))
    allow_image_urls: bool = Field(default=ImagePolicy.allow_urls, description="Accept http(s) image URLs (public addresses only).")
    max_iterations: int = Field(default=ImageSettings.max_iterations, ge=1, le=100, description="Default iteration budget of a run.")
    plateau_window: int = Field(default=ImageSettings.plateau_window, ge=1, description="Iterations compared to detect a plateau.")
    plateau_threshold: float = Field(default=ImageSettings.plateau_threshold, ge=0, le=1, description="Least relative gain over the window "
                                     "that is not a plateau.")
    analysis_categories_dir: Path | None = Field(
        default=None, description="Extra evaluate_analysis categories: <dir>/<name>/{system.j2,user.j2,spec.json}, "
        "read once at start; the directory must lie outside every allowed root and the data home.")
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
        "evaluate_rag_answer, evaluate_trajectory: each text, answer, reference, context, candidate, goal), of "
        "evaluate_image's and optimize_prompt's brief and prompt, and of search queries, in characters; a longer one "
        "is refused before any work."))
    max_list_items: int = Field(default=SIZES.list_items, ge=1, description=(
        "Most entries in one list argument of the text judges (evaluate_trajectory's steps and expected_tools, "
        "contexts), of evaluate_image's agent_ids and optimize_prompt's evaluations; a longer list is refused before "
        "any work."))
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
        "(openai-compatible:llama3). Names match exactly (and the vendors' dated snapshots of the built-in models); "
        "a model with no price has a null cost, and is refused while a daily budget is set."))
    daily_budget_usd: float | None = Field(default=None, ge=0, description=(
        "Each organization's daily budget in USD (UTC days): every model request reserves its estimated cost "
        "(input from the request, all of max_tokens out) before it is sent, and one the budget cannot cover is not "
        "sent (the call's result says budget_exceeded for what was not judged). Unset: no budget."))
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
        return checked_roots(value)

    @field_validator("org_roots", mode="before")
    @classmethod
    def _parse_org_roots(cls, value: object) -> object:
        return parse_org_roots(value) if isinstance(value, str) else value

    @field_validator("org_roots")
    @classmethod
    def _resolve_org_roots(cls, value: dict[str, list[Path]]) -> dict[str, list[Path]]:
        out = {}
        for org, roots in value.items():
            try:
                out[org] = checked_roots(roots)
            except ValueError as exc:
                raise ValueError(f"organization {org!r}: {exc}") from None
        return out

    @field_validator("allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip()]
        return value

    @field_validator("toolsets", mode="before")
    @classmethod
    def _split_toolsets(cls, value: object) -> object:
        if isinstance(value, str):
            names = [p.strip() for p in value.split(",") if p.strip()]
            return None if not names or names == ["all"] else names
        return value

    @field_validator("toolsets")
    @classmethod
    def _check_toolsets(cls, value: list[str] | None) -> list[str] | None:
        from .roles import check_toolsets

        return None if value is None else check_toolsets(value)

    @field_validator("tokens", mode="before")
    @classmethod
    def _parse_tokens(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("@"):
            text = Path(text[1:]).expanduser().read_text(encoding="utf-8")
        return parse_tokens(text)

    @field_validator("embedding_backend", mode="after")
    @classmethod
    def _check_embedding_backend(cls, value: str) -> str:
        # find_spec locates the package without importing it (torch would cost seconds of every start).
        import importlib.util

        if value == "sentence-transformers" and importlib.util.find_spec("sentence_transformers") is None:
            raise ValueError("sentence-transformers is not installed: it comes with the extra, "
                             "pip install 'judge-mcp[sentence-transformers]' (uvx --from "
                             "'judge-mcp[sentence-transformers]' judge-mcp); or leave it unset (minilm-onnx-int8, "
                             "the packaged model)")
        return value

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
    def _compatible_key_has_its_server(self) -> Settings:
        if self.compatible_api_key and not self.compatible_base_url:
            raise ValueError("JUDGE_MCP_COMPATIBLE_API_KEY is set but JUDGE_MCP_COMPATIBLE_BASE_URL is not: the key "
                             "is sent only to that server (e.g. JUDGE_MCP_COMPATIBLE_BASE_URL=http://127.0.0.1:8080/v1)")
        return self

    @model_validator(mode="after")
    def _maxsim_reads_the_packaged_model(self) -> Settings:
        if self.retrieval == "hybrid-maxsim" and self.embedding_backend != "minilm-onnx-int8":
            raise ValueError("JUDGE_MCP_RETRIEVAL=hybrid-maxsim reads the packaged MiniLM's token vectors: it needs "
                             "JUDGE_MCP_EMBEDDING_BACKEND=minilm-onnx-int8 (the default); with "
                             f"{self.embedding_backend} use JUDGE_MCP_RETRIEVAL=hybrid")
        return self

    def secrets(self) -> list[str]:
        """Every secret these settings hold: API keys, bearer tokens, passwords and user info in URLs."""
        values = [self.anthropic_api_key, self.openai_api_key, self.compatible_api_key, self.metrics_token,
                  *self.tokens]
        for url in (self.database_url, self.chroma_url, self.compatible_base_url, self.openai_base_url,
                    self.anthropic_base_url):
            parts = urllib.parse.urlsplit(url or "")
            values.append(parts.password)
            if parts.scheme in ("http", "https") and parts.password is None:
                values.append(parts.username)  # https://<token>@host: the user part is the credential
            values += [v for k, v in urllib.parse.parse_qsl(parts.query) if _SECRET_PARAM.search(k)]
        return [v for v in values if v]

    def register_secrets(self) -> None:
        """Make every message a caller or a log reads mask these settings' secrets (judges/errors.py SECRETS)."""
        SECRETS.add(*self.secrets())

    @model_validator(mode="after")
    def _home_outside_roots(self) -> Settings:
        """The data home (database, embedded store, cached tool listing) is never reachable through a root, and
        ALLOWED_ROOTS and ORG_ROOTS are not both set (which one applies would be a guess)."""
        if self.allowed_roots and self.org_roots:
            raise ValueError("JUDGE_MCP_ALLOWED_ROOTS and JUDGE_MCP_ORG_ROOTS are both set: set one of them "
                             "(JUDGE_MCP_ORG_ROOTS gives each organization its own roots, e.g. "
                             "'acme=/srv/acme;globex=/srv/globex')")
        named = [(root, "JUDGE_MCP_ALLOWED_ROOTS") for root in self.allowed_roots]
        named += [(root, f"JUDGE_MCP_ORG_ROOTS, organization {org!r}")
                  for org, roots in self.org_roots.items() for root in roots]
        home = Path(os.path.realpath(self.home))
        kept = [("JUDGE_MCP_HOME", home, "database and cached tool listing")]
        if self.model_cache is not None:
            kept.append(("JUDGE_MCP_MODEL_CACHE", Path(os.path.realpath(self.model_cache.expanduser())),
                         "embedding model, which every organization's searches use"))
        for root, variable in named:
            for name, place, what in kept:
                if place == root or place.is_relative_to(root):
                    raise ValueError(f"{name} ({place}) lies inside the root {root} ({variable}): callers could "
                                     f"read and overwrite the server's {what} through it. Move it out of every "
                                     "root (e.g. JUDGE_MCP_HOME=/var/lib/judge-mcp) or name narrower roots")
                if root.is_relative_to(place):
                    raise ValueError(f"the root {root} ({variable}) lies inside {name} ({place}): callers could "
                                     f"read and overwrite the server's {what} through it. Name a root outside "
                                     f"it, or move {name}")
        scratch = Path(os.path.realpath(tempfile.gettempdir()))
        for root, variable in named[len(self.allowed_roots):]:
            if scratch.is_relative_to(root):
                raise ValueError(f"the root {root} ({variable}) holds the temporary directory {scratch}, where "
                                 "every organization's gate copies and uploads pass: name a narrower directory")
        # The gate sandbox mounts /usr and the Python installation read-only into every organization's gates.
        mounted = {Path("/usr"), *(Path(os.path.realpath(p)) for p in (sys.prefix, sys.base_prefix))}
        for name, place in [("JUDGE_MCP_HOME", home), *((v, r) for r, v in named[len(self.allowed_roots):])]:
            for mount in mounted:
                if place.is_relative_to(mount):
                    raise ValueError(f"{name} ({place}) lies inside {mount}, which the gate sandbox shows (read-only) "
                                     "to every organization's code: move it out (e.g. JUDGE_MCP_HOME="
                                     "/var/lib/judge-mcp, roots under /srv)")
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

    @property
    def patch_journal_dir(self) -> Path:
        """Notes of the roots where an apply_patch is under way: the next start finishes or undoes a crashed one."""
        return self.home / "patch-journals"

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


def variable_names() -> dict[str, str]:
    """Each setting's environment variable, by field name (JUDGE_MCP_<NAME>, or the SDK's own name)."""
    names: dict[str, str] = {}
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names[name] = str(alias.choices[0]) if isinstance(alias, AliasChoices) else f"JUDGE_MCP_{name.upper()}"
    return names


def set_in_environment() -> dict[str, str]:
    """The variables the settings read that are set in this environment (variable -> value as written), in the
    order the settings are declared. Names match whatever their case, as pydantic-settings matches them."""
    env = {k.upper(): v for k, v in os.environ.items()}
    return {var: env[var] for var in variable_names().values() if var in env}


def unknown_in_environment() -> list[str]:
    """JUDGE_MCP_* variables set here that are no setting (a typo, or a setting of another version)."""
    known = set(variable_names().values())
    return sorted(k for k in (k.upper() for k in os.environ) if k.startswith("JUDGE_MCP_") and k not in known)


SECRET_WORDS = frozenset({"KEY", "KEYS", "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS",
                          "SSLPASSWORD", "APIKEY"})


def is_secret(variable: str) -> bool:
    """A variable whose value is a credential (API keys, bearer tokens, passwords): never printed."""
    return bool(SECRET_WORDS & set(variable.upper().split("_")))


def url_without_password(url: str, replacement: str = "***") -> str:
    """`url` with the password of its user part replaced (a database or Chroma URL may carry one)."""
    from urllib.parse import urlsplit, urlunsplit

    if "://" not in url:  # a libpq key=value string: host=db password=...
        return re.sub(r"((?:^|\s)(?:ssl)?password\s*=\s*)('[^']*'|\S*)", rf"\g<1>{replacement}", url, flags=re.I)
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if password:
        parts = parts._replace(netloc=f"{parts.username or ''}:{replacement}@{parts.netloc.rpartition('@')[2]}")
    # libpq takes the password as a query parameter too (?password=..., ?sslpassword=...), some gateways a key.
    query = "&".join(f"{name}={replacement}" if sep and is_secret(re.sub(r"[-.]", "_", name)) else f"{name}{sep}{value}"
                     for name, sep, value in (p.partition("=") for p in parts.query.split("&"))) if parts.query else ""
    return urlunsplit(parts._replace(query=query)) if password or query != parts.query else url


def load_settings() -> Settings:
    """Settings from the environment; a bad value raises SystemExit naming the variable."""
    from pydantic import ValidationError

    try:
        settings = Settings()
        settings.register_secrets()
        return settings
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            if not err["loc"]:  # a check across settings: its message names the variables
                lines.append(str(err["msg"]).removeprefix("Value error, "))
                continue
            field = str(err["loc"][0])
            info = Settings.model_fields.get(field)
            alias = info.validation_alias if info else None
            var = alias.choices[0] if isinstance(alias, AliasChoices) else f"JUDGE_MCP_{field.upper()}"
            lines.append(f"{var}: {err['msg']}")
        raise SystemExit("judge-mcp: bad setting\n  " + "\n  ".join(lines)) from None
