"""A sketch, not a fix: how much the suggested hot-path changes buy (Anthropic SSE only).

`python -m benchmarks.fastpath_sketch [N]` folds the generated Anthropic streams with:
a regex SSE framer over each 64 KiB piece (C-level scan instead of a Python call per
line), jiter with `cache_mode="keys"`, one fused fast path that turns a text / thinking /
input_json delta straight into the open slot's chunk list and one event (falling back to
the real decoder and accumulator for everything else), and a non-frozen event class.
Each variant is checked against the expected result, then timed (CPU time, median of 5)
next to the SSE floor and streamfold as it is. It reaches into private attributes of the
decoder and accumulator: it sizes a change, it is not one.
"""

from __future__ import annotations

import functools
import gc
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jiter

from streamfold.accumulator import Accumulator
from streamfold.events import PartDelta
from streamfold.providers.anthropic import AnthropicDecoder

from .floor import Result, sse_floor
from .generate import generate
from .run import check
from .subject import chunks, result_of, streamfold_sse


@dataclass(slots=True)  # not frozen: about 3x cheaper to build than the frozen PartDelta
class FastPartDelta:
    index: int
    part_type: str
    content: str | None = None
    options: Any = None
    citations: tuple[Any, ...] = ()
    type: str = "part_delta"


_EVENT = re.compile(rb"(?:event: ?([^\r\n]*)\n)?data: ?([^\r\n]*)\n\n")
_FIELD = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


def fast_fold(
    sse: bytes, *, keys_cache: bool = True, fast_path: bool = True, plain_event: bool = True
) -> Result:
    """Fold Anthropic SSE bytes with the sketched changes; the Result of the Message."""
    decoder = AnthropicDecoder()
    acc = Accumulator(provider="anthropic")
    opened = acc._open
    blocks = decoder._blocks
    mode: Any = "keys" if keys_cache else "all"
    loads = jiter.from_json
    rest = b""
    events: list[Any] = []
    last: Any = None
    for piece in chunks(sse):
        buffer = rest + piece
        end = buffer.rfind(b"\n\n") + 2
        rest = buffer[end:]
        for match in _EVENT.finditer(buffer, 0, end):
            payload = loads(match.group(2), cache_mode=mode)
            if fast_path and payload.get("type") == "content_block_delta":
                delta = payload.get("delta")
                if type(delta) is dict:
                    field = _FIELD.get(delta.get("type"))
                    value = delta.get(field) if field else None
                    index = payload.get("index")
                    slot = opened.get(index)
                    if type(value) is str and slot is not None and blocks[index].kind != "buffered":
                        slot.chunks.append(value)
                        slot.has_content = True
                        if plain_event:
                            events.append(FastPartDelta(slot.index, slot.part_type, value))
                        else:
                            events.append(
                                PartDelta(index=slot.index, part_type=slot.part_type, content=value)
                            )
                        continue
            name = match.group(1)
            events.extend(acc.apply_all(decoder.decode(payload, name.decode() if name else None)))
        if events:
            last = events[-1]
            events.clear()  # a consumer takes them as they come
    events.extend(acc.apply_all(decoder.close()))
    events.extend(acc.close())
    last = events[-1] if events else last
    return result_of(last.message)


def _median_ns(run: Callable[[], Any], n: int, repeats: int = 5) -> float:
    run()
    samples = []
    for _ in range(repeats):
        gc.collect()
        start = time.process_time()
        run()
        samples.append(time.process_time() - start)
    return statistics.median(samples) * 1e9 / n


def _table(sse: bytes, n: int) -> list[tuple[str, float]]:
    variants: list[tuple[str, Callable[[], Any]]] = [
        ("SSE floor", functools.partial(sse_floor, "anthropic", sse)),
        ("streamfold today", functools.partial(streamfold_sse, "anthropic", sse)),
        ("all sketched changes", functools.partial(fast_fold, sse)),
        ("  but the frozen PartDelta", functools.partial(fast_fold, sse, plain_event=False)),
        ("  but jiter cache_mode='all'", functools.partial(fast_fold, sse, keys_cache=False)),
        ("  but no fused fast path", functools.partial(fast_fold, sse, fast_path=False)),
    ]
    return [(name, _median_ns(run, n)) for name, run in variants]


def main(n: int = 100_000) -> None:
    """Print the sketch's variants next to the floor and streamfold as it is."""
    for workload in ("mixed", "bigargs"):
        stream = generate("anthropic", workload, n)
        for variant in ({}, {"keys_cache": False}, {"plain_event": False}, {"fast_path": False}):
            problem = check(fast_fold(stream.sse, **variant), stream, ("text", "thinking", "tools"))
            assert problem is None, (variant, problem)
        rows = _table(stream.sse, n)
        floor = rows[0][1]
        print(f"anthropic / {workload} / N={n}")
        for name, ns in rows:
            print(f"  {name:32} {ns:7,.0f} ns/Δ  {ns / floor:5.2f}x floor")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
