"""Provider access: `<provider>:<model>` strings to pydantic-ai models, behind our limiter and retries.

Keys come only from each provider's standard environment variables (`OPENAI_API_KEY`,
`ANTHROPIC_API_KEY`, `GOOGLE_API_KEY`, ...) and are never passed around, logged or quoted:
`redact` removes any key value from text before it reaches a message. Base URLs come from the
provider's variable (`OPENAI_BASE_URL`, `OLLAMA_BASE_URL`, `ANTHROPIC_BASE_URL`) unless
`base_url` overrides it, so `openai-chat:NAME --base-url http://127.0.0.1:8000/v1` reaches a
local vLLM, llama.cpp, Ollama or LiteLLM server. A local server needs no key.

Every model `resolve_model` returns is a `limited.LimitedModel`: each request goes through
`limits.with_retries` (429/5xx/connection errors retried, retry-after honoured up to 60 s) and the
run's `RateLimiter` before every attempt, with the SDK's own retries off. This module imports
pydantic-ai only inside functions, so `require_llm_extra` can say what to install.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from markindex_core.errors import InvalidArgument, ModelCallFailed, ModelUnavailable
from markindex_core.llm.limits import RateLimiter, Retry, estimate_tokens, parse_retry_after

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import Model, ModelRequestParameters

INSTALL_HINT = "pip install 'markindex[llm]'"
_ALIASES = {"google-gla": "google"}  # the seeds' name for the Gemini API


@dataclass(frozen=True)
class _Provider:
    keys: tuple[str, ...]  # environment variables holding the key (any one)
    base_env: str | None  # environment variable holding the base URL
    sdk: str  # the pydantic-ai-slim extra with its SDK
    needs_base: bool = False  # no default endpoint (Ollama)


_OPENAI = _Provider(("OPENAI_API_KEY",), "OPENAI_BASE_URL", "openai")
_PROVIDERS = {
    "openai": _OPENAI,
    "openai-chat": _OPENAI,
    "openai-responses": _OPENAI,
    "anthropic": _Provider(("ANTHROPIC_API_KEY",), "ANTHROPIC_BASE_URL", "anthropic"),
    "ollama": _Provider((), "OLLAMA_BASE_URL", "openai", needs_base=True),
    "google": _Provider(("GOOGLE_API_KEY", "GEMINI_API_KEY"), None, "google"),
}
_LOCAL_KEY = "not-needed"  # placeholder some SDKs insist on when a local server takes no key


def require_llm_extra() -> None:
    """Raise ModelUnavailable with the install line when pydantic-ai is not importable."""
    try:
        import pydantic_ai  # noqa: F401
    except ImportError:
        raise ModelUnavailable(
            "model features need the optional llm extra (pydantic-ai is not installed)",
            INSTALL_HINT,
        ) from None


def parse_spec(spec: str) -> tuple[str, str]:
    """`provider:model` -> (provider, model), with the seeds' aliases resolved."""
    provider, sep, name = spec.strip().partition(":")
    if not sep or not provider or not name:
        raise InvalidArgument(
            f"model must be PROVIDER:MODEL, got {spec[:80]!r}",
            "e.g. anthropic:claude-sonnet-4-5, openai:gpt-5-mini, openai-chat:NAME --base-url URL",
        )
    return _ALIASES.get(provider, provider), name


def resolve_model(
    spec: str,
    base_url: str | None = None,
    *,
    limiter: RateLimiter | None = None,
    timeout: float | None = None,
) -> Model:
    """The pydantic-ai model for `spec`, wrapped so every request passes `limiter` and retries,
    each attempt ending after `timeout` seconds (default `LLM_HTTP_TIMEOUT_S`).

    Raises ModelUnavailable (extra, SDK or key missing; unknown provider) with one clear line.
    """
    require_llm_extra()
    provider_name, model_name = parse_spec(spec)
    known = _PROVIDERS.get(provider_name)
    if known is not None:
        _check_environment(provider_name, known, base_url)
    provider = _make_provider(provider_name, known, base_url)
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model

    try:
        model = infer_model(f"{provider_name}:{model_name}", provider_factory=lambda _: provider)
    except UserError as exc:
        raise ModelUnavailable(f"cannot use model {spec}: {_first_line(exc)}") from None
    except ImportError:
        raise ModelUnavailable(
            f"the {provider_name} provider's SDK is not installed",
            f"pip install 'pydantic-ai-slim[{provider_name}]'",
        ) from None
    from markindex_core.llm.limited import LimitedModel

    if timeout is None:
        return LimitedModel(model, limiter)
    return LimitedModel(model, limiter, timeout=timeout)


