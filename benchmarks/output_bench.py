"""Typed output as it streams: `python -m benchmarks.output_bench`.

A model answers with JSON (structured output): a catalogue of products, 200 bytes an
object, cut into deltas of 1-39 bytes (20 on average, a token or a few). The user wants
their pydantic model as it grows. Side by side, in one process, each fed the same
deltas and each checked before it is timed (its final value must equal
`Catalog.model_validate_json(text)`, and it must have shown partial values on the way):

- `streamfold fold(output=...)`: `streamfold.fold(chunks, output=Catalog)` over the
  OpenAI Chat SSE bytes of the answer, one SSE event per chunk (the bytes parsed, the
  Message folded, every event consumed): an `OutputPartial` each time the value changed;
- `streamfold fold (no output)`: the same fold without `output=`: what the stream costs
  before any typed value;
- `pydantic-ai stream_output (no debounce)`: a real pydantic-ai `Agent(output_type=Catalog)`
  over a `FunctionModel` that streams the answer as the output tool's argument deltas,
  `result.stream_output(debounce_by=None)`: a validated partial value per delta;
- `pydantic-ai stream_output (debounce 0.1 s)`: the same with pydantic-ai's default
  debounce, a value at most every 0.1 s of wall time;
- `instructor Partial`: instructor's `Partial[Catalog].model_from_chunks(deltas)`, what
  its streaming clients run per delta (when instructor is installed);
- `pydantic_core from_json + validate`: what the peers do, bare: per delta,
  `pydantic_core.from_json(prefix, allow_partial=True)`, then
  `TypeAdapter(Catalog).validate_python(..., experimental_allow_partial=True)`.

The peers get the text deltas as strings; streamfold gets the SSE bytes and parses them
too. Each time is the median of up to 5 runs of CPU time (`time.process_time`), fewer
when a run takes more than a fifth of the budget (`--budget`, 60 s by default); a size
whose run is projected past the budget from the smaller sizes (quadratically for the
peers that re-parse the prefix, linearly for streamfold) is `skipped`, with the
projection.

Sizes are the answer's bytes: 1 KB, 10 KB, 100 KB and 1 MB by default (`--sizes`); the
deltas are bytes / 20 (5,000 at 100 KB). `--json FILE` writes every row, `--plot FILE`
draws ns per delta against the size, log-log.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

SIZES = (1_000, 10_000, 100_000, 1_000_000)
BYTES_PER_DELTA = 20
OBJECT_BYTES = 200
BUDGET_S = 60.0
SAMPLES = 5
HEADLINE = 100_000
TARGET = 50.0  # streamfold at least this many times faster than every peer at HEADLINE


class Product(BaseModel):
    """One object of the answer."""

    id: int
    sku: str
    name: str
    price: float
    in_stock: bool
    tags: list[str]
    description: str


class Catalog(BaseModel):
    """The answer: a list of products under one key, as object roots are what every peer takes."""

    products: list[Product]


_WORDS = (
    *("steel", "oak", "linen", "cobalt", "amber", "walnut", "copper", "slate", "ivory"),
    *("cedar", "matte", "brushed", "compact", "foldable", "cordless", "waterproof"),
    *("ergonomic", "modular", "recycled", "insulated", "adjustable"),
)
_NOUNS = ("kettle", "lamp", "chair", "backpack", "speaker", "grinder", "blender", "jacket")


def answer(size: int, seed: int = 0) -> str:
    """A Catalog's JSON of about `size` bytes (whole objects, at least one)."""
    rng = random.Random(seed)
    products: list[str] = []
    length = len('{"products":[]}')
    while length < size or not products:
        n = len(products)
        name = f"{rng.choice(_WORDS).title()} {rng.choice(_NOUNS)}"
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 14)))
        product = {
            "id": 1000 + n,
            "sku": f"SKU-{rng.randint(10000, 99999)}",
            "name": name,
            "price": round(rng.uniform(3, 400), 2),
            "in_stock": rng.random() < 0.8,
            "tags": rng.sample(_WORDS, rng.randint(1, 3)),
            "description": f"A {words} {name.lower()} — «{rng.choice(_WORDS)}».",
        }
        products.append(json.dumps(product, ensure_ascii=False, separators=(",", ":")))
        length += len(products[-1]) + (1 if n else 0)
    return '{"products":[' + ",".join(products) + "]}"


