"""The one calling contract: what every judge is handed, and the one place a jury × samples is asked.

A tool builds one `JudgeCall` per call (server/context.py `judge_call`) from the call's model or jury, its
samples, its cache choice and whether it runs in the background; every judge takes it as its first argument
and asks it for its models (`client`, `members`) and for the fan-out (`ask`). The reduction of what comes back
(votes, sample statistics, a jury's verdict and agreement) is judges/reading/samples.py and jury.py, which every
judge calls (inspect_ai's `multi_scorer(scorers, reducer)`).

Model resolution is one order for every judge: a jury named by the call, else the agent's own jury (its
`models`), else one model: the call's `model`, else the agent's own `model`, else the server's default. A
background call whose model would be the host's own (MCP sampling, which answers only while the call is open)
is refused here, from the model that call actually resolves to.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from judges.errors import InputError, JudgeError
from judges.models.registry import JURY_MAX, jury_models
from judges.reading.samples import run_samples

if TYPE_CHECKING:
    from judges.models.protocol import ModelClient
    from judges.store.agents import Agent

T = TypeVar("T")
Member = tuple[str | None, "ModelClient"]  # (the model's name in a jury, or None for the call's one model; client)
Resolver = Callable[[str | None, str | None], Awaitable["ModelClient"]]  # (model named, agent's own model) -> client
HostModel = Callable[[str | None, str | None], bool]  # whether that resolution is the host's own model (sampling)

BACKGROUND_ON_HOST = (
    "background: the model here is the host's own (MCP sampling), which can only answer while the call is open, "
    "so this call cannot run as a background job. Call it without background, or set JUDGE_MCP_MODEL to an API "
    "backend (e.g. anthropic:<model>) for background jobs.")


def spell_jury(models: Sequence[str]) -> tuple[str, ...]:
    """A jury's models in their one spelling (one model named twice counts once), or an InputError naming why."""
    try:
        return tuple(jury_models(models, JURY_MAX))
    except ValueError as exc:
        raise InputError(str(exc)) from None


@dataclass
class JudgeCall:
    """What a judge is handed: how to resolve its models, the call's jury and samples, and the fan-out."""

    resolver: Resolver
    host_model: HostModel = lambda model, agent_model: False
    model: str | None = None  # the call's one model (else the agent's, else the server's default)
    models: tuple[str, ...] = ()  # the call's jury, spelled (spell_jury); empty: one model
    samples: int = 1
    background: bool = False
    agents: Callable[[], Awaitable[Sequence[Agent]]] | None = None  # the agents it judges with, when agents judge
    # The organization's own prompt versions (judges/store/prompt_versions.py): id -> (shipped base, rules) or None
    versions: Callable[[str], Awaitable[tuple[str, str] | None]] | None = None
    _resolved: dict[tuple[str | None, str | None], ModelClient] = field(default_factory=dict, repr=False)
    _versions: dict[str, tuple[str, str] | None] = field(default_factory=dict, repr=False)

    async def _resolve(self, model: str | None, agent_model: str | None = None) -> ModelClient:
        key = (model, agent_model)
        if key not in self._resolved:
            if self.background and self.host_model(model, agent_model):
                raise InputError(BACKGROUND_ON_HOST)
            self._resolved[key] = await self.resolver(model, agent_model)
        return self._resolved[key]

    def jury_names(self, agent: Agent | None = None) -> tuple[str, ...]:
        """The jury that judges (the call's, else the agent's own), spelled; empty when one model does."""
        if self.models:
            return self.models
        return spell_jury(agent.models) if agent is not None and agent.models else ()

    def is_jury(self, agent: Agent | None = None) -> bool:
        return bool(self.jury_names(agent))

    async def members(self, agent: Agent | None = None) -> list[Member]:
        """Who judges, in order: each juror by name, or the one model (call → agent → default) named None. A
        missing backend (ConfigError), a spent budget or a background call on the host's model fails here,
        before any request."""
        names = self.jury_names(agent)
        if names:
            return [(name, await self._resolve(name)) for name in names]
        return [(None, await self._resolve(self.model, agent.model if agent is not None else None))]

    async def prompt(self, prompt_id: str, rules: str | None = None) -> tuple[str, str | None]:
        """A prompt id as the judge renders it: (the shipped asset, the judging rules before it). An id that is
        the organization's own version (align_judge keeps them) is its base asset with its rules first, then
        `rules` (an agent's); any other id is itself (the loader names an unknown one)."""
        if prompt_id not in self._versions:  # asked once per call (a calibration renders it for every item)
            self._versions[prompt_id] = await self.versions(prompt_id) if self.versions is not None else None
        stored = self._versions[prompt_id]
        if stored is None:
            return prompt_id, rules
        base, own = stored
        return base, own if rules is None else f"{own}\n\n{rules}"

    async def client(self, agent: Agent | None = None) -> ModelClient:
        """The one model of a judge that asks one model (a jury's first juror when the call names a jury)."""
        return (await self.members(agent))[0][1]

    def on_host(self, agent: Agent | None = None) -> bool:
        """Whether any model this call judges `agent` with is the host's own (MCP sampling)."""
        names = self.jury_names(agent)
        if names:
            return any(self.host_model(name, None) for name in names)
        return self.host_model(self.model, agent.model if agent is not None else None)

    async def ready(self) -> None:
        """A background call is refused before its job starts when a model it would ask is the host's own,
        for each agent it judges with (`agents`), else for the call's own model."""
        if not self.background:
            return
        agents: Sequence[Agent | None] = [None]
        if self.agents is not None:
            try:
                agents = await self.agents()
            except JudgeError:  # no agents, an unknown run: the job fails with it, as the call would
                return
        if any(self.on_host(agent) for agent in agents or [None]):
            raise InputError(BACKGROUND_ON_HOST)

    async def ask(self, members: Sequence[Member], one: Callable[[ModelClient, int], Awaitable[T]]) -> list[list[T]]:
        """The fan-out: one(client, sample) for every member × sample, all at once (the model registry's cap
        bounds requests in flight); the results by member, then sample."""
        return await run_samples(len(members), lambda m: run_samples(self.samples, lambda s: one(members[m][1], s)))

