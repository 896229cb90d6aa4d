"""The shapes table: `python -m benchmarks.shapes [--list] [--sizes 10000,100000]`.

Servers send the same delta with their own key order and their own extra fields. This
finds every distinct delta shape in the real recordings (`tests/fixtures/real`, the APIs
the benchmark has a floor for: Anthropic Messages, Chat Completions, Responses) by
reading them, re-writes a generated stream so that every delta event has exactly that
shape, and times streamfold beside the floor on it: one SSE event a chunk (a live
connection), the bytes in 64 KiB pieces, and the decoded dicts.

A shape is found per kind of delta (text, thinking, tool-argument fragment): the
ordered keys of the delta event, of its nested delta (and, for Chat, of its choice, its
tool call and its function), and the values of the fields the stream's content does not
decide (`obfuscation`, `logprobs`, a repeated `role`, Perplexity's `citations` and
`usage`, ...), taken from the first event of that shape in the recording. Its stream
holds N deltas of that kind alone, each re-written onto the shape; the events around
them (starts, stops, the usage) are the generator's.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from . import run
from .floor import _payloads
from .generate import Stream, _sse, generate
from .run import REAL, Row

# The targets the shapes are held to (compiled, at 10k and 100k deltas).
LIVE_RATIO = 1.1
BUFFERED_RATIO = 0.9
DICT_RATIO = 2.5
JUDGED_FROM = 10_000

INPUTS = ("live", "sse", "dicts")
_API = {"messages": "anthropic", "chat-completions": "openai-chat", "responses": "openai-responses"}

# Keys whose value the stream itself decides (its identity, its content, its counters):
# a re-written delta keeps the generated value. Every other key of a shape carries the
# recording's value.
_OWN = {
    "openai-responses": frozenset(
        {"type", "sequence_number", "item_id", "output_index", "content_index", "summary_index"}
        | {"delta"}
    ),
    "anthropic": frozenset({"type", "index", "delta", "text", "thinking", "partial_json"}),
    "openai-chat": frozenset(
        {"id", "object", "created", "model", "system_fingerprint", "service_tier", "choices"}
        | {"index", "delta", "content", "tool_calls", "function", "arguments", "name"}
    ),
}
# Nested objects whose own key order is part of a shape: (key, is a one-element list).
_NESTED = {
    "openai-responses": {},
    "anthropic": {"delta": False},
    "openai-chat": {"choices": True, "delta": False, "tool_calls": True, "function": False},
}
_RESPONSES_KIND = {
    "response.output_text.delta": "text",
    "response.reasoning_summary_text.delta": "thinking",
    "response.function_call_arguments.delta": "args",
}
_ANTHROPIC_KIND = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "args"}


@dataclass
class Shape:
    """One delta shape servers send, and where it was found."""

    provider: str
    kind: str  # text / thinking / args
    layout: Any  # the nested ordered keys, JSON-able
    template: dict[str, Any]  # an event of this shape as recorded (without token logprobs)
    sources: list[str] = field(default_factory=list)
    name: str = ""  # provider/kind/k, set once all are found
    note: str = ""

    def describe(self) -> str:
        """The shape in one line: the key order, nested objects in brackets, the fields
        the stream's content does not decide marked with +."""
        return _describe(self.provider, self.layout)


def _layout(provider: str, event: dict[str, Any]) -> Any:
    nested = _NESTED[provider]
    out: list[Any] = []
    for key, value in event.items():
        if key in nested:
            inner = value[0] if nested[key] and value else value
            if isinstance(inner, dict):
                out.append([key, _layout(provider, inner)])
                continue
        out.append(key)
    return out


def _describe(provider: str, layout: Any) -> str:
    own = _OWN[provider]
    parts = []
    for key in layout:
        if isinstance(key, list):
            parts.append(f"{key[0]}[{_describe(provider, key[1])}]")
        else:
            parts.append(key if key in own else f"+{key}")
    return ",".join(parts)


