"""The relay's saved states: authenticated with its `state_key`, refused when forged."""

from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path

import pytest
from redis_support import REDIS_SERVER, SKIP_REASON, RedisServer
from support import REAL

from streamfold import MessageCompleted, StateError, StreamFolder, event_to_json, fold
from streamfold.record import split_frames

if REDIS_SERVER is None:
    pytest.skip(SKIP_REASON, allow_module_level=True)
if importlib.util.find_spec("redis") is None:
    pytest.skip("redis-py is not installed", allow_module_level=True)

from streamfold.relay import Relay, RelayConfig  # after the skips: needs redis-py

REL = "anthropic/thinking-then-tool-use.sse"


async def test_a_checkpoint_resumes_with_the_key_and_a_forged_one_is_refused(
    redis_server: RedisServer,
) -> None:
    data = (REAL / REL).read_bytes()
    chunks = split_frames(data, "sse")
    config = RelayConfig(checkpoint_every=3)
    stream = f"s-{uuid.uuid4().hex[:10]}"
    async with Relay.from_url(redis_server.url, config, state_key=b"k1") as relay:
        producer = relay.producer(stream)
        await producer.start()
        half = len(chunks) // 2
        for chunk in chunks[:half]:
            await producer.feed(chunk)
        checkpoint = await relay.checkpoint(stream, state=True)
        assert checkpoint is not None and checkpoint.state is not None
        assert "mac" in checkpoint.state
        # The producer's fold, resumed with the key: the rest folds as it would have.
        folder = checkpoint.folder()
        assert folder.snapshot() == checkpoint.message
        fed = folder._bytes  # the bytes the producer had read at that checkpoint
        before = StreamFolder().feed(data[:fed])
        after = folder.feed(data[fed:]) + folder.close()
        whole = [event_to_json(e) for e in fold([data])]
        assert [event_to_json(e) for e in before + after] == whole
        assert isinstance(after[-1], MessageCompleted)
        # A state written to Redis by someone without the key is refused.
        _, checkpoint_key, _ = relay.keys(stream)
        forged = StreamFolder()
        forged.feed(data[:100])
        await relay.redis.hset(checkpoint_key, "state", json.dumps(forged.save_state()))
        tampered = await relay.checkpoint(stream, state=True)
        assert tampered is not None
        with pytest.raises(StateError, match="HMAC"):
            tampered.folder()
        await producer.close()
    # Another key: the producer's own states are refused too.
    async with Relay.from_url(redis_server.url, config, state_key=b"k2") as other:
        saved = await other.checkpoint(stream, state=True)
        assert saved is not None
        with pytest.raises(StateError, match="HMAC"):
            saved.folder()


def test_the_key_is_not_in_a_checkpoints_repr(tmp_path: Path) -> None:
    from streamfold.relay import Checkpoint

    checkpoint = Checkpoint(
        seq=0, id="0-0", message=StreamFolder().snapshot(), open=(), state=None, state_key=b"k"
    )
    assert "k'" not in repr(checkpoint)
