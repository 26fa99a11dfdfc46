"""The lifespan's one typed context (settings, stores, model registry) and how tools reach it."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.mcpserver import Context, ListRoots, Resolve
from mcp.types import ListRootsResult
from pydantic import Field

import prompts
from judges.call import JudgeCall, spell_jury
from judges.errors import ConfigError
from judges.image.runs import RunStore
from judges.image.service import ImageJudging, ImageSettings
from judges.inputs.images import ImagePolicy
from judges.inputs.paths import Roots
from judges.models.guard import CallPolicy
from judges.models.prices import DEFAULT_PRICES
from judges.models.protocol import ModelClient
from judges.models.registry import BackendConfig, ModelRegistry
from judges.patches.journal import recover_registered
from judges.store.access import RateLimiter
from judges.store.agents import Agent, AgentStore
from judges.store.database import Database, open_database, timestamp
from judges.store.guidelines import SEARCH_READY, Guidelines, IngestSettings
from judges.store.jobs import JobStore
from judges.store.leases import Leases, cutoff
from judges.store.metering import Metering
from judges.store.prompt_versions import PromptVersions
from judges.store.results import ResultCache
from judges.store.usage import UsageLedger
from rag.warmup import Warmup, freeze_heap, import_imaging, import_numpy

from .jobs import RESUMABLE, JobRunner
from .options import SHARED_OPTIONS
from .roots import call_roots
from .sampling import SamplingClient, sampling_offered
from .settings import Settings

log = logging.getLogger("judge_mcp")
T = TypeVar("T")


@dataclass
class AppContext:
    settings: Settings
    db: Database
    agents: AgentStore
    models: ModelRegistry
    guidelines: Guidelines
    images: ImageJudging
    client_roots: bool = True  # use the client's MCP roots when no roots are configured (stdio only)
    roots_owner: str | None = None  # over HTTP with tokens: the one organization JUDGE_MCP_ALLOWED_ROOTS serves
    jobs: JobRunner | None = None  # background jobs, run in the lifespan's task group
    metering: Metering | None = None  # result cache, prices, usage and budgets
    limiter: RateLimiter | None = None  # JUDGE_MCP_RATE_LIMIT_PER_MINUTE, counted in the database
    analysis_categories: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # read once, at start

    async def store(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """How async code does store work: `await app.store(app.agents.get, org, agent_id)`. On SQLite it runs
        inline (cheaper than a thread hand-off); on PostgreSQL in a worker thread, so the event loop keeps serving
        other calls while this one waits on the database (Database.run). Take request state (organization_of)
        before, on the loop."""
        return await self.db.run(functools.partial(fn, *args, **kwargs))

    async def judge_call(self, ctx: Any, models: Sequence[str] | None = None, *, model: str | None = None,
                         samples: int = 1, cache: bool = True, background: bool = False,
                         agents: Callable[[], Awaitable[Sequence[Agent]]] | None = None,
                         resolve: bool = True) -> JudgeCall:
        """How every tool hands a judge its models (judges/call.py): one JudgeCall from the call's `model` or jury
        (`models`), its samples, cache and background. It resolves through the one resolver (ModelRegistry.resolve:
        the call's model, else the agent's own, else the server's default, with the host's sampling when this
        call's client offers it), and refuses a background call whose resolved model is the host's own. The
        organization is the call's: an agent is only ever one the caller's organization owns. Each client is
        metered for that organization (result cache unless `cache` is false, cost, usage); a call whose
        organization has spent its daily budget, or that names a model with no price while a budget is set, is
        refused when its model is resolved (here, unless `resolve` is false: then when the judge asks for it), before
        any model request, and each later request reserves its estimated cost first (judges/store/metering.py).
        `agents`: the agents the call judges with, when agents judge (for the background check)."""
        sampling = SamplingClient(ctx) if sampling_offered(ctx) else None
        org = organization_of(ctx)

        async def resolve_model(name: str | None, agent_model: str | None) -> ModelClient:
            client = self.models.resolve(name, sampling=sampling, agent_model=agent_model)
            if self.metering is None:
                return client
            return await self.metering.client(client, org, getattr(client, "model_id", None), use_cache=cache)

        def host_model(name: str | None, agent_model: str | None) -> bool:
            return self.models.host_model(name, agent_model, offered=sampling is not None)

        async def versions(prompt_id: str) -> tuple[str, str] | None:  # the organization's own prompt versions
            found = await self.store(PromptVersions(self.db).get, org, prompt_id)
            return None if found is None else (found.base, found.rules)

        call = JudgeCall(resolve_model, host_model, model=model, models=spell_jury(models) if models is not None else (),
                         samples=samples, background=background, agents=agents, versions=versions)
        if resolve:
            await call.members()
        return call


UseCache = Annotated[bool, Field(description=SHARED_OPTIONS["cache"])]


def build_metering(settings: Settings, db: Database) -> Metering:
    return Metering(
        cache=ResultCache(db, ttl_s=settings.cache_ttl_s, max_entries=settings.cache_max_entries),
        ledger=UsageLedger(db, settings.daily_budget_usd, settings.org_budgets_usd),
        prices={**DEFAULT_PRICES, **settings.prices},
        # A reservation outlives any request's deadline (retries included) before it counts as abandoned.
        reservation_ttl_s=2 * settings.call_deadline_s + 60,
    )


def build_registry(settings: Settings) -> ModelRegistry:
    return ModelRegistry(
        settings.model,
        BackendConfig(
            anthropic_api_key=settings.anthropic_api_key,
            anthropic_base_url=settings.anthropic_base_url,
            openai_api_key=settings.openai_api_key,
            openai_base_url=settings.openai_base_url,
            compatible_base_url=settings.compatible_base_url,
            compatible_api_key=settings.compatible_api_key,
            anthropic_model=settings.anthropic_model,
            openai_model=settings.openai_model,
            compatible_model=settings.compatible_model,
        ),
        CallPolicy(
            deadline_s=settings.call_deadline_s,
            max_retries=settings.max_retries,
            max_retry_wait_s=settings.max_retry_wait_s,
            key_rejected_s=settings.key_rejected_s,
        ),
        settings.concurrency,
        # Default: three quarters of the pool, so another organization always finds a slot free.
        settings.org_concurrency or max(1, settings.concurrency * 3 // 4),
    )


def prepare_model_client(models: ModelRegistry) -> None:
    """The configured backend's client, its SDK imported and built (HTTP pool, TLS context, reply models) in
    the warm-up, so the first model call of a session costs what a later one does. Only that backend's SDK
    is imported (anthropic ≈1.4 s, openai ≈0.6 s); nothing for sampling, demo or no backend."""
    try:
        client = models.resolve()
    except ConfigError:
        return
    prepare = getattr(getattr(client, "inner", client), "prepare", None)
    if prepare is not None:
        prepare()


def build_guidelines(settings: Settings, db: Database, agents: AgentStore,
                     models: ModelRegistry | None = None) -> Guidelines:
    from rag.embedding import make_embedder
    from rag.formats import Limits
    from rag.store import DatabaseGenerations, GuidelineStore

    embedder = make_embedder(settings.embedding_backend, settings.embedding_model, settings.model_cache_dir)
    store = GuidelineStore(embedder, path=settings.chroma_path, url=settings.chroma_url,
                           cache_vectors=settings.search_cache_vectors, mode=settings.retrieval,
                           generations=DatabaseGenerations(db))
    ingest = IngestSettings(
        max_file_bytes=settings.max_upload_bytes, chunk_size=settings.chunk_size,
        chunk_overlap=settings.chunk_overlap, parse_timeout_s=settings.parse_timeout_s,
        parse_memory_mb=settings.parse_memory_mb, default_threshold=settings.similarity_threshold,
        parse_workers=settings.parse_workers, lease_s=settings.lease_s,
        limits=Limits(max_pages=settings.max_pdf_pages, max_docx_uncompressed=settings.max_docx_uncompressed_bytes,
                      max_docx_ratio=settings.max_docx_ratio),
    )
    guidelines = Guidelines(db, agents, store, ingest)
    # The process's one warm-up: every heavy import and load, in one thread, in this order.
    # Requests that need the embedder or the store wait for it (Guidelines.ready); model
    # clients take the same lock for their SDK import. The model client comes first: a first
    # model call then finds it ready ~1-2 s after start, while the embedder takes seconds more. With warm-up off, the first request
    # that needs it runs it.
    load = getattr(embedder, "loaded", None)
    guidelines.warmup = Warmup([
        *([("model client", lambda: prepare_model_client(models))] if models is not None else []),
        # Started early: the worker's own imports (~1-2 s of CPU) overlap the model load, not the first search.
        ("parse worker", guidelines.parser.warm),
        ("numpy", import_numpy),
        ("imaging", import_imaging),
        *([("embedding model", load)] if load is not None else []),
        ("guideline store", guidelines.prepare),
        ("prompt templates", prompts.compile_all),
        ("freeze the heap", freeze_heap),
        # Last: the first search after a start then meets what a warm one does, caches included (issue 29).
        (SEARCH_READY, guidelines.preload),
    ])
    if settings.warm_embeddings:
        # Started after `initialize` has been answered (warm_delay_s): the handshake never waits.
        guidelines.warmup.start(settings.warm_delay_s)
    return guidelines


def analysis_categories(settings: Settings) -> dict[str, Any]:
    """The operator's custom evaluate_analysis categories (JUDGE_MCP_ANALYSIS_CATEGORIES_DIR), read and compiled
    once, here at start, and refused (ConfigError) when the directory lies where a caller can write: inside an
    allowed root, an organization's root or the data home."""
    if settings.analysis_categories_dir is None:
        return {}
    from judges.analysis.judge import load_custom_categories

    writable = [("JUDGE_MCP_ALLOWED_ROOTS", root) for root in settings.allowed_roots]
    writable += [(f"JUDGE_MCP_ORG_ROOTS ({org})", root) for org, roots in settings.org_roots.items() for root in roots]
    return load_custom_categories(settings.analysis_categories_dir, [*writable, ("JUDGE_MCP_HOME", settings.home)])


@asynccontextmanager
async def open_app(settings: Settings, *, client_roots: bool = True,
                   roots_owner: str | None = None,
                   categories: Mapping[str, Any] | None = None) -> AsyncIterator[AppContext]:
    settings.register_secrets()
    categories = analysis_categories(settings) if categories is None else categories
    db = open_database(settings.database_url, settings.database_path,
                       start_wait_s=settings.database_start_wait_s)
    models = build_registry(settings)
    guidelines: Guidelines | None = None
    try:
        agents = AgentStore(db)
        guidelines = build_guidelines(settings, db, agents, models)
        images = ImageJudging(agents, RunStore(db), guidelines, ImageSettings(
            policy=ImagePolicy(allowed_roots=Roots(), max_bytes=settings.max_image_bytes,
                               max_side=settings.max_image_side,
                               max_pixels=settings.max_image_pixels, allow_urls=settings.allow_image_urls),
            max_images=settings.max_images, max_calls=settings.image_max_calls, max_iterations=settings.max_iterations,
            plateau_window=settings.plateau_window, plateau_threshold=settings.plateau_threshold,
            fallback_score=settings.parse_fallback_score,
        ))
        # An apply_patch a crash interrupted (kill -9) is finished or undone before any call: each tree is
        # all-old or all-new again, no temp file stays (judges/patches/journal.py).
        await anyio.to_thread.run_sync(recover_registered, settings.patch_journal_dir, settings.allowed_roots)
        store = JobStore(db)
        # Resumable jobs an earlier process of this home (or a replica whose lease expired) left: continued here.
        # In bounded batches: every job under this process's own name is taken now (no later claim would).
        claimed: list[Any] = []
        started = timestamp()
        while batch := store.claim(RESUMABLE, cutoff(settings.lease_s), started=started):
            claimed += batch
        interrupted = store.interrupt_orphans()
        if interrupted:
            log.warning("%d background job(s) of an earlier server process marked interrupted", interrupted)
        async with anyio.create_task_group() as tg:
            limiter = RateLimiter(db, settings.rate_limit_per_minute) if settings.rate_limit_per_minute else None
            if limiter is not None:  # every model request counts against its organization's rate limit too
                models.limiter.count = functools.partial(db.run, functools.partial(limiter.take, what="request"))
            app = AppContext(settings=settings, db=db, agents=agents, models=models, guidelines=guidelines,
                             images=images, client_roots=client_roots, roots_owner=roots_owner,
                             jobs=(runner := JobRunner(store, tg, settings.max_jobs_per_org)),
                             metering=build_metering(settings, db), limiter=limiter,
                             analysis_categories=categories)
            runner.take_over(claimed)  # once the server attaches (server/app.py lifespan)
            tg.start_soon(Leases(store, guidelines, settings.lease_s, RESUMABLE).run, runner.cancel_here,
                          runner.take_over)
            log.info("judge-mcp ready: data in %s, model %s", settings.home, settings.model)
            try:
                yield app
            finally:
                tg.cancel_scope.cancel()  # background jobs end with the server (and are marked interrupted)
        store.interrupt_mine()
    finally:
        if guidelines is not None:
            guidelines.close()  # the warm parse workers
        await models.aclose()
        db.close()


async def ask_client_roots(ctx: Context) -> ListRootsResult | ListRoots | None:
    """Resolver: ask the client for its roots (roots/list) when no roots are configured and it has them.

    Asked on every call that takes a path, so a client's roots/list_changed is always honoured."""
    app = app_of(ctx)
    if app.settings.allowed_roots or app.settings.org_roots or not app.client_roots:
        return None
    try:
        caps = ctx.client_capabilities
    except Exception:
        return None
    return ListRoots() if caps is not None and caps.roots is not None else None


ClientRoots = Annotated[ListRootsResult | None, Resolve(ask_client_roots)]
JuryModels = Annotated[list[str] | None, Field(description=SHARED_OPTIONS["models"])]
ExpectedScore = Annotated[bool, Field(description=SHARED_OPTIONS["expected_score"])]
Samples = Annotated[int, Field(description=SHARED_OPTIONS["samples"])]


def roots_for(ctx: Any, client_roots: ListRootsResult | None) -> Roots:
    """The directories this call may touch: its organization's own roots (server/roots.py), and what to tell
    the caller when a path lies outside them (paths.py says it)."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    app = app_of(ctx)
    uris = [str(root.uri) for root in client_roots.roots] if client_roots is not None else []
    return call_roots(app.settings, organization_of(ctx), authenticated=get_access_token() is not None,
                      owner=app.roots_owner, client=uris)


def image_policy(ctx: Any, client_roots: ListRootsResult | None) -> ImagePolicy:
    return dataclasses.replace(app_of(ctx).images.settings.policy, allowed_roots=roots_for(ctx, client_roots))


def app_of(ctx: Any) -> AppContext:
    app: AppContext = ctx.request_context.lifespan_context
    return app


def organization_of(ctx: Any) -> str:
    """The caller's organization: from the bearer token over HTTP (a superadmin's may name another one in the
    X-Judge-Organization header), from settings on stdio. A job continued after a takeover runs as the
    organization that started it, whichever organization this process serves (server/jobs.py JobRunner._resume)."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    from .jobs import RESUMING
    from .roles import superadmin_organization

    resuming = RESUMING.get()
    if resuming is not None:
        return resuming.org
    token = get_access_token()
    if token is not None:
        return superadmin_organization(ctx) or token.client_id
    return app_of(ctx).settings.org