def cut(text: str, seed: int = 0) -> list[str]:
    """`text` in deltas of 1-39 characters (BYTES_PER_DELTA on average)."""
    rng = random.Random(seed)
    out: list[str] = []
    at = 0
    while at < len(text):
        step = rng.randint(1, 2 * BYTES_PER_DELTA - 1)
        out.append(text[at : at + step])
        at += step
    return out


def chat_sse(deltas: list[str]) -> list[bytes]:
    """The deltas as an OpenAI Chat Completions stream, one SSE event per chunk."""
    head = (
        '{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,'
        '"model":"gpt-4o","choices":'
    )
    chunks = [
        (
            "data: "
            + head
            + '[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
        ).encode()
    ]
    for d in deltas:
        body = '[{"index":0,"delta":{"content":' + json.dumps(d) + '},"finish_reason":null}]}'
        chunks.append(("data: " + head + body + "\n\n").encode())
    stop = '[{"index":0,"delta":{},"finish_reason":"stop"}]}'
    chunks.append(("data: " + head + stop + "\n\n").encode())
    chunks.append(b"data: [DONE]\n\n")
    return chunks


# --- the implementations: each takes the workload, returns (final value, partials shown) --


@dataclass
class Workload:
    """One size: the text, its deltas and the SSE chunks."""

    size: int
    text: str
    deltas: list[str]
    chunks: list[bytes]
    expected: Catalog


def make_workload(size: int, seed: int = 0) -> Workload:
    """The workload of one size."""
    text = answer(size, seed)
    deltas = cut(text, seed)
    return Workload(size, text, deltas, chat_sse(deltas), Catalog.model_validate_json(text))


def streamfold_output(w: Workload) -> tuple[Any, int]:
    """`fold(..., output=Catalog)`: the partial values it shows, and its final one."""
    import streamfold

    partials = 0
    final: Any = None
    for event in streamfold.fold(iter(w.chunks), output=Catalog):
        kind = type(event).__name__
        if kind == "OutputPartial":
            partials += 1
        elif kind == "OutputCompleted":
            final = event.value  # type: ignore[attr-defined]
        elif kind == "OutputFailed":
            raise event.error  # type: ignore[attr-defined]
    return final, partials


def streamfold_plain(w: Workload) -> tuple[Any, int]:
    """The same fold without output: the text validated once at the end."""
    import streamfold

    message = None
    deltas = 0
    for event in streamfold.fold(iter(w.chunks)):
        kind = type(event).__name__
        if kind == "PartDelta":
            deltas += 1
        elif kind == "MessageCompleted":
            message = event.message  # type: ignore[attr-defined]
    assert message is not None
    text = "".join(p.content or "" for p in message.content if p.type == "text")
    return Catalog.model_validate_json(text), deltas


def _pydantic_ai(debounce: float | None) -> Callable[[Workload], tuple[Any, int]]:
    def run(w: Workload) -> tuple[Any, int]:
        from pydantic_ai import Agent
        from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

        async def stream(messages: Any, info: AgentInfo) -> Any:
            name = info.output_tools[0].name
            for n, d in enumerate(w.deltas):
                if n == 0:
                    yield {0: DeltaToolCall(name=name, json_args=d, tool_call_id="call_1")}
                else:
                    yield {0: DeltaToolCall(json_args=d)}

        agent = Agent(FunctionModel(stream_function=stream), output_type=Catalog)

        async def main() -> tuple[Any, int]:
            partials = 0
            last: Any = None
            async with agent.run_stream("the catalogue") as result:
                async for value in result.stream_output(debounce_by=debounce):
                    partials += 1
                    last = value
            return last, partials

        return asyncio.run(main())

    return run


def instructor_partial(w: Workload) -> tuple[Any, int]:
    """instructor's `Partial[Catalog]` over the deltas, as its streaming clients use it."""
    from instructor.dsl.partial import Partial

    partials = 0
    last: Any = None
    for value in Partial[Catalog].model_from_chunks(iter(w.deltas)):  # type: ignore[misc]
        partials += 1
        last = value
    return Catalog.model_validate(last.model_dump()), partials


def reparse_per_delta(w: Workload) -> tuple[Any, int]:
    """Per delta: the whole prefix through `from_json(allow_partial=True)` and validation."""
    from pydantic_core import from_json

    adapter = TypeAdapter(Catalog)
    prefix = ""
    partials = 0
    for d in w.deltas:
        prefix += d
        try:
            adapter.validate_python(
                from_json(prefix, allow_partial=True), experimental_allow_partial=True
            )
        except ValueError:
            continue
        partials += 1
    return adapter.validate_json(prefix), partials


