"""Model strings (`anthropic:<m>`, `openai:<m>`, `openai-compatible:<m>`, `sampling`, `auto`, `demo`) to clients."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from judges.errors import ConfigError, closest
from judges.models.fairshare import FairPool
from judges.models.guard import CallPolicy, GuardedClient
from judges.models.protocol import ModelClient

PROVIDERS = ("anthropic", "openai", "openai-compatible")

NO_BACKEND = (
    "No model is configured: set ANTHROPIC_API_KEY or OPENAI_API_KEY (or OPENAI_BASE_URL / "
    "JUDGE_MCP_COMPATIBLE_BASE_URL for an OpenAI-compatible server such as vLLM, Ollama or llama.cpp), choose "
    "one with JUDGE_MCP_MODEL (JUDGE_MCP_MODEL=demo gives labelled example replies), or connect from a host "
    "that offers MCP sampling."
)


MAX_MODEL_CHARS = 200
JURY_MAX = 8


def parse_model_string(value: str) -> tuple[str, str]:
    """Split a model string into (provider, model), spacing around either part dropped and the provider's case
    ignored; raise ValueError with the accepted forms."""
    value = value.strip()
    if value.lower() in ("auto", "sampling", "demo"):
        return value.lower(), ""
    provider, sep, model = value.partition(":")
    provider, model = provider.strip().lower(), model.strip()
    if not sep or provider not in PROVIDERS or not model:
        if not sep:
            spelled = closest(value.lower(), ("auto", "sampling", "demo"))
        else:
            near = closest(provider, PROVIDERS) if model else None
            spelled = f"{near}:{model}" if near else None
        raise ValueError(
            f"model {value[:MAX_MODEL_CHARS]!r} is not understood: use 'auto', 'sampling', 'anthropic:<model>', "
            "'openai:<model>', 'openai-compatible:<model>' or 'demo'"
            + (f"; did you mean {spelled[:MAX_MODEL_CHARS + 20]!r}?" if spelled else "")
        )
    if len(model) > MAX_MODEL_CHARS or any(ch.isspace() or not ch.isprintable() for ch in model):
        raise ValueError(f"model {value[:MAX_MODEL_CHARS]!r}: a model name is at most {MAX_MODEL_CHARS} printable "
                         "characters without spaces, e.g. 'openai:gpt-4o'")
    return provider, model


def model_string(value: str) -> str:
    """A model string in its one spelling (`provider:model`, or auto/sampling/demo): how it is stored, priced,
    cached and counted, so ' openai:gpt-x' and 'OpenAI:gpt-x ' are one model."""
    provider, model = parse_model_string(value)
    return f"{provider}:{model}" if model else provider


def jury_models(models: Sequence[str], most: int = JURY_MAX) -> list[str]:
    """A jury's models, each in its one spelling, refused (ValueError) unless 2 to `most` DIFFERENT models are
    named: the same model spelled twice (spacing, case) counts once, so it cannot weigh double in the verdict."""
    spelled = [model_string(m) for m in models]
    seen: dict[str, str] = {}
    for given, one in zip(models, spelled, strict=True):
        if one.casefold() in seen:
            raise ValueError(f"models must name different models; {given!r} and {seen[one.casefold()]!r} are both "
                             f"{one}")
        seen[one.casefold()] = given
    if not 2 <= len(spelled) <= most:
        raise ValueError(f"models must name 2 to {most} different models, e.g. "
                         f'["anthropic:claude-sonnet-4-5", "openai:gpt-4o"]; got {len(spelled)}')
    return spelled


@dataclass(frozen=True)
class BackendConfig:
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    compatible_base_url: str | None = None
    compatible_api_key: str | None = None
    anthropic_model: str = "claude-sonnet-4-5"
    openai_model: str = "gpt-4.1-mini"
    compatible_model: str = "default"
    sdk_timeout_s: float = 600.0


class ModelRegistry:
    """Builds one guarded client per model string, all sharing one pool of model requests (at most
    `concurrency` in flight, `org_concurrency` of them one organization's, served round-robin between the
    organizations waiting: judges/models/fairshare.py)."""

    def __init__(self, default: str, config: BackendConfig, policy: CallPolicy, concurrency: int,
                 org_concurrency: int | None = None):
        parse_model_string(default)
        self.default = default
        self.config = config
        self.policy = policy
        self.limiter = FairPool(concurrency, org_concurrency)
        self._clients: dict[str, ModelClient] = {}

    def guard(self, client: ModelClient, model_id: str | None = None) -> ModelClient:
        return GuardedClient(client, self.limiter, self.policy, model_id)

    def resolve(self, model: str | None = None, *, sampling: ModelClient | None = None,
                agent_model: str | None = None) -> ModelClient:
        """The one resolver: the call's `model`, else the judge agent's own `agent_model`, else the server's
        default (JUDGE_MCP_MODEL); `sampling` is the host's model when it offers one (for `sampling`/`auto`)."""
        if sampling is not None and self.host_model(model, agent_model, offered=True):
            return self.guard(sampling)
        provider, name = parse_model_string(model or agent_model or self.default)
        if provider == "sampling":
            raise ConfigError(
                "JUDGE_MCP_MODEL is 'sampling' but this client did not declare the sampling capability "
                "(or speaks a protocol version without it). Use a host that offers sampling, or set "
                "JUDGE_MCP_MODEL to an API backend."
            )
        if provider == "auto":
            provider, name = self._auto()
        key = f"{provider}:{name}"
        if key not in self._clients:
            self._clients[key] = self.guard(self._build(provider, name), key)
        return self._clients[key]

    def host_model(self, model: str | None = None, agent_model: str | None = None, *, offered: bool) -> bool:
        """Whether resolve hands the host's own model (MCP sampling) for this model, agent model and client:
        `sampling`, or `auto` when the client offers sampling."""
        provider = parse_model_string(model or agent_model or self.default)[0]
        return provider == "sampling" or (provider == "auto" and offered)

    async def aclose(self) -> None:
        """Close every client this registry built (their HTTP pools belong to the running loop)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()

    def _auto(self) -> tuple[str, str]:
        c = self.config
        if c.anthropic_api_key:
            return "anthropic", c.anthropic_model
        if c.openai_api_key:
            return "openai", c.openai_model
        if c.compatible_base_url or c.openai_base_url:
            return "openai-compatible", c.compatible_model
        raise ConfigError(NO_BACKEND)

    def _build(self, provider: str, name: str) -> ModelClient:
        c = self.config
        if provider == "demo":  # labelled example replies, no key (judges/models/demo.py)
            from judges.models.demo import DemoClient

            return DemoClient()
        if provider == "anthropic":
            if not c.anthropic_api_key:
                raise ConfigError(f"model 'anthropic:{name}' needs ANTHROPIC_API_KEY to be set.")
            from judges.models.anthropic_client import AnthropicClient

            return AnthropicClient(
                name, api_key=c.anthropic_api_key, base_url=c.anthropic_base_url, timeout_s=c.sdk_timeout_s
            )
        from judges.models.openai_client import OpenAIChatClient

        if provider == "openai":
            if not c.openai_api_key:
                raise ConfigError(f"model 'openai:{name}' needs OPENAI_API_KEY to be set.")
            return OpenAIChatClient(
                name, api_key=c.openai_api_key, base_url=c.openai_base_url, timeout_s=c.sdk_timeout_s
            )
        # Each key goes only to the address it belongs to: the compatible server's own key to
        # JUDGE_MCP_COMPATIBLE_BASE_URL; OPENAI_API_KEY only where OPENAI_BASE_URL points (never to the former).
        if c.compatible_base_url:
            base_url, api_key = c.compatible_base_url, c.compatible_api_key
        elif c.openai_base_url:
            base_url, api_key = c.openai_base_url, c.openai_api_key
        else:
            raise ConfigError(
                f"model 'openai-compatible:{name}' needs JUDGE_MCP_COMPATIBLE_BASE_URL (or OPENAI_BASE_URL), "
                "e.g. http://127.0.0.1:8080/v1."
            )
        return OpenAIChatClient(name, api_key=api_key, base_url=base_url, compatible=True, timeout_s=c.sdk_timeout_s)
