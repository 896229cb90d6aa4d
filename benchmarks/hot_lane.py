"""What the lanes buy, in the build that runs: each lane on and off, side by side.

    python -m benchmarks.hot_lane [N]

Folds seeded mixed streams (Anthropic, Chat, Responses; N deltas, 10k by default) in 64 KiB
pieces and one SSE event per chunk with the SSE hot lane on and off, and as decoded dicts
with the dict lane (`Decoder.object_text`) on and off, in alternation, and prints the
CPU-time medians of 7 runs after two warm-ups. Run it with the compiled build's
interpreter to see what the lanes buy compiled (`streamfold.is_compiled()` is printed).
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

import streamfold
from streamfold.fold import StreamFolder
from streamfold.providers import anthropic, openai_chat, openai_responses
from streamfold.providers.base import Decoder

from .generate import generate

_LANES = (
    anthropic.AnthropicDecoder,
    openai_chat.OpenAIChatDecoder,
    openai_responses.OpenAIResponsesDecoder,
)


@contextlib.contextmanager
def lane_off() -> Iterator[None]:
    """The lane never starts, neither after some events nor with many at hand (a compiled
    fold reads these two settings; sse_hot_head is what the interpreted one reads)."""
    saved_after, saved_ahead = StreamFolder.hot_lane_after, StreamFolder.hot_lane_ahead
    saved_heads = [cls.__dict__.get("sse_hot_head") for cls in _LANES]
    StreamFolder.hot_lane_after = StreamFolder.hot_lane_ahead = sys.maxsize
    for cls in _LANES:
        cls.sse_hot_head = None
    try:
        yield
    finally:
        StreamFolder.hot_lane_after, StreamFolder.hot_lane_ahead = saved_after, saved_ahead
        for cls, head in zip(_LANES, saved_heads, strict=True):
            if head is None:  # inherited: drop the override
                with contextlib.suppress(AttributeError):
                    del cls.sse_hot_head
            else:
                cls.sse_hot_head = head


@contextlib.contextmanager
def dict_lane_off() -> Iterator[None]:
    """The decoders' dict lane off: the base's object_text, so the fold takes none (it
    compares the class attribute, in either build); decode() is unchanged."""
    saved = [cls.__dict__["object_text"] for cls in _LANES]
    for cls in _LANES:
        cls.object_text = Decoder.object_text  # type: ignore[method-assign]
    try:
        yield
    finally:
        for cls, lane in zip(_LANES, saved, strict=True):
            cls.object_text = lane  # type: ignore[method-assign]


def live_pieces(sse: bytes) -> list[bytes]:
    """One SSE event per chunk, as a live connection delivers them."""
    events = sse.split(b"\n\n")
    return [event + b"\n\n" for event in events[:-1]] + ([events[-1]] if events[-1] else [])


def cpu_seconds(pieces: list[Any], provider: str, off: bool) -> float:
    """One fold of `pieces` (SSE bytes, or decoded dicts) with its lane on or off."""
    switch = dict_lane_off if pieces and type(pieces[0]) is dict else lane_off
    with switch() if off else contextlib.nullcontext():
        start = time.process_time()
        for _ in streamfold.fold(pieces, provider=provider):
            pass
        return time.process_time() - start


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    print(f"compiled: {streamfold.is_compiled()}, N = {n:,}")
    for provider in ("anthropic", "openai-chat", "openai-responses"):
        stream = generate(provider, "mixed", n)
        sse = stream.sse
        buffered = [sse[i : i + 65536] for i in range(0, len(sse), 65536)]
        inputs = (("buffered", buffered), ("live", live_pieces(sse)), ("dicts", stream.dicts))
        for mode, pieces in inputs:
            for _ in range(2):
                cpu_seconds(pieces, provider, False)
                cpu_seconds(pieces, provider, True)
            gc.collect()
            on: list[float] = []
            off: list[float] = []
            for _ in range(7):
                on.append(cpu_seconds(pieces, provider, False))
                off.append(cpu_seconds(pieces, provider, True))
            lane, full = statistics.median(on), statistics.median(off)
            print(
                f"{provider:17} {mode:8} lane on {lane / n * 1e9:6.0f} ns/delta, "
                f"off {full / n * 1e9:6.0f}: off / on {full / lane:.2f}"
            )


if __name__ == "__main__":
    main()