@dataclass
class Impl:
    """One row: its name, its function, how its cost grows, what it needs installed."""

    name: str
    run: Callable[[Workload], tuple[Any, int]]
    growth: float  # the exponent used to project a larger size's time
    needs: tuple[str, ...] = ()
    min_partials: int = 0  # partial values it must have shown (the debounced row may show none)


IMPLS = (
    Impl("streamfold fold(output=...)", streamfold_output, 1.0, min_partials=2),
    Impl("streamfold fold (no output)", streamfold_plain, 1.0),
    Impl("pydantic-ai stream_output (no debounce)", _pydantic_ai(None), 2.0, ("pydantic_ai",), 2),
    Impl("pydantic-ai stream_output (debounce 0.1 s)", _pydantic_ai(0.1), 1.0, ("pydantic_ai",)),
    Impl("instructor Partial", instructor_partial, 2.0, ("instructor",), 2),
    # pydantic's partial validation drops an unfinished list element only when it is not a
    # model (TypedDict, dict, list), so most prefixes of a Catalog fail it: the work per
    # delta is the same whether it succeeds or not, and a failure shows nothing.
    Impl("pydantic_core from_json + validate", reparse_per_delta, 2.0),
)


def supports_output() -> bool:
    """Whether this streamfold's `fold` takes `output=` (the structured-output API came
    with `fold_output`; the compiled `fold` has no signature to inspect)."""
    import streamfold

    return hasattr(streamfold, "fold_output")


# --- timing ---------------------------------------------------------------------------


@dataclass
class Cell:
    """One implementation at one size."""

    impl: str
    size: int
    deltas: int
    status: str = "ok"  # ok, wrong, missing, skipped
    seconds: float | None = None
    samples: list[float] = field(default_factory=list)
    partials: int = 0
    note: str = ""

    @property
    def ns_per_delta(self) -> float | None:
        """Median seconds / deltas, in nanoseconds."""
        return None if self.seconds is None else self.seconds / self.deltas * 1e9


def _check(impl: Impl, w: Workload) -> tuple[bool, int, str]:
    try:
        value, partials = impl.run(w)
    except Exception as exc:  # a peer's failure is reported, not raised
        return False, 0, f"{type(exc).__name__}: {exc}"[:200]
    if value != w.expected:
        return False, partials, "final value differs from Catalog.model_validate_json(text)"
    if partials < impl.min_partials:
        return False, partials, f"only {partials} partial value(s) shown"
    return True, partials, ""


def measure(impl: Impl, w: Workload, budget: float) -> Cell:
    """Check, then time, one implementation on one workload."""
    cell = Cell(impl.name, w.size, len(w.deltas))
    ok, cell.partials, note = _check(impl, w)
    if not ok:
        cell.status, cell.note = "wrong", note
        return cell
    samples: list[float] = []
    spent = 0.0
    gc.collect()
    while len(samples) < SAMPLES:
        start = time.process_time()
        impl.run(w)
        took = time.process_time() - start
        samples.append(took)
        spent += took
        if took > budget / 5 or spent > budget:
            break
    cell.samples = samples
    cell.seconds = statistics.median(samples)
    if len(samples) < SAMPLES:
        cell.note = f"{len(samples)} sample(s): a run takes {samples[-1]:.1f} s"
    return cell


def run(sizes: tuple[int, ...], budget: float, seed: int = 0) -> dict[str, Any]:
    """Every implementation at every size: the rows, and the headline ratios."""
    cells: list[Cell] = []
    have_output = supports_output()
    workloads = {size: make_workload(size, seed) for size in sizes}
    for impl in IMPLS:
        last: Cell | None = None
        for size in sizes:
            w = workloads[size]
            missing = [m for m in impl.needs if importlib.util.find_spec(m) is None]
            if impl.name.startswith("streamfold fold(output") and not have_output:
                missing = ["streamfold.fold(output=)"]
            if missing:
                cells.append(
                    Cell(impl.name, size, len(w.deltas), "missing", note=", ".join(missing))
                )
                continue
            if last is not None and last.seconds is not None:
                projected = last.seconds * (size / last.size) ** impl.growth
                if projected > budget:
                    note = f"projected {projected:.0f} s a run (over the {budget:.0f} s budget)"
                    cells.append(Cell(impl.name, size, len(w.deltas), "skipped", note=note))
                    continue
            cell = measure(impl, w, budget)
            cells.append(cell)
            if cell.status == "ok":
                last = cell
            print(_row(cell), flush=True)
    return {
        "rows": [_cell_json(c) for c in cells],
        "ratios": ratios(cells),
        "bytes_per_delta": BYTES_PER_DELTA,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "versions": _versions(),
        },
    }


