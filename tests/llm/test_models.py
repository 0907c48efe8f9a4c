"""Provider access: model strings, missing keys and extras, retries through the limiter, and
keys that never reach an error message."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic_ai import Agent

from markindex_core.errors import InvalidArgument, ModelUnavailable
from markindex_core.llm.limits import RateLimiter
from markindex_core.llm.models import model_error, redact, resolve_model
from tests.llm.scripted_server import ScriptedServer, error, repeat, reply
from tests.paths import REPO

SECRET = "sk-test-0123456789abcdef-secret"


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:gpt-5-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("google-gla:gemini-2.5-flash", "GOOGLE_API_KEY"),
        ("ollama:llama3.2", "OLLAMA_BASE_URL"),
    ],
)
def test_a_missing_key_names_the_variable_to_set(spec: str, variable: str) -> None:
    with pytest.raises(ModelUnavailable) as info:
        resolve_model(spec)
    assert variable in info.value.message
    assert "\n" not in str(info.value)


def test_bad_spec_and_unknown_provider_say_what_is_expected() -> None:
    with pytest.raises(InvalidArgument, match="PROVIDER:MODEL"):
        resolve_model("gpt-5")
    with pytest.raises(ModelUnavailable, match="unknown model provider 'nosuch'"):
        resolve_model("nosuch:model")


def test_base_url_reaches_a_local_server_without_a_key(server: ScriptedServer) -> None:
    server.push(reply("hello"))
    model = resolve_model("openai-chat:local-model", base_url=server.base_url)
    assert Agent(model).run_sync("hi").output == "hello"
    assert server.requests[0].body["model"] == "local-model"


def test_429_and_5xx_are_retried_through_the_limiter(server: ScriptedServer) -> None:
    server.push(error(429, retry_after=0.3), error(503, retry_after=0.1), reply("ok"))
    limiter = RateLimiter(rpm=100, tpm=None)
    model = resolve_model("openai-chat:m", base_url=server.base_url, limiter=limiter)
    assert Agent(model).run_sync("hi").output == "ok"
    assert [r.status for r in server.requests] == [429, 503, 200]
    assert limiter.requests == 3  # each attempt passed the limiter
    gap = server.requests[1].at - server.requests[0].at
    assert gap >= 0.3  # the server's retry-after was honoured


def test_a_non_retryable_error_fails_once_with_one_line(server: ScriptedServer) -> None:
    server.push(error(400, message="bad request"))
    model = resolve_model("openai-chat:m", base_url=server.base_url)
    with pytest.raises(Exception) as info:
        Agent(model).run_sync("hi")
    assert len(server.requests) == 1
    failure = model_error(info.value, "openai-chat:m")
    assert "HTTP 400" in failure.message


def test_keys_never_reach_errors_or_logs(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.push(error(401, message=f"invalid key {SECRET}"))  # a server that echoes the key
    model = resolve_model("openai-chat:m", base_url=server.base_url)
    with pytest.raises(Exception) as info:
        Agent(model).run_sync("hi")
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"  # sent, as it must be
    failure = model_error(info.value, "openai-chat:m")
    assert SECRET not in str(failure)
    assert SECRET not in caplog.text
    assert redact(f"x {SECRET} y") == "x [redacted] y"


def test_without_the_extra_the_error_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['pydantic_ai'] = None\n"
        "from markindex_core.llm.models import resolve_model\n"
        "from markindex_core.errors import ModelUnavailable\n"
        "try:\n    resolve_model('openai:gpt-5')\n"
        "except ModelUnavailable as e:\n    print(e.hint)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "pip install 'markindex[llm]'", out.stderr


def test_the_base_import_loads_no_model_library() -> None:
    code = (
        "import sys, markindex_core, markindex_core.cli.main\n"
        "from markindex_core.cli.main import build_parser; build_parser()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic_ai', 'openai', 'anthropic'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stderr


class RecordingLimiter(RateLimiter):
    """The limiter, noting when it let each attempt go (on its own clock)."""

    grants: list[float]

    async def acquire(self, estimated_tokens: int) -> None:
        await super().acquire(estimated_tokens)
        self.grants = [*getattr(self, "grants", []), self._clock()]


def test_one_limiter_holds_under_concurrency_and_retries(server: ScriptedServer) -> None:
    """Eight concurrent runs, some refused with 429/503, share a 2-requests-per-second limiter
    (the window shrunk from 60 s to 1 s): every attempt is granted by it, and no 1 s window of
    grants holds more than 2."""
    import asyncio

    server.push(error(429, retry_after=0), reply("a"), error(503, retry_after=0))
    server.fallback = repeat(reply("ok"))
    limiter = RecordingLimiter(rpm=2, tpm=None, window=1.0)
    model = resolve_model("openai-chat:m", base_url=server.base_url, limiter=limiter)
    agent = Agent(model)

    async def runs() -> list[str]:
        return [r.output for r in await asyncio.gather(*(agent.run("hi") for _ in range(8)))]

    outputs = asyncio.run(runs())
    assert len(outputs) == 8
    assert len(server.requests) == 10 == len(limiter.grants)  # 8 answers + 2 refused attempts
    grants = sorted(limiter.grants)
    for i, t in enumerate(grants):
        assert len([g for g in grants[i:] if g < t + 1.0]) <= 2, grants
    assert grants[-1] - grants[0] >= 4.0  # 10 attempts at 2 per second
    assert all(r.at >= grants[0] for r in server.requests)
