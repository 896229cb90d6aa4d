"""Provider registry: names, aliases, decoders, and detection from the first event.

Every provider, built-in or not, is added with `register_provider`: a name, a `Decoder`
subclass (or a loader that imports it on first use), aliases, and an optional detector.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ..errors import UsageError, preview
from ..message import MessageDelta
from .base import Decoder

Detector = Callable[[dict[str, Any], str | None], bool]
"""`detect(payload, sse_event_name)`: True when one event's JSON object is this provider's."""

DecoderLoader = Callable[[], type[Decoder]]
"""A callable that imports and returns a Decoder subclass: a provider loaded on first use."""


class _Provider(NamedTuple):
    decoder: type[Decoder] | DecoderLoader
    detect: Detector | None
    builtin: bool


# Canonical name -> provider, in registration order (the order detection asks them in).
_REGISTRY: dict[str, _Provider] = {}
# Alias -> canonical name.
ALIASES: dict[str, str] = {}
# Decoder classes by canonical name, imported on first use.
_CLASSES: dict[str, type[Decoder]] = {}

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise UsageError(
            f"register_provider: expected {what} of lowercase letters, digits, '.', '_' "
            f"or '-' (at most 64, starting with a letter or digit), got {name!r}"
        )
    return name


def register_provider(
    name: str,
    decoder: type[Decoder] | DecoderLoader,
    *,
    aliases: Iterable[str] = (),
    detect: Detector | None = None,
    replace: bool = False,
) -> None:
    """Add a provider: `fold(stream, provider=name)` then decodes its events with `decoder`.

    `decoder`: a `Decoder` subclass (see its docstring for the contract), or a callable
    that imports and returns one the first time the provider is used. `aliases`: other
    names that resolve to this one. `detect(payload, sse_event_name)`: True for an event
    of this provider, so a fold given no provider recognises it; detectors are asked in
    registration order, the built-ins first. A name or alias already taken raises
    UsageError unless `replace=True` (which may replace a built-in).
    """
    from ..arguments import check_bool, check_names  # (it imports this package)

    key = _check_name(name, "a provider name")
    # A str is an iterable of its letters: aliases="abc" would register a, b and c.
    names = check_names("register_provider", "aliases", aliases)
    alias_keys = [_check_name(alias, "an alias") for alias in names]
    check_bool("register_provider", "replace", replace)
    if isinstance(decoder, type):
        if not issubclass(decoder, Decoder):
            raise UsageError(
                f"register_provider: expected a subclass of streamfold.Decoder, got "
                f"{decoder.__name__}"
            )
    elif not callable(decoder):
        raise UsageError(
            "register_provider: expected a Decoder subclass or a callable that returns "
            f"one, got {type(decoder).__name__}"
        )
    if detect is not None and not callable(detect):
        raise UsageError(
            f"register_provider: expected detect to be callable, got {preview(detect)}"
        )
    if not replace:
        taken = [n for n in (key, *alias_keys) if n in _REGISTRY or n in ALIASES]
        if taken:
            raise UsageError(
                f"register_provider: expected new names, got {', '.join(map(repr, taken))} "
                "already registered (pass replace=True to replace)"
            )
    elif any(alias in _REGISTRY for alias in alias_keys):
        raise UsageError(
            f"register_provider: expected aliases that are not provider names, got {alias_keys}"
        )
    before = _REGISTRY.get(key)
    ALIASES.pop(key, None)
    # A built-in stays one when replaced: unregister_provider cannot leave its name unknown.
    _REGISTRY[key] = _Provider(decoder, detect, _BOOTING or (before is not None and before.builtin))
    _CLASSES.pop(key, None)
    for alias in alias_keys:
        ALIASES[alias] = key


def unregister_provider(name: str) -> None:
    """Remove a provider added with `register_provider`, and its aliases (not a built-in)."""
    key = canonical_provider(name)
    if _REGISTRY[key].builtin:
        raise UsageError(f"unregister_provider: expected a provider you registered, got {key!r}")
    del _REGISTRY[key]
    _CLASSES.pop(key, None)
    for alias in [a for a, target in ALIASES.items() if target == key]:
        del ALIASES[alias]


def registered_providers() -> tuple[str, ...]:
    """The canonical names of every registered provider, built-in ones first."""
    return tuple(_REGISTRY)


def canonical_provider(name: str) -> str:
    """Resolve a provider name or alias to its canonical name, or raise UsageError."""
    if not isinstance(name, str):
        raise UsageError(f"provider: expected a provider name (str), got {type(name).__name__}")
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in _REGISTRY:
        known = ", ".join(sorted({*_REGISTRY, *ALIASES}))
        raise UsageError(f"provider: expected one of {known}; got {name!r}")
    return key


def decoder_class(name: str) -> type[Decoder]:
    """The Decoder subclass registered for a provider name or alias (imported on first use)."""
    # Every fold asks by a canonical name whose class is loaded: answered before the name
    # checks (the same answer: no alias can be a canonical name).
    cls = _CLASSES.get(name)
    if cls is not None:
        return cls
    key = canonical_provider(name)
    cls = _CLASSES.get(key)
    if cls is None:
        found = _REGISTRY[key].decoder
        cls = found if isinstance(found, type) else found()
        if not (isinstance(cls, type) and issubclass(cls, Decoder)):
            raise UsageError(
                f"provider {key!r}: expected its loader to return a Decoder subclass, got {cls!r}"
            )
        _CLASSES[key] = cls
    return cls


def get_decoder(name: str, **options: Any) -> Decoder:
    """A fresh decoder for the named provider."""
    return decoder_class(name)(**options)


def detect_provider(payload: Any, event: str | None = None) -> str | None:
    """Guess the provider from one event's payload (and SSE event name); None if unsure."""
    if not isinstance(payload, dict):
        return None
    for name, provider in _REGISTRY.items():
        if provider.detect is None:
            continue
        try:
            if provider.detect(payload, event):
                return name
        except Exception as exc:
            # A detector sees every provider's events: one that fails on a payload it
            # does not know is a bug in the detector, named as such, not a broken stream.
            raise UsageError(
                f"provider {name!r}: expected its detector to answer True or False, got "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    return None


# --- the built-in providers ----------------------------------------------------------

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


def _kind(payload: dict[str, Any]) -> str | None:
    kind = payload.get("type")
    return kind if isinstance(kind, str) else None  # a hostile {"type": {}} is no name


def _detect_anthropic(payload: dict[str, Any], event: str | None) -> bool:
    return event in _ANTHROPIC_EVENTS or _kind(payload) in _ANTHROPIC_EVENTS


def _detect_openai_responses(payload: dict[str, Any], event: str | None) -> bool:
    kind = _kind(payload)
    if kind is not None and kind.startswith("response."):
        return True
    # A Responses stream that fails before response.created.
    return kind == "error" and "code" in payload and "message" in payload


def _detect_openai_chat(payload: dict[str, Any], event: str | None) -> bool:
    return "choices" in payload or payload.get("object") == "chat.completion.chunk"


def _detect_gemini(payload: dict[str, Any], event: str | None) -> bool:
    if "candidates" in payload or "usageMetadata" in payload or "promptFeedback" in payload:
        return True
    # Google's error shape: {"error": {"code", "message", "status"}}.
    error = payload.get("error")
    return isinstance(error, dict) and isinstance(error.get("status"), str)


def _detect_bedrock_invoke(payload: dict[str, Any], event: str | None) -> bool:
    return isinstance(payload.get("chunk"), dict)  # InvokeModel: {"chunk": {"bytes": ...}}


def _detect_bedrock(payload: dict[str, Any], event: str | None) -> bool:
    return bool(payload) and all(key in _BEDROCK_EVENTS for key in payload)


def _detect_ollama(payload: dict[str, Any], event: str | None) -> bool:
    if "done" in payload and ("message" in payload or "response" in payload):
        return True
    # Ollama reports failures as a bare {"error": "<text>"}.
    return set(payload) == {"error"} and isinstance(payload["error"], str)


_DELTA_FIELDS = frozenset(MessageDelta.model_fields)
_DELTA_SIGNS = frozenset({"content", "tool_calls", "status"})


def _detect_streamfold(payload: dict[str, Any], event: str | None) -> bool:
    # A MessageDelta's JSON (model_dump, or only the fields set): nothing but its fields.
    keys = payload.keys()
    return keys <= _DELTA_FIELDS and not _DELTA_SIGNS.isdisjoint(keys)


def _builtin(where: str) -> DecoderLoader:
    """A loader for a built-in decoder: a user of one provider does not pay for the others."""
    module_name, class_name = where.split(":")

    def load() -> type[Decoder]:
        cls: type[Decoder] = getattr(importlib.import_module(module_name), class_name)
        return cls

    return load


_P = "streamfold.providers."
# name, decoder, detector, aliases: one line per provider, in detection order (a payload
# that two detectors accept goes to the first).
_BUILTINS: tuple[tuple[str, str, Detector, tuple[str, ...]], ...] = (
    ("anthropic", _P + "anthropic:AnthropicDecoder", _detect_anthropic, ()),
    (
        "openai-responses",
        _P + "openai_responses:OpenAIResponsesDecoder",
        _detect_openai_responses,
        (
            "responses",
            "azure-openai-responses",
            "xai-responses",
            "deepseek-responses",
            "openrouter-responses",
        ),
    ),
    (
        "openai-chat",
        _P + "openai_chat:OpenAIChatDecoder",
        _detect_openai_chat,
        (
            "openai",
            "chat",
            "azure-openai",
            "deepseek",
            "groq",
            "mistral",
            "openrouter",
            "perplexity",
            "xai",
            "zai",
            "alibaba",
        ),
    ),
    ("gemini", _P + "gemini:GeminiDecoder", _detect_gemini, ("vertex", "google")),
    (
        "bedrock-invoke",
        _P + "bedrock_invoke:BedrockInvokeDecoder",
        _detect_bedrock_invoke,
        ("bedrock-invoke-model",),
    ),
    ("bedrock", _P + "bedrock:BedrockDecoder", _detect_bedrock, ("bedrock-converse",)),
    ("ollama", _P + "ollama:OllamaDecoder", _detect_ollama, ()),
    (
        "streamfold",
        _P + "messagedelta:MessageDeltaDecoder",
        _detect_streamfold,
        ("messagedelta", "message-delta"),
    ),
)

_BOOTING = True
for _name, _where, _detect, _aliases in _BUILTINS:
    register_provider(_name, _builtin(_where), aliases=_aliases, detect=_detect)
_BOOTING = False

PROVIDERS: tuple[str, ...] = registered_providers()
"""The built-in providers' canonical names (see `registered_providers()` for all)."""

__all__ = [
    "ALIASES",
    "PROVIDERS",
    "Decoder",
    "DecoderLoader",
    "Detector",
    "canonical_provider",
    "decoder_class",
    "detect_provider",
    "get_decoder",
    "register_provider",
    "registered_providers",
    "unregister_provider",
]
