"""Generated Messages for `to_stream`'s tests: text and thinking parts (signed or not) and
tool calls in any order, a status and a usage, as a provider could stream them."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st

from streamfold import Citation, CitationSource, ContentPart, Message, ToolCall, Usage

_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
_NAME = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAME, inner, max_size=3),
    max_leaves=6,
)
# Signatures are base64 text on every provider (Gemini's SDK decodes them).
_SIGNATURE = st.binary(min_size=1, max_size=18).map(lambda b: base64.b64encode(b).decode())


# How a turn ends: status and stop reason, as folds give them.
_ENDS: list[tuple[str, str | None]] = [
    ("complete", "stop"),
    ("complete", "stop"),
    ("complete", "pause"),
    ("complete", "other"),
    ("length", "length"),
    ("content_filtered", "content_filter"),
    ("complete", "refusal"),
    ("incomplete", None),
    ("cancelled", "cancelled"),
    ("error", "error"),
]


_CITATION = st.builds(
    Citation,
    cited_text=st.none() | _TEXT,
    source=st.builds(CitationSource, type=st.just("web"), title=st.none() | _TEXT.filter(bool),
                     url=st.just("https://example.com/") | _NAME.map(lambda n: f"https://{n}.test/")),
)  # fmt: skip


@st.composite
def _parts(draw: st.DrawFn) -> ContentPart:
    kind = draw(st.sampled_from(["text", "text", "refusal", "thinking"]))
    text = draw(_TEXT.filter(bool))
    if kind == "refusal":
        return ContentPart.text(text, refusal=True)
    if kind == "text":
        cited = draw(st.lists(_CITATION, max_size=2))
        return ContentPart(type="text", content=text, citations=cited)
    signature = draw(st.none() | _SIGNATURE)
    return ContentPart.thinking(text, **({"signature": signature} if signature else {}))


@st.composite
def messages(draw: st.DrawFn) -> Message:
    """An assistant Message a provider could stream."""
    parts = draw(st.lists(_parts(), max_size=4))
    calls = draw(st.lists(st.tuples(_NAME, st.dictionaries(_NAME, _JSON, max_size=3)), max_size=3))
    order: list[ContentPart | ToolCall] = list(parts)
    for n, (name, args) in enumerate(calls):
        at = draw(st.integers(0, len(order)))
        call = ToolCall(call_id=f"call_{n}", name=name, arguments=args, status="complete")
        order.insert(at, call)
    content = [p for p in order if isinstance(p, ContentPart)]
    tool_calls = [c.model_copy(update={"index": i}) for i, c in enumerate(order)
                  if isinstance(c, ToolCall)]  # fmt: skip
    end, stop = draw(st.sampled_from(_ENDS))
    if end == "complete" and stop == "stop" and tool_calls:
        stop = "tool_use"
    metadata = {"error": {"type": "server_error", "message": "it broke"}} if end == "error" else {}
    usage = draw(st.none() | st.builds(Usage, input_tokens=st.integers(0, 10**5),
                                        output_tokens=st.integers(0, 10**5)))  # fmt: skip
    return Message(role="assistant", content=content, tool_calls=tool_calls, status=end,
                   stop_reason=stop, usage=usage, metadata=metadata)  # fmt: skip
