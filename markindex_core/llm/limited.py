"""`LimitedModel`: a provider model whose every request passes the run's limiter and our retries.

Imported only after `models.require_llm_extra()` has checked that pydantic-ai is installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai.exceptions import ModelTimeoutError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from markindex_core.config import LLM_HTTP_TIMEOUT_S
from markindex_core.llm.limits import RateLimiter, with_retries
from markindex_core.llm.models import classify_error, estimate_request_tokens


class LimitedModel(WrapperModel):
    """Wraps a provider model: each attempt (first and every retry) acquires `limiter` first.

    The SDK's own retries are off (`max_retries=0`), so a 429 or 5xx comes back here and is retried
    by `with_retries` after the server's retry-after, through the limiter again. Each attempt,
    reading the answer included, ends after `timeout` seconds (a timeout is retried like a
    dropped connection). `retries` counts the retries made, for reports.
    """

    def __init__(
        self,
        wrapped: Model,
        limiter: RateLimiter | None = None,
        *,
        timeout: float = LLM_HTTP_TIMEOUT_S,
    ) -> None:
        super().__init__(wrapped)
        self.limiter = limiter
        self.timeout = timeout
        self.retries = 0

    def _request_settings(self, settings: ModelSettings | None) -> ModelSettings:
        merged = ModelSettings(timeout=self.timeout)
        merged.update(settings or {})
        merged["max_retries"] = 0  # every retry is ours, through the limiter
        return merged

    def _counted(self, _exc: Exception, _wait: float) -> None:
        self.retries += 1

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        settings = self._request_settings(model_settings)

        async def attempt() -> ModelResponse:
            # The HTTP client's timeout bounds each read, so a server that keeps sending a byte
            # now and then (or keep-alive whitespace) would hold the request forever: the whole
            # attempt gets the same limit.
            try:
                async with asyncio.timeout(self.timeout):
                    return await self.wrapped.request(messages, settings, model_request_parameters)
            except TimeoutError:
                raise ModelTimeoutError(
                    self.model_name, f"no complete answer within {self.timeout:g} s"
                ) from None

        return await with_retries(
            attempt,
            limiter=self.limiter,
            estimated_tokens=estimate_request_tokens(messages, model_request_parameters),
            classify=classify_error,
            on_retry=self._counted,
        )

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncGenerator[StreamedResponse]:
        if self.limiter is not None:  # a stream is not retried, but it is limited
            await self.limiter.acquire(estimate_request_tokens(messages, model_request_parameters))
        async with self.wrapped.request_stream(
            messages, self._request_settings(model_settings), model_request_parameters, run_context
        ) as stream:
            yield stream
