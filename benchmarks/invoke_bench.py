"""Bedrock InvokeModelWithResponseStream beside Anthropic SSE, the same events both ways:
`python -m benchmarks.invoke_bench [--sizes 10000,100000] [--json FILE]`.

Claude on Bedrock streams the Anthropic Messages events, each one JSON, base64-encoded
in a `chunk` event (`{"bytes": ..., "p": <padding>}`) of the binary eventstream, without
the `ping`s. The generated Anthropic stream is folded as Anthropic SSE and as that invoke
body, in 64 KiB pieces, one event (one eventstream message) a chunk, and as decoded
events (boto3's `{"chunk": {"bytes": <bytes>}}` beside Anthropic's dicts). Each row's
ratio is the invoke fold over the Anthropic fold of the same input, sampled in turn in
one process; both are checked against the generator's expected result first.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from streamfold.eventstream import encode_message

from . import run
from .generate import Stream, generate
from .subject import chunks, event_chunks, streamfold_dicts, streamfold_sse_chunks

_HEADERS = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
METRICS = "amazon-bedrock-invocationMetrics"
INPUTS = ("sse", "live", "dicts")


def invoke_events(stream: Stream) -> list[dict[str, Any]]:
    """The Anthropic events as Bedrock streams them: no pings, the metrics trailer on
    message_stop."""
    out = []
    for event in stream.dicts:
        if event["type"] == "ping":
            continue
        if event["type"] == "message_stop":
            event = {**event, METRICS: {"inputTokenCount": 598, "outputTokenCount": stream.n}}
        out.append(event)
    return out


def invoke_messages(stream: Stream) -> list[bytes]:
    """One eventstream message per event, as Bedrock sends them."""
    out = []
    for n, event in enumerate(invoke_events(stream)):
        data = json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()
        body = {"bytes": base64.b64encode(data).decode(), "p": _PADDING[: 1 + n % 62]}
        out.append(encode_message(_HEADERS, json.dumps(body, separators=(",", ":")).encode()))
    return out


def _invoke(pieces: list[bytes]) -> run.Result:
    return streamfold_sse_chunks("bedrock-invoke", pieces)


def _impls(inp: str) -> list[run.Impl]:
    """The Anthropic fold (as the row's floor) and the invoke fold of one input."""
    full = ("text", "thinking", "signature", "tools")

    def anthropic(s: Stream) -> run.Runner:
        if inp == "dicts":
            return functools.partial(streamfold_dicts, "anthropic", s.dicts)
        pieces = event_chunks(s.sse) if inp == "live" else list(chunks(s.sse))
        return functools.partial(streamfold_sse_chunks, "anthropic", pieces)

    def invoke(s: Stream) -> run.Runner:
        messages = invoke_messages(s)
        if inp == "dicts":
            boto = [
                {"chunk": {"bytes": json.dumps(e, separators=(",", ":")).encode()}}
                for e in invoke_events(s)
            ]
            return functools.partial(streamfold_dicts, "bedrock-invoke", boto)
        pieces = messages if inp == "live" else list(chunks(b"".join(messages)))
        return functools.partial(_invoke, pieces)

    return [
        run.Impl("streamfold anthropic", inp, full, anthropic, "floor"),
        run.Impl("streamfold bedrock-invoke", inp, full, invoke, "streamfold"),
    ]


def measure(
    sizes: list[int],
    *,
    inputs: tuple[str, ...] = INPUTS,
    repeats: int = 5,
    budget: float = 60.0,
    warmup_s: float = run.WARMUP_S,
    log: Callable[[str], None] = print,
) -> list[run.Row]:
    """The invoke fold beside the Anthropic fold, per input and size (mixed workload)."""
    streams = {n: generate("anthropic", "mixed", n) for n in sizes}
    rows: list[run.Row] = []
    for inp in inputs:
        log(f"  bedrock-invoke vs anthropic ({inp})")
        group = run.measure_side_by_side(
            _impls(inp), streams, repeats=repeats, budget=budget, memory=False, warmup_s=warmup_s
        )
        run._relate(group)
        for r in group:
            r.provider = "bedrock-invoke"
        rows += group
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: ns per delta both ways and their ratio, per input and size."""
    lines = [
        "| input | N | Anthropic SSE ns/Δ | InvokeModel ns/Δ | invoke / Anthropic |",
        "|---|--:|--:|--:|--:|",
    ]
    by: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["input"], r["n"]), {})[r["kind"]] = r
    for (inp, n), pair in by.items():
        a, b = pair.get("floor"), pair.get("streamfold")
        if a is None or b is None or b["status"] != "ok":
            status = b["status"] + " " + b["note"] if b else "missing"
            lines.append(f"| {inp} | {run._size(n)} | - | - | {status} |")
            continue
        lines.append(
            f"| {inp} | {run._size(n)} | {a['ns_per_delta']:,.0f} | {b['ns_per_delta']:,.0f} "
            f"| {b['ratio']:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Measure, print the table, optionally save the rows."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.invoke_bench", description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--input", action="append", choices=INPUTS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--cpu-time", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="no warm-up (the tests)")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.cpu_time:
        run.use_cpu_time()
    log: Callable[[str], None] = (lambda _: None) if args.quiet else (
        lambda s: print(s, file=sys.stderr, flush=True)
    )  # fmt: skip
    rows = [
        asdict(r)
        for r in measure(
            [int(n) for n in args.sizes.split(",")],
            inputs=tuple(args.input or INPUTS),
            repeats=args.repeats,
            budget=args.budget,
            warmup_s=0.0 if args.smoke else run.WARMUP_S,
            log=log,
        )
    ]
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "versions": run._versions()}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