class _Kinds:
    """Which kind of delta each event of one stream is (None: not a content delta). Chat
    needs the stream so far: a tool call's first chunk opens it (its id and name), the
    chunks after it carry argument fragments."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.calls: set[Any] = set()

    def __call__(self, event: dict[str, Any]) -> str | None:
        if self.provider == "openai-responses":
            return _RESPONSES_KIND.get(event.get("type", ""))
        if self.provider == "anthropic":
            if event.get("type") != "content_block_delta":
                return None
            return _ANTHROPIC_KIND.get(event.get("delta", {}).get("type", ""))
        choices = event.get("choices")
        if not choices or not isinstance(choices[0], dict):
            return None
        delta = choices[0].get("delta") or {}
        calls = delta.get("tool_calls")
        if calls:
            index = calls[0].get("index", 0)
            if index in self.calls:
                fragment = (calls[0].get("function") or {}).get("arguments")
                return "args" if fragment and not delta.get("content") else None
            self.calls.add(index)
            return None
        return "text" if delta.get("content") else None


def recordings() -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    """(file, provider, decoded events) of every SSE recording of the three APIs."""
    index = json.loads((REAL / "INDEX.json").read_text())
    for entry in sorted(index, key=lambda e: e["file"]):
        if entry.get("format") == "sse" and entry.get("api") in _API:
            data = (REAL / entry["file"]).read_bytes()
            yield entry["file"], _API[entry["api"]], list(_payloads(data))


def find_shapes() -> list[Shape]:
    """Every distinct delta shape of the recordings, per provider and kind, in the
    order first found; Chat's thinking deltas are left out (the Chat floor and generator
    carry no thinking)."""
    found: dict[tuple[str, str, str], Shape] = {}
    for file, provider, events in recordings():
        kinds = _Kinds(provider)
        for event in events:
            kind = kinds(event)
            if kind is None:
                continue
            layout = _layout(provider, event)
            key = (provider, kind, json.dumps(layout))
            shape = found.get(key)
            if shape is None:
                shape = found[key] = Shape(provider, kind, layout, event)
            elif _logprobs(shape.template) and not _logprobs(event):
                # The layout is the shape; tokens' logprobs are another workload (the full
                # path's by design), so the template is a delta of that layout without them.
                shape.template = event
            if file not in shape.sources:
                shape.sources.append(file)
    shapes = sorted(found.values(), key=lambda s: (s.provider, s.kind))
    counts: dict[tuple[str, str], int] = {}
    for shape in shapes:
        k = counts[(shape.provider, shape.kind)] = counts.get((shape.provider, shape.kind), 0) + 1
        shape.name = f"{shape.provider}/{shape.kind}/{k}"
    return shapes


def _logprobs(event: dict[str, Any]) -> bool:
    """Whether a delta carries per-token logprobs (a non-empty list, at any depth)."""
    stack: list[Any] = [event]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if value.get("logprobs") not in (None, [], {}):
                return True
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


def reshape(provider: str, template: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """`event` (a generated delta) with `template`'s keys in `template`'s order: the
    stream's own keys keep the generated value, the others take the recording's; a
    generated key the template lacks is left out."""
    own, nested = _OWN[provider], _NESTED[provider]
    out: dict[str, Any] = {}
    for key, value in template.items():
        if key in nested and key in event:
            mine = event[key]
            if nested[key] and value and mine and isinstance(value[0], dict):
                out[key] = [reshape(provider, value[0], mine[0]), *mine[1:]]
                continue
            if isinstance(value, dict) and isinstance(mine, dict):
                out[key] = reshape(provider, value, mine)
                continue
        if key in own and key in event:
            out[key] = event[key]
        elif key in own and value not in (None, ""):
            continue  # a field the generated stream does not have, with content: not ours
        else:
            out[key] = value  # the recording's (a null `content` beside a fragment too)
    return out


def shaped(shape: Shape, n: int, seed: int = 0) -> Stream:
    """A generated stream of `n` deltas of the shape's kind, every one re-written onto
    the shape."""
    stream = generate(shape.provider, shape.kind, n, seed)
    kinds = _Kinds(shape.provider)
    ids: dict[Any, str] = {}
    events: list[tuple[str | None, dict[str, Any]]] = []
    for name, payload in stream.events:
        kind = kinds(payload)
        if kind == shape.kind:
            new = reshape(shape.provider, shape.template, payload)
            if shape.provider == "openai-chat":
                _repeat_call_id(new, ids)
            payload = new
        elif shape.provider == "openai-chat":
            for call in (payload.get("choices") or [{}])[0].get("delta", {}).get("tool_calls", []):
                if "id" in call:
                    ids[call["index"]] = call["id"]
        events.append((name, payload))
    pad = random.Random(f"{seed}:pad:{n}") if shape.provider == "anthropic" else None
    sse = _sse(events, done=shape.provider == "openai-chat", pad=pad)
    return Stream(shape.provider, shape.name, n, sse, events, stream.expected)


def _repeat_call_id(chunk: dict[str, Any], ids: dict[Any, str]) -> None:
    # A shape whose fragments repeat the call's id: the call's own, not the recording's
    # (that would name another call); an empty one (Qwen's) stays empty.
    for call in chunk["choices"][0]["delta"].get("tool_calls", []):
        if call.get("id"):
            call["id"] = ids[call["index"]]
        if "type" in call:
            call["type"] = "function"


# --- measuring --------------------------------------------------------------------------


def _impls(inp: str) -> list[run.Impl]:
    if inp == "live":
        return list(run._LIVE_CONNECTION)
    return [impl for impl in run._subject_impls() if impl.input == inp]


def measure(
    shapes: Iterable[Shape],
    sizes: list[int],
    *,
    inputs: tuple[str, ...] = INPUTS,
    repeats: int = 5,
    budget: float = 60.0,
    warmup_s: float = run.WARMUP_S,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> list[Row]:
    """Floor and streamfold side by side on every shape, input and size; each row's
    workload is its shape's name."""
    rows: list[Row] = []
    for shape in shapes:
        streams = {n: shaped(shape, n, seed) for n in sizes}
        for inp in inputs:
            log(f"  shape {shape.name} ({inp})")
            group = run.measure_side_by_side(
                _impls(inp), streams, repeats=repeats, budget=budget, memory=False,
                warmup_s=warmup_s,
            )  # fmt: skip
            run._relate(group)
            rows += group
    return rows


