"""streamfold: fold LLM provider streams into complete, replayable messages."""

from __future__ import annotations

from ._build import is_compiled
from .accumulator import Accumulator
from .aio import AsyncFold, afold, afold_message
from .cli import event_to_json
from .display import DisplayItem, extract_display_items
from .encoding import EncodeError, Problem, ReplayWarning, check_replayable, encode
from .errors import (
    IncompleteMessageError,
    InvalidModelError,
    OptionsError,
    PartMergeError,
    StateError,
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
    PartMarked,
    PartStarted,
    ProviderErrored,
    UsageUpdated,
)
from .fold import Fold, StreamFolder, fold, fold_message
from .framing import NDJSONDecoder, SSEDecoder, SSEEvent
from .limits import Limits
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
from .partial_json import IncrementalJSON, PartialJSONError, apply_change, partial_arguments
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
    utterance_inferred,
)
from .providers import PROVIDERS, detect_provider
from .recording import Recording, load_recording
from .ui import (
    UI_MESSAGE_STREAM_HEADERS,
    aencode_sse,
    ato_ui_message_stream,
    encode_sse,
    to_ui_message_stream,
)

__all__ = [
    "PROVIDERS",
    "UI_MESSAGE_STREAM_HEADERS",
    "Accumulator",
    "AsyncFold",
    "Citation",
    "CitationSource",
    "ContentPart",
    "DisplayItem",
    "EncodeError",
    "Event",
    "Fold",
    "IncompleteMessageError",
    "IncrementalJSON",
    "InvalidModelError",
    "Limits",
    "Message",
    "MessageCompleted",
    "MessageDelta",
    "NDJSONDecoder",
    "OptionsError",
    "PartCompleted",
    "PartDelta",
    "PartMarked",
    "PartMergeError",
    "PartStarted",
    "PartialJSONError",
    "Problem",
    "ProviderErrored",
    "Recording",
    "ReplayWarning",
    "SSEDecoder",
    "SSEEvent",
    "StateError",
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
    "aencode_sse",
    "afold",
    "afold_message",
    "apply_change",
    "ato_ui_message_stream",
    "check_replayable",
    "citations",
    "content_to_string",
    "detect_provider",
    "encode",
    "encode_sse",
    "event_to_json",
    "extract_display_items",
    "fold",
    "fold_message",
    "has_citations",
    "is_compiled",
    "is_narration",
    "load_recording",
    "merge_delta",
    "merge_deltas",
    "merge_part",
    "merge_usage",
    "partial_arguments",
    "parts_to_string",
    "put_utterance",
    "set_option_on_last_part",
    "to_message",
    "to_ui_message_stream",
    "utterance",
    "utterance_inferred",
]
