"""Coverage-guided fuzzing of `streamfold.fold` with atheris (optional), or a seeded random run.

    .venv/bin/pip install atheris            # not a test dependency
    .venv/bin/python fuzz/fuzz_fold.py --make-corpus /tmp/sf-corpus
    .venv/bin/python fuzz/fuzz_fold.py /tmp/sf-corpus -max_total_time=600

    .venv/bin/python fuzz/fuzz_fold.py --random 100000 [--seed 0]   # no atheris needed
    .venv/bin/python fuzz/fuzz_fold.py --random 100000 --objects    # dicts, SDK objects
    .venv/bin/python fuzz/fuzz_fold.py --random 10000 --states      # mutated saved states
    .venv-compiled/bin/python fuzz/fuzz_fold.py --random 100000 --installed  # the compiled wheel

The property is the one tests/reliability/test_fuzz.py checks (its helpers are reused): only
StreamfoldError escapes the fold, events follow each part's lifecycle, every completed part
is in the message or the error's `.partial`, and the Message serialises within bounds.
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
# --installed: fuzz the streamfold this interpreter has installed (the compiled wheel), not
# the source tree beside this script.
if "--installed" not in sys.argv:
    sys.path.insert(0, str(ROOT / "src"))

try:
    import atheris
except ImportError:  # the random mode and --make-corpus work without it
    atheris = None

if atheris is not None and "--random" not in sys.argv and "--make-corpus" not in sys.argv:
    with atheris.instrument_imports(include=["streamfold"]):
        # The provider modules load lazily: import them here so they are instrumented.
        import streamfold
        import streamfold.eventstream
        import streamfold.providers.anthropic
        import streamfold.providers.bedrock
        import streamfold.providers.gemini
        import streamfold.providers.ollama
        import streamfold.providers.openai_chat
        import streamfold.providers.openai_responses  # noqa: F401

import reliability.test_fuzz as harness  # noqa: E402

from streamfold.providers import PROVIDERS  # noqa: E402

CHOICES: list[str | None] = [None, *PROVIDERS]
CHUNK_SIZES = [0, 1, 2, 3, 7, 64, 1024, 0]  # 0: the whole input in one chunk


def one_input(data: bytes) -> None:
    """The first byte chooses how to fold (provider, strict, chunking, dicts); the rest is
    the stream."""
    if not data:
        return
    head, body = data[0], data[1:]
    mode = harness.Mode(CHOICES[head % len(CHOICES)], strict=bool(head & 0x80))
    size = CHUNK_SIZES[(head >> 3) & 7]
    chunks = [body] if size == 0 else [body[i : i + size] for i in range(0, len(body), size)]
    harness.check_bounded(harness.run_fold(chunks or [b""], mode), len(body))
    if head & 0x40:
        # The same lines as decoded objects, as an SDK would hand them over.
        dicts: list[dict[str, Any]] = []
        for line in body.splitlines():
            line = line.removeprefix(b"data:").strip()
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                dicts.append(value)
        if dicts:
            harness.check_bounded(harness.run_fold(dicts, mode), len(body))


def make_corpus(directory: Path) -> None:
    """Seed inputs: every recording, once per provider choice (the first byte)."""
    directory.mkdir(parents=True, exist_ok=True)
    for rel in harness.ALL:
        data = harness.read(rel)
        for head in (0, 0x40 | 1, 0x80 | 0x08 | 2):
            name = rel.replace("/", "__") + f".{head:02x}"
            (directory / name).write_bytes(bytes([head]) + data)
    print(f"wrote {len(harness.ALL) * 3} seeds to {directory}")


def random_run(
    count: int, seed: int, objects: bool = False, keep_going: bool = False, states: bool = False
) -> None:
    """Mutate the recordings with a seeded Random (the test's mutators) `count` times.

    `objects`: the decoded-dict and SDK-object mutations of tests/reliability/test_object_fuzz.py.
    `states`: the saved-state mutations of tests/reliability/test_state_fuzz.py.
    `keep_going`: count failures by kind (their first seed printed) instead of stopping.
    """
    fuzz_objects = None
    if objects:
        from reliability.test_object_fuzz import fuzz_objects
    fuzz_state = None
    if states:
        from reliability.test_state_fuzz import RECORDINGS, fuzz_state
    started = time.monotonic()
    failures: dict[str, int] = {}
    for k in range(count):
        chooser = harness.RandomChooser(random.Random(seed + k))
        rel = chooser.choice(RECORDINGS if fuzz_state is not None else harness.ALL)
        try:
            if fuzz_state is not None:
                fuzz_state(rel, chooser)
            elif fuzz_objects is not None:
                fuzz_objects(rel, chooser)
            elif chooser.boolean():
                harness.fuzz_events(rel, chooser)
            else:
                harness.fuzz_bytes(rel, chooser)
        except Exception as exc:
            print(f"FAILED: seed {seed + k} ({rel}); replay with --random 1 --seed {seed + k}")
            if not keep_going:
                raise
            kind = f"{type(exc).__name__}: {str(exc)[:120]}"
            if kind not in failures:
                traceback.print_exc()
            failures[kind] = failures.get(kind, 0) + 1
        if (k + 1) % 10000 == 0:
            print(f"{k + 1} runs, {time.monotonic() - started:.0f} s, {harness.COUNTS}", flush=True)
    counts = harness.COUNTS
    if fuzz_state is not None:
        from reliability.test_state_fuzz import COUNTS as counts
    print(f"{count} runs in {time.monotonic() - started:.0f} s: {counts}")
    print(f"failures: {sum(failures.values())} in {len(failures)} kinds: {failures}")


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--make-corpus"]:
        make_corpus(Path(args[1]))
    elif args[:1] == ["--random"]:
        seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 0
        import streamfold

        build = "compiled" if streamfold.is_compiled() else "interpreted"
        print(f"streamfold {build}: {streamfold.__file__}")
        random_run(
            int(args[1]), seed, "--objects" in args, "--keep-going" in args, "--states" in args
        )
    elif atheris is None:
        sys.exit("atheris is not installed: `pip install atheris`, or use --random N")
    else:
        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()


if __name__ == "__main__":
    main()