def _check_environment(name: str, known: _Provider, base_url: str | None) -> None:
    """Fail early, naming the variable to set, when the key (or Ollama's URL) is missing."""
    base = base_url or (os.environ.get(known.base_env) if known.base_env else None)
    if known.needs_base and not base:
        raise ModelUnavailable(
            f"no server for {name}: set {known.base_env}",
            f"e.g. export {known.base_env}=http://127.0.0.1:11434/v1, or pass --base-url URL",
        )
    if known.keys and not base and not any(os.environ.get(k) for k in known.keys):
        raise ModelUnavailable(
            f"no API key for {name}: set {' or '.join(known.keys)}",
            f"export {known.keys[0]}=... in the environment; for a local OpenAI-compatible "
            "server use openai-chat:NAME --base-url URL",
        )


def _make_provider(name: str, known: _Provider | None, base_url: str | None) -> Any:
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.providers import infer_provider_class

    try:
        cls = infer_provider_class(name)
    except ValueError:
        raise ModelUnavailable(
            f"unknown model provider {name!r}",
            "use one pydantic-ai knows: anthropic, openai, openai-chat, ollama, google-gla, ...",
        ) from None
    except ImportError:
        sdk = known.sdk if known else name
        raise ModelUnavailable(
            f"the {name} provider's SDK is not installed", f"pip install 'pydantic-ai-slim[{sdk}]'"
        ) from None
    kwargs: dict[str, Any] = {}
    if base_url:
        kwargs["base_url"] = base_url
    env_base = os.environ.get(known.base_env) if known and known.base_env else None
    keyless = known is not None and not any(os.environ.get(k) for k in known.keys)
    if known and known.keys and keyless and (base_url or env_base):  # a local server: no key
        kwargs["api_key"] = _LOCAL_KEY
    try:
        return cls(**kwargs)
    except (UserError, TypeError, ValueError) as exc:
        raise ModelUnavailable(f"cannot use provider {name}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    return redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)


# ----- keys never leave the environment ----------------------------------------------------------
_SECRET_NAME = re.compile(r"(API_KEY|_KEY|TOKEN|SECRET)$")
_MIN_SECRET = 8


def redact(text: str) -> str:
    """`text` with the value of every key-like environment variable replaced by `[redacted]`."""
    for name, value in os.environ.items():
        if len(value) >= _MIN_SECRET and _SECRET_NAME.search(name) and value in text:
            text = text.replace(value, "[redacted]")
    return text


# ----- retries and the limiter around every request ----------------------------------------------
_RETRY_STATUS = frozenset({408, 409, 429})


def classify_error(exc: Exception) -> Retry | None:
    """Retry 429, 408/409 and 5xx (with the server's retry-after) and dropped connections."""
    from pydantic_ai.exceptions import (
        ModelConnectionError,
        ModelHTTPError,
        ModelQuotaExceededError,
    )

    if isinstance(exc, ModelQuotaExceededError):  # out of credit: waiting does not help
        return None
    if isinstance(exc, ModelHTTPError):
        if exc.status_code in _RETRY_STATUS or 500 <= exc.status_code < 600:
            return Retry(_retry_after(exc.headers or {}))
        return None
    if isinstance(exc, ModelConnectionError):
        return Retry(None)
    return None


def _retry_after(headers: dict[str, str]) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


def model_error(exc: Exception, spec: str = "") -> ModelCallFailed:
    """A one-line ModelCallFailed for an error a model run ended with (no key values in it)."""
    from pydantic_ai.exceptions import ModelHTTPError

    what = f"model {spec}" if spec else "the model"
    if isinstance(exc, ModelHTTPError):
        return ModelCallFailed(
            f"{what} answered HTTP {exc.status_code}", _first_line(exc)[:300] or "try again later"
        )
    return ModelCallFailed(
        f"{what} failed: {type(exc).__name__}: {_first_line(exc)[:300]}",
        "check the model name, the base URL and the server",
    )


def estimate_request_tokens(
    messages: list[ModelMessage], params: ModelRequestParameters | None = None
) -> int:
    """Estimated input tokens of one request: every message part, instructions and tool schemas."""
    total = 0
    for message in messages:
        instructions = getattr(message, "instructions", None)
        if isinstance(instructions, str):
            total += estimate_tokens(instructions)
        for part in message.parts:
            total += estimate_tokens(part_text(part))
    if params is not None:
        for tool in [*params.function_tools, *params.output_tools]:
            schema = json.dumps(tool.parameters_json_schema, ensure_ascii=False)
            total += estimate_tokens(f"{tool.name} {tool.description or ''} {schema}")
    return total


def part_text(part: Any) -> str:
    content = getattr(part, "content", None)
    if isinstance(content, str):
        return content
    args = getattr(part, "args", None)
    if isinstance(args, str):
        return f"{getattr(part, 'tool_name', '')} {args}"
    if args is not None:
        return f"{getattr(part, 'tool_name', '')} {json.dumps(args, ensure_ascii=False)}"
    if content is None:
        return ""
    try:
        return json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)