def ratios(cells: list[Cell]) -> dict[str, dict[str, float]]:
    """Each peer's time / streamfold's (output) at each size both measured."""
    ours = {c.size: c.seconds for c in cells if c.impl == IMPLS[0].name and c.seconds}
    out: dict[str, dict[str, float]] = {}
    for c in cells:
        if c.impl == IMPLS[0].name or c.seconds is None or c.size not in ours:
            continue
        if c.impl.startswith("streamfold"):
            continue
        out.setdefault(c.impl, {})[str(c.size)] = c.seconds / ours[c.size]
    return out


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("streamfold", "pydantic", "pydantic-core", "pydantic-ai-slim", "instructor"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "missing"
    import streamfold

    out["streamfold compiled"] = str(streamfold.is_compiled())
    return out


def _cell_json(c: Cell) -> dict[str, Any]:
    return {
        "impl": c.impl,
        "size": c.size,
        "deltas": c.deltas,
        "status": c.status,
        "seconds": c.seconds,
        "ns_per_delta": c.ns_per_delta,
        "samples": c.samples,
        "partials": c.partials,
        "note": c.note,
    }


def _row(c: Cell) -> str:
    what = f"{c.ns_per_delta:12,.0f} ns/Δ {c.seconds:9.4f} s" if c.seconds is not None else c.status
    return f"{c.impl:44s} {c.size:>9,} B {c.deltas:>7,} Δ  {what}  {c.note}"


def table(result: dict[str, Any], markdown: bool = False) -> str:
    """The rows as a table: time per size, and the ratio to streamfold at the headline size."""
    sizes = sorted({r["size"] for r in result["rows"]})
    impls: list[str] = []
    for r in result["rows"]:
        if r["impl"] not in impls:
            impls.append(r["impl"])
    by = {(r["impl"], r["size"]): r for r in result["rows"]}
    head = [
        "implementation",
        *[f"{s // 1000:,} KB" for s in sizes],
        f"x streamfold at {HEADLINE // 1000} KB",
    ]
    lines = []
    for impl in impls:
        cells = []
        for s in sizes:
            r = by.get((impl, s))
            if r is None:
                cells.append("")
            elif r["seconds"] is None:
                cells.append(r["status"])
            else:
                cells.append(_secs(r["seconds"]))
        ratio = result["ratios"].get(impl, {}).get(str(HEADLINE))
        cells.append("" if ratio is None else f"{ratio:,.0f}x")
        lines.append([impl, *cells])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|---|" + "--:|" * (len(head) - 1)]
        out += ["| " + " | ".join(line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max(len(x[i]) for x in [head, *lines]) for i in range(len(head))]
    return "\n".join(
        "  ".join(x[i].ljust(widths[i]) for i in range(len(head))) for x in [head, *lines]
    )


def _secs(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s < 1 else f"{s:,.1f} s"


def plot(result: dict[str, Any], path: Path) -> None:
    """ns per delta against the answer's size, log-log, one line per implementation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    impls: list[str] = []
    for r in result["rows"]:
        if r["impl"] not in impls:
            impls.append(r["impl"])
    for impl in impls:
        pts = [
            (r["size"], r["ns_per_delta"])
            for r in result["rows"]
            if r["impl"] == impl and r["ns_per_delta"]
        ]
        if not pts:
            continue
        xs, ys = zip(*pts, strict=True)
        ours = impl.startswith("streamfold")
        ax.plot(
            xs,
            ys,
            marker="o",
            linewidth=2.2 if ours else 1.2,
            linestyle="-" if ours else "--",
            label=impl,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"answer size, bytes ({BYTES_PER_DELTA} bytes a delta)")
    ax.set_ylabel("CPU ns per delta (flat = linear in the answer)")
    ax.set_title("A typed partial value at every delta")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run, print, and save what was asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    parser.add_argument("--budget", type=float, default=BUDGET_S)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--show", type=Path, help="print a saved run")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    if args.show:
        result = json.loads(args.show.read_text())
    else:
        sizes = tuple(int(s) for s in args.sizes.split(","))
        result = run(sizes, args.budget, args.seed)
    print(table(result, args.markdown))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.plot:
        plot(result, args.plot)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