def select(shapes: list[Shape], names: Iterable[str] | None) -> list[Shape]:
    """The shapes named (a name, or a prefix of names: "openai-chat/text"); all if None."""
    if not names:
        return shapes
    wanted = list(names)
    return [s for s in shapes if any(s.name == w or s.name.startswith(w + "/") for w in wanted)]


def as_json(shapes: list[Shape]) -> list[dict[str, Any]]:
    """The shapes as saved beside their rows (the template is the recorded event)."""
    return [
        {
            "name": s.name,
            "provider": s.provider,
            "kind": s.kind,
            "shape": s.describe(),
            "sources": s.sources,
            "template": s.template,
        }
        for s in shapes
    ]


# --- the table --------------------------------------------------------------------------


def _cells(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str, int], float | None]:
    cells: dict[tuple[str, str, str, int], float | None] = {}
    for r in rows:
        if r["kind"] == "streamfold":
            cells[(r["workload"], r.get("build", ""), r["input"], r["n"])] = (
                r["ratio"] if r["status"] == "ok" else None
            )
    return cells


def _status(rows: list[dict[str, Any]]) -> dict[str, str]:
    bad: dict[str, str] = {}
    for r in rows:
        if r["status"] != "ok":
            bad.setdefault(r["workload"], f"{r['impl']} {r['input']}: {r['status']} {r['note']}")
    return bad


