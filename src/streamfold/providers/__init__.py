"""Provider registry: names, aliases, decoders, and detection from the first event."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import UsageError
from .base import Decoder

# name -> (module, decoder class). Modules import lazily: a user of one provider does not
# pay for the others.
_DECODERS: dict[str, tuple[str, str]] = {
    "anthropic": ("streamfold.providers.anthropic", "AnthropicDecoder"),
    "openai-chat": ("streamfold.providers.openai_chat", "OpenAIChatDecoder"),
    "openai-responses": ("streamfold.providers.openai_responses", "OpenAIResponsesDecoder"),
    "gemini": ("streamfold.providers.gemini", "GeminiDecoder"),
    "bedrock": ("streamfold.providers.bedrock", "BedrockDecoder"),
    "bedrock-invoke": ("streamfold.providers.bedrock_invoke", "BedrockInvokeDecoder"),
    "ollama": ("streamfold.providers.ollama", "OllamaDecoder"),
}

ALIASES: dict[str, str] = {
    "azure-openai-responses": "openai-responses",
    "xai-responses": "openai-responses",
    "deepseek-responses": "openai-responses",
    "openrouter-responses": "openai-responses",
    "openai": "openai-chat",
    "chat": "openai-chat",
    "azure-openai": "openai-chat",
    "deepseek": "openai-chat",
    "groq": "openai-chat",
    "mistral": "openai-chat",
    "openrouter": "openai-chat",
    "perplexity": "openai-chat",
    "xai": "openai-chat",
    "zai": "openai-chat",
    "alibaba": "openai-chat",
    "responses": "openai-responses",
    "vertex": "gemini",
    "google": "gemini",
    "bedrock-converse": "bedrock",
    "bedrock-invoke-model": "bedrock-invoke",
}

PROVIDERS: tuple[str, ...] = tuple(_DECODERS)

_ANTHROPIC_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)
_BEDROCK_EVENTS = frozenset(
    {
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
        "internalServerException",
        "modelStreamErrorException",
        "validationException",
        "throttlingException",
        "serviceUnavailableException",
    }
)


def canonical_provider(name: str) -> str:
    """Resolve a provider name or alias to its canonical name, or raise UsageError."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in _DECODERS:
        known = ", ".join(sorted({*_DECODERS, *ALIASES}))
        raise UsageError(f"provider: expected one of {known}; got {name!r}")
    return key


# Decoder classes by canonical name, imported on first use.
_CLASSES: dict[str, type[Decoder]] = {}


def decoder_class(name: str) -> type[Decoder]:
    """The decoder class of the named provider (its module imported on first use)."""
    key = canonical_provider(name)
    cls = _CLASSES.get(key)
    if cls is None:
        module_name, class_name = _DECODERS[key]
        cls = _CLASSES[key] = getattr(importlib.import_module(module_name), class_name)
    return cls


def get_decoder(name: str, **options: Any) -> Decoder:
    """A fresh decoder for the named provider."""
    return decoder_class(name)(**options)


def detect_provider(payload: Any, event: str | None = None) -> str | None:
    """Guess the provider from one event's payload (and SSE event name); None if unsure."""
    if not isinstance(payload, dict):
        return None
    kind = payload.get("type")
    if not isinstance(kind, str):
        kind = None  # a hostile {"type": {}} must not reach a set lookup
    if event in _ANTHROPIC_EVENTS or kind in _ANTHROPIC_EVENTS:
        return "anthropic"
    if isinstance(kind, str) and kind.startswith("response."):
        return "openai-responses"
    if "choices" in payload or payload.get("object") == "chat.completion.chunk":
        return "openai-chat"
    if "candidates" in payload or "usageMetadata" in payload or "promptFeedback" in payload:
        return "gemini"
    if isinstance(payload.get("chunk"), dict):
        return "bedrock-invoke"  # InvokeModelWithResponseStream: {"chunk": {"bytes": ...}}
    if payload and all(key in _BEDROCK_EVENTS for key in payload):
        return "bedrock"
    if "done" in payload and ("message" in payload or "response" in payload):
        return "ollama"
    error = payload.get("error")
    if set(payload) == {"error"} and isinstance(error, str):
        return "ollama"  # Ollama reports failures as a bare {"error": "<text>"}
    if isinstance(error, dict) and isinstance(error.get("status"), str):
        return "gemini"  # Google's error shape: {"error": {"code", "message", "status"}}
    if kind == "error" and "code" in payload and "message" in payload:
        return "openai-responses"  # a Responses stream that fails before response.created
    return None


__all__ = [
    "ALIASES",
    "PROVIDERS",
    "Decoder",
    "canonical_provider",
    "decoder_class",
    "detect_provider",
    "get_decoder",
]
