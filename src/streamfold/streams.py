"""`to_stream`: any Message as a provider's own stream, the bytes its API sends.

Each provider's writer lives in its package (`providers/<name>/stream.py`); this module
checks the arguments and picks the writer. What "the same Message" means after a fold of
the written stream, and what each stream cannot carry, is in `to_stream`'s docstring.
"""

from __future__ import annotations

import importlib
from typing import Any

from .arguments import check_bool, describe
from .errors import UsageError
from .message import Message
from .providers import canonical_provider
from .providers.streaming import StreamWriter

STREAM_WRITERS: dict[str, str] = {
    "openai-chat": "streamfold.providers.openai_chat.stream",
    "openai-responses": "streamfold.providers.openai_responses.stream",
    "anthropic": "streamfold.providers.anthropic.stream",
    "gemini": "streamfold.providers.gemini.stream",
    "ollama": "streamfold.providers.ollama.stream",
    "bedrock": "streamfold.providers.bedrock.stream",
    "bedrock-invoke": "streamfold.providers.bedrock_invoke.stream",
}
"""The providers `to_stream` writes, and the module of each one's writer."""

DEFAULT_PIECE = 16


def to_stream(
    message: Message,
    provider: str,
    *,
    model: str = "streamfold",
    piece: int = DEFAULT_PIECE,
    strict: bool = False,
) -> list[bytes]:
    """The Message as `provider`'s own stream: a list of byte chunks, one event a chunk.

    SSE for openai-chat (and the servers that speak it), openai-responses, anthropic and
    gemini (`alt=sse`); NDJSON for ollama (`/api/chat`); AWS eventstream messages for
    bedrock (ConverseStream) and bedrock-invoke (InvokeModelWithResponseStream, Claude's
    events in `chunk` frames). Text, thinking and tool arguments arrive in deltas of at
    most `piece` characters; `model` names the model when the message names none.

    "The same Message", after a fold of the stream with the same provider:
    - a message folded from that provider comes back equal: its parts (ids, signatures,
      encrypted reasoning, opaque server-tool blocks, citations), tool calls, status,
      stop reason, usage (the raw usage too) and the metadata the stream carries;
    - any other message keeps its text (a refusal part is text but on Chat and Responses; on Chat
      its order against the other text is lost), its thinking text, each tool call's name and
      arguments, its status and its stop reason, but for the words the provider has none for: a
      cancelled turn is a cut one (status incomplete) but on Responses; Anthropic's `pause` and an
      MCP `approval` read as `stop` elsewhere (so `tool_use` next to tool calls); `other` reads as
      `stop` but on Gemini; a filtered answer is Anthropic's `refusal`, and on Ollama a normal
      `stop`; a `refusal` is a filtered answer on Anthropic, Bedrock and Gemini, and `stop` on
      Ollama and on Chat and Responses without a refusal part (those say it with one). The Message
      it folds to, written again, comes back equal: one trip reaches the provider's form.

    What a provider's stream cannot carry is listed in its writer's docstring
    (`streamfold.providers.<name>.stream`): a part it has no place for is left out with a
    `ReplayWarning` (`strict=True`: an `EncodeError` naming the part); options and
    metadata it has no field for are left out without a word. A message whose status is
    `error` ends with the provider's own error event (`streamfold.testing.faults`); one
    cut (`incomplete`) ends without the provider's end marker.
    """
    if not isinstance(message, Message):
        raise UsageError(f"to_stream: expected a streamfold Message, got {describe(message)}")
    if not isinstance(provider, str):
        raise UsageError(f"to_stream: expected a provider name, got {describe(provider)}")
    target = canonical_provider(provider)
    module_name = STREAM_WRITERS.get(target)
    if module_name is None:
        raise UsageError(
            f"to_stream: expected one of {', '.join(sorted(STREAM_WRITERS))} (or an alias), "
            f"got {provider!r}"
        )
    if not isinstance(model, str):
        raise UsageError(f"to_stream: expected model to be a str, got {describe(model)}")
    if isinstance(piece, bool) or not isinstance(piece, int) or piece < 1:
        raise UsageError(f"to_stream: expected piece to be an int >= 1, got {describe(piece)}")
    check_bool("to_stream", "strict", strict)
    if message.role != "assistant":
        raise UsageError(
            f"to_stream: expected an assistant message (a provider streams its answer), "
            f"got role {message.role!r}"
        )
    writer = StreamWriter(message, target, model, piece, strict)
    module: Any = importlib.import_module(module_name)
    chunks: list[bytes] = module.to_stream_chunks(writer)
    return chunks