def table(
    shapes: list[dict[str, Any]], rows: list[dict[str, Any]], build: str | None = None
) -> str:
    """The shapes table as Markdown: one row per shape, streamfold's multiple of the
    floor at each size, for each input; `build` picks one build's rows (None: all)."""
    if build is not None:
        rows = [r for r in rows if r.get("build", "") == build]
    sizes = sorted({r["n"] for r in rows})
    shown = [n for n in sizes if n >= JUDGED_FROM] or sizes
    cells, bad = _cells(rows), _status(rows)
    builds = sorted({r.get("build", "") for r in rows if r["kind"] == "streamfold"})
    each = " / ".join(run._size(n) for n in shown)
    lines = [
        f"| shape (N = {each}) | found in | one SSE event per chunk | SSE, 64 KiB pieces "
        "| decoded dicts |",
        "|---|---|--:|--:|--:|",
    ]
    measured = {r["workload"] for r in rows}
    for s in shapes:
        if s["name"] not in measured:
            continue
        for b in builds:

            def span(inp: str, b: str = b, s: dict[str, Any] = s) -> str:
                values = [cells.get((s["name"], b, inp, n)) for n in shown]
                return " / ".join("-" if v is None else f"{v:.2f}x" for v in values)

            label = s["name"] + (f" ({b})" if len(builds) > 1 else "")
            servers = sorted({f.split("/")[0] for f in s["sources"]})
            found = f"{', '.join(servers)} ({len(s['sources'])})"
            lines.append(
                f"| {label}: `{s['shape']}` | {found} | {span('live')} | {span('sse')} "
                f"| {span('dicts')} |"
            )
        if s["name"] in bad:
            lines.append(f"| {s['name']}: **{bad[s['name']]}** | | | | |")
    return "\n".join(lines)


def targets(rows: list[dict[str, Any]], build: str | None = None) -> list[str]:
    """Each target of the shapes, met or not, with the worst shape (never raised)."""
    if build is not None:
        rows = [r for r in rows if r.get("build", "") == build]
    sizes = sorted({r["n"] for r in rows})
    judged = [n for n in sizes if n >= JUDGED_FROM] or sizes
    out = []
    for inp, limit, what in (
        ("live", LIVE_RATIO, "one SSE event per chunk"),
        ("sse", BUFFERED_RATIO, "SSE in 64 KiB pieces"),
        ("dicts", DICT_RATIO, "decoded dicts"),
    ):
        mine = [
            r for r in rows
            if r["kind"] == "streamfold" and r["input"] == inp and r["n"] in judged
        ]  # fmt: skip
        ratios = [(r["ratio"], r["workload"], r["n"]) for r in mine if r["ratio"] is not None]
        if not ratios:
            continue
        worst = max(ratios)
        over = sorted({w for v, w, _ in ratios if v > limit})
        shapes_seen = len({w for _, w, _ in ratios})
        verdict = "met" if not over else f"NOT met on {len(over)} of {shapes_seen}"
        median = statistics.median(v for v, _, _ in ratios)
        out.append(
            f"{what} ≤ {limit}x floor: {verdict} (median {median:.2f}x, "
            f"worst {worst[0]:.2f}x: {worst[1]} at {run._size(worst[2])})"
        )
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """List the shapes, or measure them in this process and print the table."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.shapes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--list", action="store_true", help="print the shapes found, no timing")
    parser.add_argument("--shape", action="append", help="a shape's name or prefix (repeatable)")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--input", action="append", choices=INPUTS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--cpu-time", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="no warm-up (the tests)")
    parser.add_argument("--json", help="write the shapes and rows here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    shapes = select(find_shapes(), args.shape)
    if args.list:
        for s in shapes:
            print(f"{s.name:28} {s.describe()}\n{'':28} found in {', '.join(s.sources)}")
        return {"shapes": as_json(shapes)}
    if args.cpu_time:
        run.use_cpu_time()
    log: Callable[[str], None] = (lambda _: None) if args.quiet else (
        lambda s: print(s, file=sys.stderr, flush=True)
    )  # fmt: skip
    rows = measure(
        shapes,
        [int(n) for n in args.sizes.split(",")],
        inputs=tuple(args.input or INPUTS),
        repeats=args.repeats,
        budget=args.budget,
        warmup_s=0.0 if args.smoke else run.WARMUP_S,
        log=log,
    )
    out = {"shapes": as_json(shapes), "rows": [asdict(r) for r in rows]}
    print(table(out["shapes"], out["rows"]))
    print("\n".join(targets(out["rows"])))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
