"""Resume: save a fold mid-stream, restore it in a fresh process, fold the rest."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import ALL_RECORDINGS, REAL, read

from streamfold import (
    Limits,
    MessageCompleted,
    StreamFolder,
    StreamLimitError,
    UsageError,
    fold,
    fold_message,
)
from streamfold.state import STATE_VERSION

ALL = ALL_RECORDINGS


def _cuts(data: bytes) -> list[int]:
    return sorted({1, len(data) // 3, len(data) // 2, (2 * len(data)) // 3, len(data) - 1})


def test_every_recording_resumes_in_a_fresh_process(tmp_path: Path) -> None:
    jobs = []
    for n, rel in enumerate(ALL):
        data = read(rel)
        for cut in _cuts(data):
            folder = StreamFolder()
            before = folder.feed(data[:cut])
            state_file = tmp_path / f"{n}-{cut}.json"
            state_file.write_text(json.dumps(folder.save_state()))
            jobs.append(
                {
                    "rel": rel,
                    "state": str(state_file),
                    "rest": str(REAL / rel),
                    "cut": cut,
                    "before": len(before),
                }
            )
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    script = textwrap.dedent(
        """
        import json, sys
        from pathlib import Path
        from streamfold import StreamFolder, event_to_json
        out = []
        for job in json.loads(Path(sys.argv[1]).read_text()):
            folder = StreamFolder.restore(json.loads(Path(job["state"]).read_text()))
            data = Path(job["rest"]).read_bytes()[job["cut"]:]
            events = folder.feed(data) + folder.close()
            out.append([event_to_json(e) for e in events])
        print(json.dumps(out))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "jobs.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    resumed = json.loads(result.stdout)
    from streamfold import event_to_json

    for job, after in zip(jobs, resumed, strict=True):
        whole = [event_to_json(e) for e in fold([read(job["rel"])])]
        data = read(job["rel"])
        before = [event_to_json(e) for e in StreamFolder().feed(data[: job["cut"]])]
        assert before + after == whole, (job["rel"], job["cut"])


def test_state_survives_shared_open_parts() -> None:
    data = read("openai-chat/tool-calls-parallel-interleaved-args.sse")
    folder = StreamFolder()
    folder.feed(data[: len(data) // 2])
    restored = StreamFolder.restore(json.loads(json.dumps(folder.save_state())))
    acc = restored._acc
    assert all(any(slot is open_slot for slot in acc._slots) for open_slot in acc._open.values())
    rest = restored.feed(data[len(data) // 2 :]) + restored.close()
    final = next(e for e in rest if isinstance(e, MessageCompleted)).message
    assert final == fold_message([data])


def test_restore_refuses_what_is_not_a_state_of_this_version() -> None:
    with pytest.raises(UsageError, match="expected a streamfold state"):
        StreamFolder.restore({"hello": 1})
    with pytest.raises(UsageError, match="expected a streamfold state"):
        StreamFolder.restore([1, 2])
    # A state another version of streamfold saved (its boxes held other fields).
    older = StreamFolder("anthropic").save_state()
    older["streamfold_state"] = STATE_VERSION - 1
    with pytest.raises(UsageError, match=f"of version {STATE_VERSION}, got {STATE_VERSION - 1}"):
        StreamFolder.restore(older)


def _junk(total: int, piece: int = 64 * 1024) -> Iterator[bytes]:
    head = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","model":"x",'
        b'"role":"assistant","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
    )
    yield head
    delta = (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"' + b"x" * 200 + b'"}}\n\n'
    )
    block = delta * (piece // len(delta))
    sent = len(head)
    while sent < total:
        yield block
        sent += len(block)


def test_a_gigabyte_of_junk_stops_at_the_limit_with_little_memory() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(StreamLimitError) as info:
            fold_message(_junk(1024**3), limits=Limits(max_bytes=1024**2))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.limit == "max_bytes"
    assert peak < 50 * 1024**2
    partial = info.value.partial
    assert partial is not None
    assert partial.content[0].content.startswith("x" * 200)


def test_part_limit_through_the_fold_keeps_the_partial() -> None:
    with pytest.raises(StreamLimitError, match="max_part_chars") as info:
        fold_message(_junk(10 * 1024**2), limits=Limits(max_part_chars=100_000))
    assert info.value.partial is not None
    assert len(info.value.partial.content[0].content) <= 100_000
