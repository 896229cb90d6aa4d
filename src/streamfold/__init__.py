"""streamfold: fold LLM provider streams into complete, replayable messages."""

from __future__ import annotations

from .accumulator import Accumulator
from .aio import AsyncFold, afold, afold_message
from .display import DisplayItem, extract_display_items
from .errors import (
    IncompleteMessageError,
    InvalidModelError,
    OptionsError,
    PartMergeError,
    StreamfoldError,
    StreamLimitError,
    StreamProtocolError,
    ToolArgumentsError,
    UsageError,
)
from .events import (
    Event,
    MessageCompleted,
    PartCompleted,
    PartDelta,
    PartStarted,
    ProviderErrored,
    UsageUpdated,
)
from .fold import Fold, StreamFolder, fold, fold_message
from .framing import NDJSONDecoder, SSEDecoder, SSEEvent
from .message import (
    Message,
    MessageDelta,
    ToolCall,
    ToolResult,
    Usage,
    is_narration,
    merge_delta,
    merge_deltas,
    merge_usage,
    to_message,
)
from .parts import (
    Citation,
    CitationSource,
    ContentPart,
    citations,
    content_to_string,
    has_citations,
    merge_part,
    parts_to_string,
    put_utterance,
    set_option_on_last_part,
    utterance,
)
from .providers import PROVIDERS, detect_provider
from .recording import Recording, load_recording

__all__ = [
    "PROVIDERS",
    "Accumulator",
    "AsyncFold",
    "Citation",
    "CitationSource",
    "ContentPart",
    "DisplayItem",
    "Event",
    "Fold",
    "IncompleteMessageError",
    "InvalidModelError",
    "Message",
    "MessageCompleted",
    "MessageDelta",
    "NDJSONDecoder",
    "OptionsError",
    "PartCompleted",
    "PartDelta",
    "PartMergeError",
    "PartStarted",
    "ProviderErrored",
    "Recording",
    "SSEDecoder",
    "SSEEvent",
    "StreamFolder",
    "StreamLimitError",
    "StreamProtocolError",
    "StreamfoldError",
    "ToolArgumentsError",
    "ToolCall",
    "ToolResult",
    "Usage",
    "UsageError",
    "UsageUpdated",
    "afold",
    "afold_message",
    "citations",
    "content_to_string",
    "detect_provider",
    "extract_display_items",
    "fold",
    "fold_message",
    "has_citations",
    "is_narration",
    "load_recording",
    "merge_delta",
    "merge_deltas",
    "merge_part",
    "merge_usage",
    "parts_to_string",
    "put_utterance",
    "set_option_on_last_part",
    "to_message",
    "utterance",
]
