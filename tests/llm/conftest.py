"""Fixtures for the model tests: a scripted chat-completions server and an environment with no
provider keys or base URLs (so nothing can reach a real provider)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.scripted_server import ScriptedServer

pytest.importorskip("pydantic_ai")

PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "OLLAMA_BASE_URL",
    "OLLAMA_API_KEY",
)


@pytest.fixture(autouse=True)
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s
