"""What the SSE hot lane buys, in the build that runs: lane on and off, side by side.

    python -m benchmarks.hot_lane [N]

Folds seeded mixed streams (Anthropic, Chat, Responses; N deltas, 10k by default) in 64 KiB
pieces and one SSE event per chunk, with the lane on and off in alternation, and prints
the CPU-time medians of 7 runs after two warm-ups. Run it with the compiled build's
interpreter to see what the lane buys compiled (`streamfold.is_compiled()` is printed).
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import sys
import time
from collections.abc import Iterator

import streamfold
from streamfold.fold import StreamFolder
from streamfold.providers import anthropic, openai_chat, openai_responses

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


def live_pieces(sse: bytes) -> list[bytes]:
    """One SSE event per chunk, as a live connection delivers them."""
    events = sse.split(b"\n\n")
    return [event + b"\n\n" for event in events[:-1]] + ([events[-1]] if events[-1] else [])


def cpu_seconds(pieces: list[bytes], provider: str, off: bool) -> float:
    with lane_off() if off else contextlib.nullcontext():
        start = time.process_time()
        for _ in streamfold.fold(pieces, provider=provider):
            pass
        return time.process_time() - start


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    print(f"compiled: {streamfold.is_compiled()}, N = {n:,}")
    for provider in ("anthropic", "openai-chat", "openai-responses"):
        sse = generate(provider, "mixed", n).sse
        buffered = [sse[i : i + 65536] for i in range(0, len(sse), 65536)]
        for mode, pieces in (("buffered", buffered), ("live", live_pieces(sse))):
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
