"""Draw a saved run: `python -m benchmarks.plot results/RUN.json -o docs/benchmarks.svg`.

One panel per provider (the mixed workload by default): nanoseconds per delta against N,
log-log, for the floors, streamfold in each build (SSE in 64 KiB pieces, one SSE event per
chunk, decoded dicts) and the peers. Reads a file written by `benchmarks.compare --json`
(or `benchmarks.run --json`: one build), so the figure is redrawn from the numbers alone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .generate import PROVIDERS

# One line style per input, one colour per implementation: the eye follows a colour
# across inputs and a style across implementations.
STYLE = {"sse": "-", "live": "--", "dicts": ":"}
INPUT_LABEL = {"sse": "SSE, 64 KiB pieces", "live": "one SSE event per chunk", "dicts": "dicts"}
FLOOR_COLOUR = "black"
BUILD_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")
PEER_COLOURS = (
    "tab:red",
    "tab:brown",
    "tab:pink",
    "tab:olive",
    "tab:cyan",
    "tab:gray",
    "gold",
    "teal",
    "navy",
    "crimson",
)


def series(saved: dict[str, Any], workload: str) -> dict[str, dict[tuple[str, str], list[Any]]]:
    """provider -> (implementation, input) -> [(N, ns per delta)] of the rows measured."""
    builds = [b["name"] for b in saved.get("builds", [])] or [""]
    out: dict[str, dict[tuple[str, str], dict[int, float]]] = {}
    for r in saved["rows"]:
        if r["workload"] != workload or r["status"] != "ok" or r["ns_per_delta"] is None:
            continue
        name = r["impl"]
        if r["kind"] == "floor" and r.get("build", "") != builds[0]:
            continue  # the floors are the same code in every build: one build's are drawn
        if r["kind"] == "streamfold" and len(builds) > 1:
            name = f"{name} {r['build']}"
        points = out.setdefault(r["provider"], {}).setdefault((name, r["input"]), {})
        # A floor timed twice at one N (beside streamfold and beside the peers): the first.
        points.setdefault(r["n"], r["ns_per_delta"])
    return {
        provider: {key: sorted(points.items()) for key, points in lines.items()}
        for provider, lines in out.items()
    }


def draw(saved: dict[str, Any], path: Path, workload: str = "mixed") -> Path:
    """Draw the figure of `saved` into `path` (its suffix picks the format)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: a file only
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: a smaller, diffable SVG
    data = series(saved, workload)
    providers = [p for p in PROVIDERS if p in data]
    colours: dict[str, str] = {}
    builds = [b["name"] for b in saved.get("builds", [])] or [""]
    fig, axes = plt.subplots(
        1, len(providers), figsize=(5.2 * len(providers), 5.0), sharey=True, squeeze=False
    )
    handles: dict[str, Any] = {}
    for ax, provider in zip(axes[0], providers, strict=True):
        for (name, inp), points in sorted(data[provider].items(), key=_legend_order):
            colour = colours.get(name) or _colour(name, builds, colours)
            xs, ys = zip(*points, strict=True)
            label = f"{name}, {INPUT_LABEL[inp]}"
            (line,) = ax.plot(
                xs,
                ys,
                STYLE[inp],
                color=colour,
                marker="o",
                markersize=3.5,
                linewidth=2.2 if name.startswith("streamfold") else 1.3,
                label=label,
            )
            handles.setdefault(label, line)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _size(v)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(_two_and_five))
        ax.set_title(provider)
        ax.set_xlabel("N (content deltas per stream)")
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
    axes[0][0].set_ylabel("ns per delta (lower is better)")
    meta = saved.get("meta", {})
    fig.suptitle(
        f"streamfold and its peers, {workload} streams: time per delta against stream length "
        f"(Python {meta.get('python', '?')}, {meta.get('cpus', '?')} shared cores)"
    )
    fig.legend(
        handles.values(), handles.keys(), loc="lower center", ncol=3, fontsize=8, frameon=False
    )
    rows_of_legend = (len(handles) + 2) // 3
    fig.tight_layout(rect=(0, 0.035 * rows_of_legend + 0.02, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)
    return path


def _size(n: float) -> str:
    return f"{n / 1000:g}k" if n >= 1000 else f"{n:g}"


def _two_and_five(v: float, _: object) -> str:
    # The minor ticks labelled at 2 and 5 of each decade: a short axis still reads.
    return f"{v:,.0f}" if f"{v:.0e}"[0] in "25" else ""


def _legend_order(item: tuple[tuple[str, str], Any]) -> tuple[int, str, str]:
    (name, inp), _ = item
    group = 0 if name == "floor" else 1 if name.startswith("streamfold") else 2
    return group, name, inp


def _colour(name: str, builds: list[str], colours: dict[str, str]) -> str:
    if name == "floor":
        colour = FLOOR_COLOUR
    elif name in {f"streamfold {b}" for b in builds} | {"streamfold"}:
        build = name.removeprefix("streamfold").strip()
        shade = builds.index(build) if build in builds else 0
        colour = BUILD_COLOURS[shade % len(BUILD_COLOURS)]
    else:  # a peer, or streamfold with live partial arguments
        others = [
            c for c in colours if c != "floor" and c not in {f"streamfold {b}" for b in builds}
        ]
        colour = PEER_COLOURS[len(others) % len(PEER_COLOURS)]
    colours[name] = colour
    return colour


# The shapes figure: one marker per input, one colour per N, the targets as lines.
SHAPE_MARKERS = {"live": "o", "sse": "s", "dicts": "^"}
SHAPE_SIZE_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")


def shape_points(
    saved: dict[str, Any], build: str | None = None
) -> dict[str, dict[tuple[str, int], float]]:
    """shape name -> (input, N) -> streamfold's multiple of the floor, of one build (the
    compiled one when there is one)."""
    if build is None:
        compiled = [b["name"] for b in saved.get("builds", []) if b.get("compiled")]
        build = compiled[0] if compiled else None
    out: dict[str, dict[tuple[str, int], float]] = {s["name"]: {} for s in saved["shapes"]}
    for r in saved.get("shape_rows", []):
        if r["kind"] != "streamfold" or r["status"] != "ok" or r["ratio"] is None:
            continue
        if build is not None and r.get("build", "") != build:
            continue
        out.setdefault(r["workload"], {})[(r["input"], r["n"])] = r["ratio"]
    return out


def draw_shapes(saved: dict[str, Any], path: Path) -> Path:
    """The shapes table as a figure: a line per recorded delta shape, streamfold's
    multiple of the floor on each input and size, the targets marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .shapes import BUFFERED_RATIO, DICT_RATIO, LIVE_RATIO

    matplotlib.rcParams["svg.fonttype"] = "none"
    points = shape_points(saved)
    names = [name for name, cells in points.items() if cells]
    sizes = sorted({n for cells in points.values() for _, n in cells})
    fig, ax = plt.subplots(figsize=(10, 0.28 * len(names) + 1.8))
    for i, name in enumerate(reversed(names)):
        for (inp, n), ratio in points[name].items():
            colour = SHAPE_SIZE_COLOURS[sizes.index(n) % len(SHAPE_SIZE_COLOURS)]
            ax.plot(ratio, i, SHAPE_MARKERS[inp], color=colour, markersize=5, alpha=0.85)
    for limit, inp in ((LIVE_RATIO, "live"), (BUFFERED_RATIO, "sse"), (DICT_RATIO, "dicts")):
        ax.axvline(limit, color="grey", linestyle=STYLE[inp], linewidth=1)
    ax.set_xscale("log")
    ax.set_yticks(range(len(names)), list(reversed(names)), fontsize=7)
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.set_xlabel("streamfold / the floor of the same input (lower is better; lines: the targets)")
    ax.grid(True, axis="x", which="both", alpha=0.2)
    handles = [
        ax.plot([], [], SHAPE_MARKERS[inp], color="black", label=INPUT_LABEL[inp])[0]
        for inp in SHAPE_MARKERS
    ] + [
        ax.plot([], [], "o", color=SHAPE_SIZE_COLOURS[k], label=f"N = {_size(n)}")[0]
        for k, n in enumerate(sizes)
    ]
    ax.legend(handles=handles, loc="lower right", fontsize=7)
    meta = saved.get("meta", {})
    ax.set_title(
        "every delta shape of the real recordings, re-written onto generated streams "
        f"(Python {meta.get('python', '?')}, {meta.get('cpus', '?')} shared cores)",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> Path:
    """Draw a saved --json run into a file (and its shapes beside it, `-shapes`)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plot", description=__doc__)
    parser.add_argument("saved", type=Path, help="a --json file of benchmarks.compare or .run")
    parser.add_argument("-o", "--output", type=Path, required=True, help=".svg or .png")
    parser.add_argument("--workload", default="mixed")
    args = parser.parse_args(argv)
    saved = json.loads(args.saved.read_text())
    path = args.output
    if saved.get("rows"):
        path = draw(saved, args.output, args.workload)
        print(path)
    if saved.get("shape_rows"):
        beside = args.output.with_name(f"{args.output.stem}-shapes{args.output.suffix}")
        print(draw_shapes(saved, beside if saved.get("rows") else args.output))
    return path


if __name__ == "__main__":
    main()
