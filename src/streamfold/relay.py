"""Resumable streams over Redis: any worker can serve a client that (re)connects mid-answer.

A *producer* folds a provider stream and publishes every event to a Redis Stream; any
number of *consumers*, in any process, `subscribe(stream_id, after=None)` and get the
message so far, then every later event, live, ending at MessageCompleted. Needs redis-py
(`pip install 'streamfold[relay]'`, asyncio only: `redis.asyncio`).

    relay = Relay.from_url("redis://127.0.0.1:6379")
    await relay.publish("chat-42", response.aiter_bytes())        # worker A, in a task
    async for item in relay.subscribe("chat-42"):                 # worker B, any time
        ...  # item.event: a Snapshot first, then Events; item.id: where to resume

Keys, for a stream id S under `RelayConfig.prefix` P:

    P S:events      a Redis Stream, one entry per event. The entry id is `0-<seq>` (seq =
                    1, 2, 3... in the fold's order) and the fields are `e` (the event as
                    `streamfold.event_to_json` gives it, compact JSON), `t` (the
                    producer's wall clock, seconds, when it published) and, on the
                    MessageCompleted entry alone, `timing` (its `timing`, JSON: what the
                    producer's fold measured, which `event_to_json` leaves out). XADD ...
                    MAXLEN ~.
    P S:checkpoint  a hash, written whole by one HSET: `seq` and `id` of the last entry it
                    covers, `data` (JSON: {"v": 1, "message": <the Message so far>,
                    "open": [slot indexes still being written]}), `state` (JSON: the
                    StreamFolder.save_state(), with its HMAC when the relay has a
                    `state_key`, unless save_state=False; consumers never
                    fetch it), and, once the message is over, `end` (the seq of the
                    MessageCompleted entry).
    P S:lease       the producer's heartbeat: a token with a TTL (`lease_ttl`), refreshed
                    every `lease_ttl / 3` seconds (by a task, and by writes).

Producer. It takes the lease (SET NX: one producer per stream id), writes checkpoint 0
(the empty message), then, for each chunk the fold turns into events, one pipeline (one
round trip, commands applied in order): XADD of each event (explicit ids, so a write
retried after a lost reply is recognised and never duplicated), then, every
`checkpoint_every` events, the checkpoint covering exactly the entries written so far.
Order is what makes it safe without MULTI: a checkpoint is only written after every entry
it covers, so whichever checkpoint a consumer reads, the entries after it are there (or
were trimmed, which the consumer sees). The batch that holds MessageCompleted then sets
`end`, deletes the lease and EXPIREs both keys after `expire_after` seconds. While it
runs, the heartbeat also renews that expiry, so a stream whose producer died still expires.
A fold that raises ends the stream with a MessageCompleted of status error (the partial
message, metadata["error"]); a producer that is cancelled ends it with status cancelled,
and so does `Relay.stop()` (and `aclose()`) for every message its producers have not
finished (a worker that shuts down gracefully tells its readers at once). `stop()` then
ends every other subscription of the relay with RelayStopped (a reader resumes on another
worker with its last id): a server that waits for its open responses before it stops is
not held up by a reader. A producer whose decoder cannot save its state (a provider
registered without `Decoder.to_state`) writes checkpoints without one.

Consumer. Without `after`: read the checkpoint, XRANGE from exactly the entry after the one
it covers (`(0-<seq>`), check that the first entry's seq is the checkpoint's + 1 (a trim
raced the read: read the newer checkpoint again), yield a `Snapshot` then those entries,
then tail with XREAD BLOCK from the last id. Nothing is lost or duplicated across the
hand-over: the checkpoint was written after the entries it covers, and each entry's seq
must be the last one's + 1. With `after=<the id of the last item seen>`
(an entry id "0-17", or the seq 17): no snapshot; exactly the entries after it. If they
are no longer all there (trimmed: the consumer was away for more than `maxlen` events; or
lost in a Redis restart without persistence), the consumer yields a fresh Snapshot
instead, and the caller replaces what it had. A snapshot can also come mid-stream for the
same reason (a consumer that fell behind by more than `maxlen` events).

    Snapshot(message, open)   `message` is the Message so far (status incomplete while it
                              streams); `open` lists the slot indexes of parts still being
                              written. `events()` gives it as PartStarted / PartCompleted
                              events, for a UI encoder that starts from nothing.
    Relayed(id, seq, event, published_at, synthetic)
                              what `subscribe` yields: a Snapshot (id and seq of the last
                              entry it covers) or an Event with its entry id and seq.

Liveness. A consumer that sees no new entry within `poll` seconds checks the lease. If the
lease is gone and the message has no `end`, and Redis (INFO server: uptime) has been up
since the lease was last seen, or for longer than `lease_ttl`, the lease expired unrenewed
and the producer is lost: the consumer yields a synthetic MessageCompleted
(`synthetic=True`) holding the last checkpoint plus every entry after it, with status
incomplete and metadata["error"] = {"type": "relay_producer_lost", ...}. So a crash is
noticed within one lease_ttl plus one poll. A Redis that restarted more recently than that
gives the producer time to renew its lease; where INFO is refused, a missing lease gets
`lease_ttl` more seconds of grace. A consumer also ends that way after `idle_timeout`
seconds with no entry at all.

Redis restarts. Every command is retried on connection errors with backoff (50 ms
doubling to 1 s) until `reconnect_timeout` seconds after the first failed attempt of any
command of the relay (one deadline for all: a reader's command queued behind a
producer's retried write does not start a timeout of its own), then RelayUnavailable is
raised (a subscription raises it; the demo routes end the reader with an error event).
An attempt waits at most until that deadline (and at most `reconnect_timeout`): a Redis
that hangs, accepting connections and never answering, is given up on as one that
refuses them is. Consumers
resume from their last id. A producer re-sends its pending batch (already applied ones
are recognised by their explicit ids). The client reconnects silently, so a producer
also looks for its checkpoint: each batch without one asks whether the last one is still
there (EXISTS, in the same pipeline), and the heartbeat's PEXPIRE of it says the same
while the producer is quiet; a lost checkpoint is written again at once (the batch that
ends the message writes one just before its MessageCompleted). So a Redis that came back
empty (no persistence) has a snapshot for late joiners within a heartbeat. What survives
the restart itself is Redis's business: use AOF (`appendonly yes`) for streams that must
outlive one.

Per worker (one Relay, one event loop): the live tails of all its subscriptions share one
XREAD BLOCK over every followed stream (one blocked connection, one reply for all readers
of a stream, entries handed out to per-subscription inboxes bounded at `maxlen` entries:
a reader that falls further behind re-reads from its last id); every other command its
producers and consumers issue in one turn of the event loop goes out as one pipeline
(idempotent, so retried whole); parsed entries and checkpoints are cached by key and raw
bytes, so ten readers of one stream parse each entry once, and get the same immutable
Relayed items. The tail also holds each followed stream's latest entries (two
checkpoints' worth) and a checkpoint they follow: a reader that joins a stream this
worker already follows starts from them (its snapshot is at most `checkpoint_every`
events old, as one read from Redis would be) and a resume by id inside them reads
nothing; readers that start together on a stream nobody here follows yet (ten tabs, or
a wait for the stream to appear) read its snapshot once. `Relay.from_url` uses a
BlockingConnectionPool (64 connections) so a burst waits for a connection instead of
failing. asyncio only (redis.asyncio); hiredis, if installed, parses replies faster.

Bounds: every loop is bounded in count and in time (`idle_timeout`, `start_timeout`,
`reconnect_timeout`, a fixed number of snapshot retries); the stream is capped at about
`maxlen` entries (`checkpoint_every` must be at most half of it, so the newest checkpoint's
entries are always kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import re
import secrets
import time
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

import jiter
from pydantic_core import to_json

from .accumulator import Accumulator
from .deltas import ClosePart, Delta, GrowPart, OpenPart, UpdateMessage
from .errors import EventJSONError, StreamfoldError, UsageError, preview
from .events import (
    Event,
    MessageCompleted,
    PartCompleted,
    PartDelta,
    PartMarked,
    PartStarted,
    UsageUpdated,
)
from .events_json import event_from_json, event_to_json
from .fold import StreamFolder, _source
from .limits import Limits
from .message import Message, ToolResult, Usage

T = TypeVar("T")

CHECKPOINT_VERSION: Final = 1
_STREAM_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,200}$")
_ENTRY_ID = re.compile(r"^0-(\d+)$")
_SNAPSHOT_RETRIES: Final = 8
_MAX_ATTEMPTS: Final = 10_000  # with the time limit, bounds every retry loop
_UNLIMITED = Limits(
    max_bytes=2**62, max_parts=2**62, max_part_chars=2**62, max_tool_argument_chars=2**62
)
_LAST_WORD_TIMEOUT: Final = 5.0  # seconds a stopping producer tries to publish its end
_INSTALL = "streamfold.relay needs redis-py: pip install 'streamfold[relay]'"


# --- errors --------------------------------------------------------------------------


class RelayError(StreamfoldError):
    """A relayed stream could not be produced or read."""


class RelayNotFound(RelayError):
    """No stream with that id appeared within `start_timeout` (never started, or expired)."""


class RelayUnavailable(RelayError):
    """Redis stayed unreachable for longer than `reconnect_timeout`."""


class RelayBusy(RelayError):
    """Another producer holds the stream id (or a stream with that id already exists)."""


class RelayStopped(RelayError):
    """The relay was stopped (its worker is shutting down): read the stream elsewhere."""


# --- redis, lazily --------------------------------------------------------------------


def _redis() -> Any:
    try:
        import redis.asyncio as aioredis  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise UsageError(_INSTALL) from exc
    return aioredis


def _retryable() -> tuple[type[BaseException], ...]:
    import redis.exceptions as rexc  # type: ignore[import-not-found, unused-ignore]

    return (rexc.ConnectionError, rexc.TimeoutError, ConnectionError, OSError)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)


# --- configuration --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RelayConfig:
    """Keys, bounds and timings of a relay (seconds for times)."""

    prefix: str = "streamfold:relay:"
    maxlen: int = 10_000
    """About how many entries a stream keeps (XADD MAXLEN ~)."""
    checkpoint_every: int = 64
    """Events between checkpoints; at most maxlen / 2."""
    save_state: bool = True
    """Checkpoints carry the folder's whole state (`Checkpoint.folder()` restores it)."""
    lease_ttl: float = 10.0
    """How long a producer's lease outlives its last heartbeat."""
    expire_after: float = 3600.0
    """A finished (or abandoned) stream's keys expire this long after its last write."""
    poll: float = 1.0
    """How long a consumer blocks in XREAD before it checks the producer's lease."""
    idle_timeout: float = 600.0
    """A consumer that gets no entry for this long ends the message as incomplete."""
    start_timeout: float = 10.0
    """How long `subscribe` waits for a stream that does not exist yet."""
    reconnect_timeout: float = 30.0
    """How long a command is retried while Redis is unreachable."""
    batch: int = 512
    """Entries per XRANGE / XREAD call."""

    def __post_init__(self) -> None:
        problems = []
        if not self.prefix:
            problems.append("prefix: expected a non-empty string")
        if self.maxlen < 2:
            problems.append(f"maxlen: expected at least 2, got {self.maxlen}")
        if not 1 <= self.checkpoint_every <= self.maxlen // 2:
            problems.append(
                f"checkpoint_every: expected 1 to maxlen/2 ({self.maxlen // 2}), "
                f"got {self.checkpoint_every}"
            )
        for name in (
            "lease_ttl",
            "expire_after",
            "poll",
            "idle_timeout",
            "start_timeout",
            "reconnect_timeout",
        ):
            value = getattr(self, name)
            if not value > 0:
                problems.append(f"{name}: expected a number of seconds > 0, got {value!r}")
        if self.batch < 1:
            problems.append(f"batch: expected at least 1, got {self.batch}")
        if problems:
            raise UsageError("RelayConfig: " + "; ".join(problems))

    @property
    def heartbeat(self) -> float:
        """Seconds between a producer's lease renewals."""
        return self.lease_ttl / 3


# --- what a consumer gets -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """The message so far, as a consumer that joins late first sees it."""

    type: Literal["snapshot"] = field(default="snapshot", init=False)
    message: Message
    open: tuple[int, ...] = ()
    """Slot indexes of the parts still being written (their later deltas follow)."""

    def events(self) -> list[Event]:
        """The snapshot as events: PartStarted for every part, a PartDelta with its content
        so far, PartMarked for a marked text part, PartCompleted for those already
        finished. Feed them to a UI encoder that starts from nothing, then the live events."""
        return _Mirror(self).events


@dataclass(frozen=True, slots=True)
class Relayed:
    """One item of a subscription: a Snapshot or an Event, with where it sits in the stream."""

    id: str
    """The stream entry id ("0-<seq>"): pass it as `after=` to resume right after it."""
    seq: int
    """The event's number (a Snapshot: the number of events it covers)."""
    event: Event | Snapshot
    published_at: float | None = None
    """The producer's wall clock (time.time()) when it published the event."""
    synthetic: bool = False
    """True for the MessageCompleted a consumer makes when the producer was lost."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A stored checkpoint: the message after the first `seq` events, and the fold's state."""

    seq: int
    id: str
    message: Message
    open: tuple[int, ...]
    state: dict[str, Any] | None
    end: int | None = None
    state_key: bytes | str | None = field(default=None, repr=False, compare=False)
    """The relay's `state_key`: `folder()` refuses a state without its HMAC."""

    def snapshot(self) -> Snapshot:
        return Snapshot(message=self.message, open=self.open)

    def folder(self) -> StreamFolder:
        """The producer's StreamFolder as it was at this checkpoint (needs `save_state`).

        The state came from Redis: it is validated whole, and with the relay's
        `state_key`, authenticated (a StateError if it is not as the producer saved it).
        """
        if self.state is None:
            raise UsageError(
                "Checkpoint.folder: expected a checkpoint with the folder's state, got none "
                "(saved with save_state=False, or by a decoder that cannot save its state)"
            )
        return StreamFolder.restore(self.state, key=self.state_key)


def _json(value: Any) -> Any:
    return jiter.from_json(value if isinstance(value, bytes) else _text(value).encode())


def _dumps(value: Any) -> bytes:
    # pydantic-core's writer: the same JSON as json.dumps(ensure_ascii=False) (NaN and
    # Infinity too, which a fold may carry in a provider's raw fields), about five times
    # faster, and bytes that go to Redis as they are: a producer dumps every event.
    return to_json(value)


# --- a message rebuilt from a snapshot and the events after it ---------------------------


class _Mirror:
    """An Accumulator seeded from a Snapshot, fed the events after it."""

    def __init__(self, snapshot: Snapshot) -> None:
        message = snapshot.message
        self.acc = Accumulator(role=message.role, limits=_UNLIMITED)
        open_slots = set(snapshot.open)
        deltas: list[Delta] = []
        for index, part in enumerate(message.stream_order()):
            deltas.append(OpenPart(index, part))
            if index not in open_slots:
                deltas.append(ClosePart(index, explicit=True, final=part))
        self.events = self.acc.apply_all(deltas)
        self.acc.apply(
            UpdateMessage(
                status=message.status,
                stop_reason=message.stop_reason,
                raw_stop_reason=message.raw_stop_reason,
                usage=_running(message.usage),
                metadata=message.metadata,
            )
        )

    def apply(self, event: Event | Snapshot) -> None:
        if isinstance(event, PartStarted):
            self.acc.apply(OpenPart(event.index, event.part))
        elif isinstance(event, PartDelta):
            self.acc.apply(GrowPart(event.index, event.content, event.options, event.citations))
        elif isinstance(event, PartCompleted):
            self.acc.apply(ClosePart(event.index, explicit=event.explicit, final=event.part))
        elif isinstance(event, PartMarked):
            self.acc.mark(event.index, event.utterance, explicit=event.explicit)
        elif isinstance(event, UsageUpdated):
            self.acc.apply(UpdateMessage(usage=_running(event.usage)))

    def message(self) -> Message:
        return self.acc.snapshot()


def _running(usage: Usage | None) -> Usage | None:
    # A snapshot's or UsageUpdated's usage is the running total: it replaces, never adds.
    return None if usage is None else usage.model_copy(update={"cumulative": True})


# --- the relay ------------------------------------------------------------------------


def _entry_id(seq: int) -> str:
    return f"0-{seq}"


class _Cache:
    """Recently parsed entries and checkpoints, by key: the readers of one stream in one
    process (ten tabs, a reconnect) parse each entry and checkpoint once, not each."""

    __slots__ = ("items", "size")

    def __init__(self, size: int) -> None:
        self.items: dict[Any, Any] = {}
        self.size = size

    def get(self, key: Any, raw: Any) -> Any:
        """The value parsed from `raw` under `key`; None unless `raw` is the same bytes (a
        stream deleted and made again under the same id must not read the old one)."""
        known = self.items.get(key)
        return known[1] if known is not None and known[0] == raw else None

    def put(self, key: Any, raw: Any, value: Any) -> None:
        if len(self.items) >= self.size:
            # Drop the oldest eighth (dicts keep insertion order): amortised O(1).
            for old in list(itertools.islice(self.items, self.size // 8 or 1)):
                del self.items[old]
        self.items[key] = (raw, value)


def _parse_entries(raw: Any, key: str, cache: _Cache) -> list[Relayed]:
    # Items are immutable: every reader of an entry in this process gets the same one.
    out: list[Relayed] = []
    for entry_id, fields in raw or ():
        eid = _text(entry_id)
        known = cache.get((key, eid), fields)
        if known is not None:
            out.append(known)
            continue
        match = _ENTRY_ID.match(eid)
        if match is None:
            raise RelayError(f"expected a streamfold relay entry id 0-<seq>, got {eid!r}")
        values = {_text(k): v for k, v in fields.items()}
        body = values.get("e")
        if body is None:
            raise RelayError(f"entry {eid}: expected an event field 'e', got {sorted(values)}")
        stamp = values.get("t")
        published = float(_text(stamp)) if stamp is not None else None
        try:
            event = event_from_json(_json(body))
        except EventJSONError as exc:
            raise RelayError(f"entry {eid}: {exc}") from None
        timing = values.get("timing")
        if timing is not None:
            event = _timed(eid, event, timing)
        entry = Relayed(eid, int(match.group(1)), event, published)
        cache.put((key, eid), fields, entry)
        out.append(entry)
    return out


def _timed(eid: str, event: Event, raw: Any) -> MessageCompleted:
    """The entry's MessageCompleted with the timing the producer's fold gave it: readers
    get the final event the producer's fold made, not one that lost its clock."""
    try:
        timing = _json(raw)
    except ValueError:
        timing = None
    if not isinstance(event, MessageCompleted) or not isinstance(timing, dict):
        raise RelayError(
            f"entry {eid}: expected a timing (a JSON object) on a message_completed entry "
            f"alone, got {preview(_text(raw))} on a {event.type} entry"
        )
    return MessageCompleted(message=event.message, timing=timing)


def _xread_entries(raw: Any, cache: _Cache) -> dict[str, list[Relayed]]:
    if not raw:
        return {}
    streams = raw.items() if isinstance(raw, dict) else raw
    out: dict[str, list[Relayed]] = {}
    for key, entries in streams:
        # RESP3 nests the entries one level deeper: [[(id, fields), ...]].
        while entries and len(entries) == 1 and not isinstance(entries[0][0], bytes | str):
            entries = entries[0]
        name = _text(key)
        out[name] = _parse_entries(entries, name, cache)
    return out


def _after_seq(after: str | int | None) -> int | None:
    if after is None:
        return None
    if isinstance(after, int) and not isinstance(after, bool) and after >= 0:
        return after
    if isinstance(after, str):
        if after.isdigit():
            return int(after)
        match = _ENTRY_ID.match(after)
        if match is not None:
            return int(match.group(1))
    raise UsageError(
        f"subscribe: expected after= an entry id '0-<seq>' or a seq >= 0, got {after!r}"
    )


class Relay:
    """Publish folds to Redis and subscribe to them, from any process (asyncio only)."""

    def __init__(
        self,
        redis: Any,
        config: RelayConfig | None = None,
        *,
        state_key: bytes | str | None = None,
    ) -> None:
        _redis()  # the extra must be installed even when a client is passed in
        self.redis = redis
        self.config = config or RelayConfig()
        # Saved states in checkpoints carry an HMAC under this key, checked on restore:
        # whoever can write to Redis cannot make a worker resume a state of their own.
        self.state_key = state_key
        self._errors = _retryable()
        self.retries = 0
        """How many commands failed on a connection error and were retried."""
        self._cache = _Cache(65_536)
        self._liveness: dict[str, tuple[float, tuple[bool, int | None]]] = {}
        self._uptime_seen: tuple[float, float | None] = (-1e9, None)
        self._producers: weakref.WeakSet[RelayProducer] = weakref.WeakSet()
        self._down_since: float | None = None
        """When the first attempt of the current run of failed commands began (None: the
        last command got through): every command and reader gives up at this plus
        `reconnect_timeout`, however many were queued or retried meanwhile."""
        self._stopping: asyncio.Future[None] | None = None
        self._tails: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Tail] = (
            weakref.WeakKeyDictionary()
        )
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        config: RelayConfig | None = None,
        *,
        state_key: bytes | str | None = None,
        **options: Any,
    ) -> Relay:
        """A relay on a new redis-py asyncio client for `url` (redis://127.0.0.1:6379/0);
        `state_key` authenticates the saved states of its checkpoints (see Relay)."""
        aioredis = _redis()
        from redis.asyncio.retry import Retry  # type: ignore[import-not-found, unused-ignore]
        from redis.backoff import NoBackoff  # type: ignore[import-not-found, unused-ignore]

        config = config or RelayConfig()
        # No socket timeout: every command the relay sends has a deadline of its own
        # (`reconnect_timeout`), and redis-py would put a timer on every reply it reads.
        options.setdefault("socket_timeout", None)
        options.setdefault("socket_connect_timeout", 5)
        options.setdefault("retry", Retry(NoBackoff(), 0))  # the relay retries, bounded
        # Many concurrent producers wait for a connection instead of failing at the cap.
        options.setdefault("max_connections", 64)
        options.setdefault("timeout", config.reconnect_timeout)
        pool = aioredis.BlockingConnectionPool.from_url(url, **options)
        return cls(aioredis.Redis.from_pool(pool), config, state_key=state_key)

    @property
    def stopped(self) -> bool:
        """True once `stop()` (or `aclose()`) was called."""
        return self._stopping is not None

    async def stop(self) -> None:
        """Stop serving, at once: end the messages this relay's producers have not
        finished with status cancelled, and once this worker's readers of them have that
        end, end every other subscription here with RelayStopped (a reader resumes on
        another worker with its last id). New producers and subscriptions are refused
        with RelayStopped. Call it as soon as the worker begins to shut down (a server
        waits for open responses, and a subscription's response lasts as long as its
        message); `relay_lifespan` does it on SIGTERM. The client stays open."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop())
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        unfinished = [p for p in self._producers if not p.finished]
        await asyncio.gather(*(p._last_word(p.cancel()) for p in unfinished))
        tails = list(self._tails.values())
        ends = {p.events_key: p.seq for p in unfinished if p.finished}
        # Readers here of those messages get their end through the tail (one XREAD
        # away); waiting for it, briefly, is what lets them hear "cancelled" rather
        # than "stopped". Everything else is let go now.
        deadline = time.monotonic() + max(1.0, self.config.poll)
        while time.monotonic() < deadline and any(t.behind(ends) for t in tails):
            await asyncio.sleep(0.01)
        stopped = RelayStopped("the relay was stopped: its worker is shutting down")
        for tail in tails:
            tail.stop(stopped)

    def _check_running(self, what: str) -> None:
        if self._stopping is not None:
            raise RelayStopped(f"{what}: the relay was stopped (its worker is shutting down)")

    async def aclose(self) -> None:
        """`stop()`, then close the client's connections."""
        await self.stop()
        close = getattr(self.redis, "aclose", None) or self.redis.close
        await close()

    async def __aenter__(self) -> Relay:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- keys and retries ---------------------------------------------------------------

    def keys(self, stream_id: str) -> tuple[str, str, str]:
        """The stream, checkpoint and lease keys of a stream id."""
        if not isinstance(stream_id, str) or not _STREAM_ID.match(stream_id):
            raise UsageError(
                "relay: expected a stream id of 1-200 letters, digits or ._:@/+=-, "
                f"got {stream_id!r}"
            )
        base = self.config.prefix + stream_id
        return base + ":events", base + ":checkpoint", base + ":lease"

    def _attempt_limit(self, began: float) -> float:
        """How long an attempt begun at `began` may wait for Redis: `reconnect_timeout`
        while commands get through (a Redis that hangs, accepting and never answering, is
        unreachable as surely as one that refuses); while they fail, until the shared
        deadline. Past it, one short try still: it may be back."""
        if self._down_since is None:
            return self.config.reconnect_timeout
        left = self._down_since + self.config.reconnect_timeout - began
        return max(left, self.config.poll / 2)

    def _failed(self, began: float) -> float:
        """An attempt begun at `began` failed on the connection: the deadline it counts to."""
        self.retries += 1
        if self._down_since is None or began < self._down_since:
            self._down_since = began
        return self._down_since + self.config.reconnect_timeout

    async def _retry(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        """Run `op`, retrying connection errors with backoff until Redis has been
        unreachable for `reconnect_timeout` (counted from the first failed attempt of any
        command, so commands queued behind others do not wait a timeout of their own)."""
        delay = 0.05
        for _ in range(_MAX_ATTEMPTS):
            began = time.monotonic()
            try:
                async with asyncio.timeout(self._attempt_limit(began)):
                    result = await op()
            except self._errors as exc:  # TimeoutError (the attempt's limit) is an OSError
                deadline = self._failed(began)
                now = time.monotonic()
                if now >= deadline:
                    raise RelayUnavailable(
                        f"{what}: Redis unreachable for {self.config.reconnect_timeout:g} s "
                        f"({type(exc).__name__}: {exc or 'no answer'})"
                    ) from exc
                await asyncio.sleep(min(delay, deadline - now))
                delay = min(delay * 2, 1.0)
                continue
            self._down_since = None
            return result
        raise RelayUnavailable(f"{what}: gave up after {_MAX_ATTEMPTS} attempts")

    async def _take_lease(
        self, lease_key: str, token: str, keys: tuple[str, ...], what: str, exists_hint: str
    ) -> None:
        """Take `lease_key` for `token`, or raise RelayBusy: another worker holds it, or
        `keys` (what `what` writes) exist already. Through the batcher: a thousand
        producers starting at once share a round trip (and a connection) instead of each
        waiting for one of the pool's. Whether the keys exist is asked in the same round
        trip, after the SET: its answer counts only if the lease is ours."""
        ttl_ms = int(self.config.lease_ttl * 1000)
        taken, exists = await self._commands(
            ("set", (lease_key, token), {"nx": True, "px": ttl_ms}), ("exists", keys, {})
        )
        if not taken:
            (owner,) = await self._commands(("get", (lease_key,), {}))
            if owner is None or _text(owner) != token:  # not a retried SET of ours
                raise RelayBusy(f"{what} is being produced by another worker")
        if exists:
            await self._commands(("delete", (lease_key,), {}))
            raise RelayBusy(f"{what} already exists{exists_hint}")

    # --- reading ------------------------------------------------------------------------

    async def _commands(self, *commands: Command) -> list[Any]:
        results, _retried = await self._batcher().run(list(commands))
        for result in results:
            if isinstance(result, Exception):
                raise RelayError(f"Redis refused a command: {result}")
        return results

    def _batcher(self) -> _Batcher:
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = _Batcher(self)
        return batcher

    def _tail(self) -> _Tail:
        loop = asyncio.get_running_loop()
        tail = self._tails.get(loop)
        if tail is None:
            tail = self._tails[loop] = _Tail(self)
        return tail

    async def checkpoint(self, stream_id: str, *, state: bool = False) -> Checkpoint | None:
        """The stream's latest checkpoint (with the folder state if `state`), or None if
        there is no such stream."""
        _, ckpt_key, _ = self.keys(stream_id)
        fields = ["seq", "id", "data", "end", *(["state"] if state else [])]
        (raw,) = await self._commands(("hmget", (ckpt_key, fields), {}))
        values = dict(zip(fields, raw, strict=True))
        if values["data"] is None:
            return None
        cache_key = ("checkpoint", ckpt_key, state)
        known: Checkpoint | None = self._cache.get(cache_key, raw)
        if known is not None:
            return known
        try:
            data = _json(values["data"])
            end = values["end"]
            saved = values.get("state")
            checkpoint = Checkpoint(
                seq=int(_text(values["seq"])),
                id=_text(values["id"]),
                message=Message.model_validate(data["message"]),
                open=tuple(int(i) for i in data.get("open", ())),
                state=None if saved is None else _json(saved),
                end=None if end is None else int(_text(end)),
                state_key=self.state_key,
            )
            self._cache.put(cache_key, raw, checkpoint)
            return checkpoint
        except (KeyError, TypeError, ValueError) as exc:
            raise RelayError(
                f"stream {stream_id!r}: malformed checkpoint ({type(exc).__name__}: {exc})"
            ) from None

    async def _uptime(self, not_before: float) -> float | None:
        """Seconds Redis has been up (INFO counts whole seconds, rounding down), as asked
        at `not_before` or later (shared by this relay's readers); None if Redis refuses
        INFO. An answer from before a restart must not vouch for a lease missed after it."""
        now = time.monotonic()
        seen_at, uptime = self._uptime_seen
        if seen_at >= not_before:
            return uptime
        (info,), _retried = await self._batcher().run([("info", ("server",), {})])
        value = info.get("uptime_in_seconds") if isinstance(info, dict) else None
        uptime = float(value) if isinstance(value, int | float) else None
        self._uptime_seen = (now, uptime)
        return uptime

    async def _range(self, key: str, after: int, count: int) -> list[Relayed]:
        (raw,) = await self._commands(
            ("xrange", (key,), {"min": f"({_entry_id(after)}", "max": "+", "count": count})
        )
        return _parse_entries(raw, key, self._cache)

    async def delete(self, stream_id: str) -> None:
        """Remove a stream's keys (its events, checkpoint and lease)."""
        keys = self.keys(stream_id)
        await self._retry("delete", lambda: self.redis.delete(*keys))

    def subscribe(self, stream_id: str, after: str | int | None = None) -> AsyncIterator[Relayed]:
        """The stream's items: without `after`, a Snapshot then every later event; with
        `after` (the id of the last item seen), exactly the events after it. Ends at
        MessageCompleted (a synthetic one, status incomplete, if the producer was lost)."""
        keys = self.keys(stream_id)
        return _Subscription(self, stream_id, keys, _after_seq(after)).run()

    # --- producing ----------------------------------------------------------------------

    def stop_key(self, stream_id: str) -> str:
        """The key a stop request for `stream_id` sets (see `request_stop`)."""
        return self.keys(stream_id)[0].removesuffix(":events") + ":stop"

    async def request_stop(self, stream_id: str) -> bool:
        """Ask the producer of `stream_id`, on whichever worker it runs, to stop: it
        closes its source (the request to the provider), ends the message with status
        cancelled, keeping what arrived, and every reader gets that end. Returns whether
        a producer held the stream when asked (False: it was finished, or not started:
        a producer that starts later under the same id is not stopped by this).

        The producer sees the request in its next write (the provider is streaming) or
        within one heartbeat (`lease_ttl / 3`: the provider is silent). A reader that
        disconnects stops nothing: only this does."""
        stop = self.stop_key(stream_id)
        _events_key, _checkpoint_key, lease = self.keys(stream_id)
        turn_list, turn_lease = _turn_keys(self, stream_id)
        expire_ms = int(self.config.expire_after * 1000)
        producing, turning, last_step, _set = await self._commands(
            ("exists", (lease,), {}),
            ("exists", (turn_lease,), {}),
            ("lindex", (turn_list, -1), {}),
            ("set", (stop, "1"), {"px": expire_ms}),
        )
        if turning and last_step is not None:
            # A turn: its response being written stops at its next write too, not only
            # at the turn's next heartbeat.
            step = _json(last_step)
            response = step.get("response") if isinstance(step, dict) else None
            if isinstance(response, str) and _STREAM_ID.match(response):
                await self._commands(("set", (self.stop_key(response), "1"), {"px": expire_ms}))
        return bool(producing or turning)

    def turn(self, turn_id: str) -> RelayTurn:
        """A producer of a whole agent-loop turn under `turn_id` (see RelayTurn)."""
        self.keys(turn_id)  # the same rules as a stream id
        return RelayTurn(self, turn_id)

    def subscribe_turn(
        self, turn_id: str, after: str | int | None = None
    ) -> AsyncIterator[TurnRelayed]:
        """The turn's items, from any worker: each response (a Snapshot, then its events),
        each tool result, then TurnCompleted. A reader that joins late gets the loop so
        far, then the rest; `after=<the id of the last item seen>` resumes right after it."""
        self.keys(turn_id)
        return _turn_items(self, turn_id, after)

    def producer(
        self,
        stream_id: str,
        *,
        folder: StreamFolder | None = None,
        provider: str | None = None,
    ) -> RelayProducer:
        """A producer for `stream_id` that folds with `folder` (default: a new StreamFolder)."""
        if folder is not None and provider is not None:
            raise UsageError("relay.producer: expected a folder or a provider, got both")
        return RelayProducer(self, stream_id, folder or StreamFolder(provider))

    async def publish(
        self,
        stream_id: str,
        chunks: Any,
        *,
        provider: str | None = None,
        folder: StreamFolder | None = None,
    ) -> Message:
        """Fold `chunks` (a sync or async iterable of bytes, str, dicts or SDK objects) and
        publish every event under `stream_id`; return the final Message."""
        source, provider = _source(chunks, provider, "Relay.publish", asynchronous=True)
        async with self.producer(
            stream_id, folder=folder, provider=None if folder else provider
        ) as producer:
            return await producer.pump(source)


class RelayProducer:
    """Publishes one fold: `start()`, `feed(chunk)` per chunk, `close()`; or `pump(chunks)`.

    As an async context manager it starts, and on leaving finishes the message: closed
    normally, cancelled if the block was cancelled, status error if the block raised.
    """

    def __init__(self, relay: Relay, stream_id: str, folder: StreamFolder) -> None:
        self.relay = relay
        self.stream_id = stream_id
        self.folder = folder
        self.events_key, self.checkpoint_key, self.lease_key = relay.keys(stream_id)
        self.seq = 0
        self.message: Message | None = None
        self._token = secrets.token_hex(8)
        self._open: dict[int, None] = {}
        self._xadd_head = (
            b"XADD",
            self.events_key.encode(),
            b"MAXLEN",
            b"~",
            b"%d" % relay.config.maxlen,
        )
        self._since_checkpoint = 0
        self._force_checkpoint = False
        self._started = False
        self._done = False
        self._saves_state = True
        self._heartbeat: asyncio.Task[None] | None = None
        self._lease_at = time.monotonic()
        self.stop_key = relay.stop_key(stream_id)
        self.stop_requested = False
        """True once a `Relay.request_stop` for this stream reached the producer: its
        message ends cancelled (`pump` closes its source; a loop of its own over `feed`
        should stop reading when `finished` turns True)."""
        self._pumping: asyncio.Task[Any] | None = None  # the task in `pump`, to wake it
        self._awaiting_source = False  # pump is waiting for the source's next chunk

    @property
    def finished(self) -> bool:
        """True once MessageCompleted was published."""
        return self._done

    async def start(self) -> None:
        """Take the stream id's lease and write checkpoint 0; start the heartbeat."""
        if self._started:
            return
        relay = self.relay
        relay._check_running(f"produce stream {self.stream_id!r}")
        await relay._take_lease(
            self.lease_key,
            self._token,
            (self.checkpoint_key, self.events_key),
            f"stream {self.stream_id!r}",
            " (finished or abandoned); use a new id, or relay.delete() it first",
        )
        # A stop request left from an earlier stream of this id is not for this one.
        await relay._commands(("delete", (self.stop_key,), {}))
        relay._producers.add(self)  # from here on, a stop() ends it too
        try:
            await self._write([], checkpoint=True)
        except BaseException:
            relay._producers.discard(self)
            # Nothing was published: the id is free again (not held for a lease), and
            # its readers keep waiting for a producer that may still come.
            with contextlib.suppress(Exception):
                await relay._commands(("delete", (self.lease_key,), {}))
            self.seq = 0
            self._since_checkpoint = 0
            raise
        self._started = True
        self._heartbeat = asyncio.create_task(
            self._beat(), name=f"relay-heartbeat-{self.stream_id}"
        )

    async def feed(self, chunk: Any) -> list[Event]:
        """Fold one chunk and publish the events it gives."""
        await self.start()
        if self._done:
            return []
        try:
            events = self.folder.feed(chunk)
        except StreamfoldError as exc:
            await self.fail(exc)
            raise
        await self.send(events)
        if self.stop_requested and not self._done:
            events = events + await self.cancel()
        return events

    async def close(self) -> list[Event]:
        """The input ended: finish the fold and publish the last events."""
        await self.start()
        if self._done:
            return []
        try:
            events = self.folder.close()
        except StreamfoldError as exc:
            await self.fail(exc)
            raise
        await self.send(events)
        return events

    async def cancel(self) -> list[Event]:
        """Stop early: the message ends with status cancelled, keeping what was received."""
        await self.start()
        if self._done:
            return []
        events = self.folder.cancel()
        await self.send(events)
        return events

    async def fail(self, error: BaseException) -> None:
        """The fold raised: end the stream with the partial message, status error."""
        if self._done or not self._started:
            return
        partial = getattr(error, "partial", None)
        message = partial if isinstance(partial, Message) else self.folder.snapshot()
        metadata = dict(message.metadata)
        metadata["error"] = {"type": type(error).__name__, "message": str(error)}
        message = message.model_copy(
            update={"status": "error", "stop_reason": "error", "metadata": metadata}
        )
        # What the fold measured until it failed: readers learn how far it got, and when.
        await self.send([MessageCompleted(message=message, timing=self.folder.timing.as_dict())])

    async def pump(self, chunks: AsyncIterable[Any] | Iterable[Any]) -> Message:
        """Feed every chunk, then close; return the final Message.

        A `Relay.request_stop` for this stream, from any worker, ends it early: the
        source is closed (an async generator's `aclose`, an iterator's `close`: for an
        HTTP response's byte iterator, the request to the provider) and the message ends
        with status cancelled, keeping what arrived."""
        await self.start()
        # As afold does: the wait for the first chunk counts (a time to first token that
        # starts at the first chunk's arrival would hide the provider's own delay).
        self.folder.timing.start()
        self._pumping = asyncio.current_task()
        try:
            if isinstance(chunks, AsyncIterable):
                iterator = aiter(chunks)
                while not self._done and not self.stop_requested:
                    self._awaiting_source = True
                    try:
                        chunk = await anext(iterator)
                    except StopAsyncIteration:
                        break
                    finally:
                        self._awaiting_source = False
                    await self.feed(chunk)
            else:
                for chunk in chunks:
                    await self.feed(chunk)
                    if self._done:
                        break
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            # Woken by a stop request while the source was silent: not a cancellation
            # of the caller's, so it is taken back and the message ends cancelled.
            if not self.stop_requested or task is None or task.uncancel() > 0:
                raise
        finally:
            self._pumping = None
        if self.stop_requested:
            await _close_source(chunks)
            await self.cancel()
        await self.close()
        assert self.message is not None
        return self.message

    def _stop_seen(self) -> None:
        """A stop request reached this producer (a write or the heartbeat saw its key)."""
        if self.stop_requested or self._done:
            return
        self.stop_requested = True
        task = self._pumping
        if task is not None and self._awaiting_source and task is not asyncio.current_task():
            # Waiting on a silent source: wake it (pump takes the cancellation back). A
            # pump in the middle of a write sees the request when the write returns.
            task.cancel()

    async def send(self, events: list[Event]) -> None:
        """Publish events folded elsewhere from this producer's folder (feed does it)."""
        if not events or self._done:
            return
        for event in events:
            if isinstance(event, PartStarted):
                self._open[event.index] = None
            elif isinstance(event, PartCompleted):
                self._open.pop(event.index, None)
            elif isinstance(event, MessageCompleted):
                self._open.clear()
        await self._write(events)

    async def _write(self, events: list[Event], *, checkpoint: bool = False) -> None:
        relay, cfg = self.relay, self.relay.config
        first = self.seq + 1
        self.seq += len(events)
        final = next((e for e in events if isinstance(e, MessageCompleted)), None)
        self._since_checkpoint += len(events)
        checkpoint = checkpoint or (
            final is None
            and (self._force_checkpoint or self._since_checkpoint >= cfg.checkpoint_every)
        )
        stamp = b"%.6f" % time.time()  # when the events were published, in each entry
        bodies = [_dumps(event_to_json(e)) for e in events]
        ckpt: dict[str, Any] | None = None
        if checkpoint:
            data: dict[str, Any] = {
                "v": CHECKPOINT_VERSION,
                "message": self.folder.snapshot().model_dump(mode="json"),
                "open": list(self._open),
            }
            ckpt = {"seq": self.seq, "id": _entry_id(self.seq), "data": _dumps(data)}
            state = self._state() if cfg.save_state else None
            if state is not None:
                ckpt["state"] = state
        if final is not None:
            self._done = True
            self.message = final.message
            await self._stop_heartbeat()
        expire_ms = int(cfg.expire_after * 1000)

        lease_due = time.monotonic() - self._lease_at >= cfg.heartbeat

        # A Redis that restarted empty between two writes goes unnoticed by the client (it
        # reconnects silently): a batch without a checkpoint first asks whether the last
        # one is still there, so a lost one is written again at once.
        probe = ckpt is None
        # Whether a stop was requested is asked in the same round trip, at no cost. With
        # the probe it is one command: EXISTS counts a key named twice twice, so the
        # answer is the checkpoint's 1 plus the stop key's 2 (a command less per batch).
        both = probe and final is None
        commands: list[Command] = []
        if both:
            commands.append(("exists", (self.checkpoint_key, self.stop_key, self.stop_key), {}))
        elif probe:
            commands.append(("exists", (self.checkpoint_key,), {}))
        # The XADD as Redis takes it, its arguments bytes already: redis-py's xadd()
        # checks and rebuilds its arguments, and its packer encodes each str and int, on
        # every call: a cost paid per event by a producer that has them right.
        head = self._xadd_head
        xadds: list[Command] = [
            (
                "execute_command",
                (*head, b"0-%d" % (first + n), b"e", body, b"t", stamp),
                {},
            )
            for n, body in enumerate(bodies)
        ]
        if final is not None and final.timing is not None:
            # The one event whose JSON leaves out what the fold measured: its entry
            # carries it beside, so every reader's end is the producer's own.
            at = events.index(final)
            name, args, options = xadds[at]
            xadds[at] = (name, (*args, b"timing", _dumps(final.timing)), options)
        commands += xadds
        if ckpt is not None:
            if cfg.save_state and "state" not in ckpt:  # an older one's must not stay
                commands.append(("hdel", (self.checkpoint_key, "state"), {}))
            commands.append(("hset", (self.checkpoint_key,), {"mapping": ckpt}))
        if final is not None:
            commands.append(("hset", (self.checkpoint_key, "end", self.seq), {}))
            commands.append(("delete", (self.lease_key,), {}))
            commands.append(("pexpire", (self.events_key, expire_ms), {}))
            commands.append(("pexpire", (self.checkpoint_key, expire_ms), {}))
        else:
            if lease_due or not events:
                ttl_ms = int(cfg.lease_ttl * 1000)
                commands.append(("set", (self.lease_key, self._token), {"px": ttl_ms}))
            if ckpt is not None:
                commands.append(("pexpire", (self.checkpoint_key, expire_ms), {}))
            if not both:  # a stop request from any worker
                commands.append(("exists", (self.stop_key,), {}))
        results, retried = await relay._batcher().run(commands)
        if final is not None:
            stop_asked = False
        elif both:
            stop_asked = isinstance(results[0], int) and results[0] >= 2
        else:
            stop_asked = results.pop() == 1
        if stop_asked:
            self._stop_seen()
        if retried:
            self._force_checkpoint = True  # Redis may have come back empty
        checkpoint_lost = probe and isinstance(results[0], int) and results[0] % 2 == 0
        if checkpoint_lost:
            self._force_checkpoint = True
        for result in results[probe:]:
            if isinstance(result, Exception):
                if "equal or smaller" in str(result):
                    # An earlier try of this batch was applied; its reply was lost.
                    self._force_checkpoint = True
                    continue
                raise RelayError(f"stream {self.stream_id!r}: Redis refused a write: {result}")
        if lease_due or not events:
            self._lease_at = time.monotonic()
        if ckpt is not None:
            self._since_checkpoint = 0
            self._force_checkpoint = False
        elif self._force_checkpoint and events and not self._done:
            await self._write([], checkpoint=True)
        elif checkpoint_lost and final is not None:
            await self._checkpoint_before(final, first + events.index(final))

    def _state(self) -> bytes | None:
        """The folder's saved state for a checkpoint; None when its decoder cannot save
        one (a provider registered without `Decoder.to_state`): its checkpoints then
        carry the message alone, as with save_state=False, and the stream is relayed."""
        if not self._saves_state:
            return None
        try:
            return _dumps(self.folder.save_state(key=self.relay.state_key))
        except NotImplementedError:  # Decoder.to_state's own default: "cannot"
            self._saves_state = False
            return None

    async def _checkpoint_before(self, final: MessageCompleted, end: int) -> None:
        """Redis lost the checkpoint just before the message's last batch: write one
        covering everything up to its MessageCompleted (which is there), so a late joiner
        still gets the whole message, as a snapshot and then that event."""
        message = final.message.model_copy(update={"status": "incomplete"})
        data = {"v": CHECKPOINT_VERSION, "message": message.model_dump(mode="json"), "open": []}
        ckpt = {"seq": end - 1, "id": _entry_id(end - 1), "data": _dumps(data)}
        await self.relay._commands(("hset", (self.checkpoint_key,), {"mapping": ckpt}))

    async def _beat(self) -> None:
        relay, cfg = self.relay, self.relay.config
        ttl_ms = int(cfg.lease_ttl * 1000)
        expire_ms = int(cfg.expire_after * 1000)
        while not self._done:
            await asyncio.sleep(cfg.heartbeat)
            with contextlib.suppress(RelayError, *relay._errors):  # the writes will tell
                # Straight to Redis, one try, not through the batcher's retries: after an
                # outage the lease must be renewed within a beat of Redis being back, not
                # after a backoff that may outlast the lease.
                pipe = relay.redis.pipeline(transaction=False)
                pipe.set(self.lease_key, self._token, px=ttl_ms)
                pipe.pexpire(self.events_key, expire_ms)
                pipe.pexpire(self.checkpoint_key, expire_ms)
                pipe.exists(self.stop_key)
                async with asyncio.timeout(cfg.reconnect_timeout):  # a Redis that hangs
                    _lease, _events, checkpoint_kept, stop_asked = await pipe.execute()
                self._lease_at = time.monotonic()
                if stop_asked:
                    self._stop_seen()  # the source is silent: the write would not see it
                if not checkpoint_kept and not self._done:
                    # Redis restarted empty while this producer had nothing to write: a
                    # late joiner must still find the message so far.
                    await self._write([], checkpoint=True)

    async def _stop_heartbeat(self) -> None:
        task, self._heartbeat = self._heartbeat, None
        await _end_task(task)

    async def __aenter__(self) -> RelayProducer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if self._done:
                return
            if exc is None:
                await self.close()
            elif isinstance(exc, RelayUnavailable):
                pass  # nothing more can be written: its readers end on their own
            elif isinstance(exc, asyncio.CancelledError | GeneratorExit | KeyboardInterrupt):
                await self._last_word(self.cancel())  # a stopped worker says the message ended
            else:
                await self._last_word(self.fail(exc))
        finally:
            await self._stop_heartbeat()

    async def _last_word(self, ending: Coroutine[Any, Any, Any]) -> None:
        """Publish the end of a message this producer cannot finish, for at most a few
        seconds. If Redis will not take it, its readers still end (the lease expires);
        the write is cancelled and awaited, never left running or failing unheard."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ending, _LAST_WORD_TIMEOUT)


async def _end_task(task: asyncio.Task[None] | None) -> None:
    """Cancel a heartbeat and wait for it to end (unless it is the caller: a heartbeat
    that ends its own producer)."""
    if task is not None and task is not asyncio.current_task():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _close_source(chunks: Any) -> None:
    """Close what a stopped producer was reading (the provider's response), whatever kind
    of iterable it is; one that cannot be closed is left to its owner."""
    close = getattr(chunks, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
        return
    close = getattr(chunks, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()


Command = tuple[str, tuple[Any, ...], dict[str, Any]]


class _Batcher:
    """Every command the relay's coroutines issue in one turn of the event loop goes to
    Redis in one pipeline (one round trip), retried whole on a connection error: a
    thousand producers cost one write per turn, not a thousand. Safe to retry because
    every write is idempotent (explicit entry ids; SET, HSET, DEL, PEXPIRE)."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.pending: list[tuple[list[Command], asyncio.Future[tuple[list[Any], bool]]]] = []
        self.task: asyncio.Task[None] | None = None

    async def run(self, commands: list[Command]) -> tuple[list[Any], bool]:
        """The commands' results (exceptions in place of errors) and whether the
        pipeline they went in had to be retried."""
        future: asyncio.Future[tuple[list[Any], bool]] = asyncio.get_running_loop().create_future()
        self.pending.append((commands, future))
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._flush(), name="streamfold-relay-batch")
        return await future

    async def _flush(self) -> None:
        for _ in range(2**62):  # until nothing is pending
            await asyncio.sleep(0)  # let this turn's callers queue up
            batch, self.pending = self.pending, []
            if not batch:
                return
            attempts = 0

            async def execute(batch: list[Any] = batch) -> list[Any]:
                nonlocal attempts
                attempts += 1
                pipe = self.relay.redis.pipeline(transaction=False)
                for commands, _future in batch:
                    for name, args, kwargs in commands:
                        getattr(pipe, name)(*args, **kwargs)
                results: list[Any] = await pipe.execute(raise_on_error=False)
                return results

            try:
                results = await self.relay._retry("redis", execute)
            except BaseException as exc:
                for _commands, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            at = 0
            for commands, future in batch:
                if not future.done():
                    future.set_result((results[at : at + len(commands)], attempts > 1))
                at += len(commands)


class _Inbox:
    """A subscription's share of the tail: batches of entries, or a note to re-read."""

    __slots__ = ("batches", "deadline", "error", "limit", "overflow", "pending", "timer", "waiter")

    def __init__(self, limit: int) -> None:
        self.batches: list[list[Relayed]] = []
        self.pending = 0
        self.limit = limit
        self.overflow = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.deadline = 0.0
        """When the current `get` gives up (the event loop's clock)."""
        self.timer: asyncio.TimerHandle | None = None
        """The one timer of this inbox: it outlives the gets that entries answer and is
        moved on when it fires early. A reader woken every few milliseconds arms a timer
        per poll, not per event (a timer armed and cancelled per event was a sixth of a
        busy worker's CPU)."""

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def push(self, entries: list[Relayed]) -> None:
        if self.pending + len(entries) > self.limit:
            # A consumer that does not keep up: drop what it has not read (bounded memory);
            # it re-reads from its last id, or from a snapshot if those are trimmed too.
            self.batches.clear()
            self.pending = 0
            self.overflow = True
        else:
            self.batches.append(entries)
            self.pending += len(entries)
        self._wake()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self._wake()

    def _expire(self) -> None:
        self.timer = None
        if self.waiter is None or self.waiter.done():
            return  # nobody waits: the next get arms it again
        loop = self.waiter.get_loop()
        if loop.time() >= self.deadline:
            self.waiter.set_result(None)
        else:  # armed for an earlier get that entries answered: on to this one's end
            self.timer = loop.call_at(self.deadline, self._expire)

    async def get(self, timeout: float) -> tuple[list[Relayed], bool] | None:
        """(entries, overflowed) as soon as there are some; None after `timeout` seconds."""
        if not self.batches and not self.overflow and self.error is None:
            loop = asyncio.get_running_loop()
            waiter = self.waiter = loop.create_future()
            self.deadline = loop.time() + timeout
            if self.timer is None or self.timer.when() > self.deadline:
                if self.timer is not None:  # a shorter wait than the one it was armed for
                    self.timer.cancel()
                self.timer = loop.call_at(self.deadline, self._expire)
            try:
                await waiter
            finally:
                self.waiter = None
        if not self.batches and not self.overflow:
            if self.error is not None:
                raise self.error
            return None
        entries = [e for batch in self.batches for e in batch]
        overflow = self.overflow
        self.batches.clear()
        self.pending = 0
        self.overflow = False
        return entries, overflow

    def close(self) -> None:
        """The subscription is over: its timer goes with it."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


_TAIL_BLOCK_MS: Final = 50
_WAKE_PER_TURN: Final = 500  # readers the tail wakes per turn of the event loop


_Seen = tuple[Checkpoint | None, list[Relayed]]
"""A checkpoint (if one) and the entries read after it, contiguous."""


class _Followed:
    """What the tail knows of one stream: its readers here, how far it has read, the
    entries it read last (contiguous, ending at the cursor) and a checkpoint they follow
    (a reader that joins starts from them without asking Redis)."""

    __slots__ = ("checkpoint", "cursor", "key", "readers", "recent")

    def __init__(self, key: str, cursor: int) -> None:
        self.key = key.encode()
        """The stream's key, as it goes to Redis."""
        self.readers: set[_Inbox] = set()
        self.cursor = cursor
        self.recent: list[Relayed] = []
        self.checkpoint: Checkpoint | None = None

    def after(self, seq: int) -> list[Relayed] | None:
        """The entries after `seq` up to the cursor, if all are held here."""
        if seq >= self.cursor:
            return [] if seq == self.cursor else None
        recent = self.recent
        if not recent or recent[0].seq > seq + 1:
            return None
        return recent[seq + 1 - recent[0].seq :]

    def keep(self, entries: list[Relayed], window: int) -> None:
        """Entries read after the cursor: held if they continue the recent ones."""
        if entries[0].seq == self.cursor + 1 and _contiguous(entries):
            self.recent += entries
            if len(self.recent) > 2 * window:
                del self.recent[:-window]  # amortised: trimmed once per `window` entries
        else:
            self.recent = []
        self.cursor = entries[-1].seq


class _Tail:
    """One XREAD BLOCK loop per Relay (and event loop) for the live tail of every
    subscription: a worker with thousands of readers holds one blocked connection, not
    thousands, and one reply serves every reader of a stream. It keeps each stream's
    latest entries and checkpoint, so a reader joining a stream that others here follow
    costs Redis nothing."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.streams: dict[str, _Followed] = {}
        self.starting: dict[str, asyncio.Future[tuple[list[Relayed], _Seen | None]]] = {}
        """Snapshots being read from Redis, by stream key: joiners meanwhile share them."""
        self.task: asyncio.Task[None] | None = None
        self.stopped: RelayStopped | None = None
        # Enough to reach back to the newest checkpoint, which is at most
        # checkpoint_every entries old while its producer writes.
        self.window = 2 * relay.config.checkpoint_every

    def start(self, key: str) -> tuple[Checkpoint, list[Relayed]] | None:
        """A checkpoint of `key` and every entry after it, if this tail holds them."""
        followed = self.streams.get(key)
        if followed is None or followed.checkpoint is None:
            return None
        if followed.cursor - followed.checkpoint.seq >= self.relay.config.checkpoint_every:
            return None  # Redis has a newer one: the joiner reads it (and it is kept)
        entries = followed.after(followed.checkpoint.seq)
        return None if entries is None else (followed.checkpoint, entries)

    def after(self, key: str, seq: int) -> list[Relayed] | None:
        """The entries of `key` after `seq` that the tail has read, if it holds them all."""
        followed = self.streams.get(key)
        return None if followed is None else followed.after(seq)

    def join(
        self,
        key: str,
        last: int,
        inbox: _Inbox,
        seen: _Seen | None = None,
    ) -> int:
        """Follow `key` into `inbox` from after `last`; returns where the tail already is
        (entries up to it that the caller has not read must be read first). `seen`: the
        checkpoint and the entries up to `last` the caller read, for later joiners."""
        if self.stopped is not None:
            inbox.fail(self.stopped)  # joined after the stop: ends at its next read
        followed = self.streams.get(key)
        if followed is None:
            followed = self.streams[key] = _Followed(key, last)
            if seen is not None and seen[1] and seen[1][-1].seq == last:
                followed.recent = seen[1][-self.window :]  # contiguous, as read
        checkpoint = seen[0] if seen is not None else None
        if (
            checkpoint is not None
            and (followed.checkpoint is None or checkpoint.seq > followed.checkpoint.seq)
            and followed.after(checkpoint.seq) is not None
        ):
            followed.checkpoint = checkpoint
        followed.readers.add(inbox)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._run(), name="streamfold-relay-tail")
        return followed.cursor

    def leave(self, key: str, inbox: _Inbox) -> None:
        followed = self.streams.get(key)
        if followed is None:
            return
        followed.readers.discard(inbox)
        if not followed.readers:
            del self.streams[key]

    def started(self, key: str, reading: asyncio.Future[Any]) -> None:
        """A shared start has been read: later joiners start from the tail or read anew."""
        if self.starting.get(key) is reading:
            del self.starting[key]
        if not reading.cancelled():
            reading.exception()  # its readers may all have gone: nobody else looks

    def _fail(self, error: BaseException) -> None:
        for followed in self.streams.values():
            for inbox in followed.readers:
                inbox.fail(error)

    def behind(self, ends: dict[str, int]) -> bool:
        """Whether readers here follow one of `ends` (stream key: its last seq) and the
        tail has not read that far yet."""
        return any(
            (followed := self.streams.get(key)) is not None and followed.cursor < seq
            for key, seq in ends.items()
        )

    def stop(self, error: RelayStopped) -> None:
        """End every reader here with `error` (after what they were already handed)."""
        self.stopped = error
        self._fail(error)

    async def _run(self) -> None:
        relay = self.relay
        cfg = relay.config
        delay = 0.05
        for _ in range(2**62):  # bounded by its readers: it stops when the last one leaves
            if not self.streams:
                return
            # Every stream followed here is named in each XREAD: its keys and ids go as
            # bytes, which redis-py's packer passes through (a worker following a
            # thousand streams would otherwise encode two thousand strs a read).
            followed_now = self.streams.values()
            keys = [followed.key for followed in followed_now]
            ids = [b"0-%d" % followed.cursor for followed in followed_now]
            began = time.monotonic()
            try:
                async with asyncio.timeout(relay._attempt_limit(began)):
                    raw = await relay.redis.execute_command(
                        "XREAD", b"COUNT", cfg.batch, b"BLOCK", _TAIL_BLOCK_MS, b"STREAMS",
                        *keys, *ids,
                    )  # fmt: skip
                batches = _xread_entries(raw, relay._cache)
            except relay._errors as exc:
                deadline = relay._failed(began)
                now = time.monotonic()
                if now >= deadline:
                    self._fail(
                        RelayUnavailable(
                            f"read stream: Redis unreachable for {cfg.reconnect_timeout:g} s "
                            f"({type(exc).__name__}: {exc})"
                        )
                    )
                    return
                await asyncio.sleep(min(delay, deadline - now))
                delay = min(delay * 2, 1.0)
                continue
            except Exception as exc:  # a malformed entry, say: every reader hears of it
                self._fail(exc)
                return
            relay._down_since = None
            delay = 0.05
            woken = 0
            for key, entries in batches.items():
                followed = self.streams.get(key)
                if not entries or followed is None:
                    continue
                followed.keep(entries, self.window)
                for inbox in list(followed.readers):
                    inbox.push(entries)
                    woken += 1
                    if woken == _WAKE_PER_TURN:
                        # Thousands of readers woken in one turn of the event loop would
                        # hold it for seconds on a busy machine, and a Redis reply that
                        # arrived meanwhile would time out unread: they run in turns. (A
                        # reader joining meanwhile reads these entries from the tail.)
                        woken = 0
                        await asyncio.sleep(0)


class _Subscription:
    def __init__(
        self, relay: Relay, stream_id: str, keys: tuple[str, str, str], after: int | None
    ) -> None:
        self.relay = relay
        self.cfg = relay.config
        self.stream_id = stream_id
        self.events_key, self.checkpoint_key, self.lease_key = keys
        self.after = after
        self.last = 0
        self.seen: _Seen | None = None
        """The checkpoint and entries last read from Redis, for the tail to keep."""

    async def _wait_checkpoint(self) -> Checkpoint:
        deadline = time.monotonic() + self.cfg.start_timeout
        delay = 0.02
        for _ in range(_MAX_ATTEMPTS):
            checkpoint = await self.relay.checkpoint(self.stream_id)
            if checkpoint is not None:
                return checkpoint
            self.relay._check_running(f"wait for stream {self.stream_id!r}")
            now = time.monotonic()
            if now >= deadline:
                break
            await asyncio.sleep(min(delay, deadline - now))
            delay = min(delay * 2, 0.25)
        raise RelayNotFound(
            f"no relayed stream {self.stream_id!r} within {self.cfg.start_timeout:g} s "
            "(never started, or expired)"
        )

    async def _start(self) -> list[Relayed]:
        """A new reader's Snapshot and the entries after it: from what this worker's tail
        holds of the stream, or read from Redis once for all the readers here starting on
        it together (ten tabs opened at once, or waiting for the stream to appear)."""
        tail = self.relay._tail()
        held = tail.start(self.events_key)
        if held is not None:
            checkpoint, entries = held
            return [Relayed(checkpoint.id, checkpoint.seq, checkpoint.snapshot()), *entries]
        reading = tail.starting.get(self.events_key)
        first = reading is None
        if reading is None:
            reading = tail.starting[self.events_key] = asyncio.ensure_future(self._read_start())
            reading.add_done_callback(functools.partial(tail.started, self.events_key))
        try:
            items, self.seen = await asyncio.shield(reading)
        except RelayNotFound:
            if first:
                raise
            return await self._from_checkpoint()  # that wait began before this reader's
        return items

    async def _read_start(self) -> tuple[list[Relayed], _Seen | None]:
        items = await self._from_checkpoint()
        return items, self.seen

    async def _from_checkpoint(self) -> list[Relayed]:
        """A Snapshot and the entries right after it, with no gap between them."""
        for _ in range(_SNAPSHOT_RETRIES):
            checkpoint = await self._wait_checkpoint()
            entries = await self.relay._range(self.events_key, checkpoint.seq, self.cfg.batch)
            if entries and entries[0].seq != checkpoint.seq + 1:
                continue  # trimmed past the checkpoint we read: a newer one exists
            if not _contiguous(entries):
                continue
            self.seen = (checkpoint, entries)
            return [Relayed(checkpoint.id, checkpoint.seq, checkpoint.snapshot()), *entries]
        raise RelayError(
            f"stream {self.stream_id!r}: no consistent snapshot after {_SNAPSHOT_RETRIES} tries "
            "(is maxlen far too small for the write rate?)"
        )

    async def _resume(self, after: int) -> list[Relayed]:
        """Exactly the entries after `after`, or a fresh snapshot if some are gone."""
        entries = await self.relay._range(self.events_key, after, self.cfg.batch)
        if entries:
            if entries[0].seq == after + 1 and _contiguous(entries):
                self.seen = (None, entries)
                return entries
            return await self._from_checkpoint()
        checkpoint = await self._wait_checkpoint()
        if checkpoint.seq > after:
            return await self._from_checkpoint()  # the entries after `after` are gone
        return []

    async def run(self) -> AsyncIterator[Relayed]:
        self.relay._check_running(f"subscribe to {self.stream_id!r}")
        tail = self.relay._tail()
        if self.after is None:
            items = await self._start()
        else:
            held = tail.after(self.events_key, self.after)
            items = held if held is not None else await self._resume(self.after)
        self.last = self.after or 0
        cfg = self.cfg
        idle_since = time.monotonic()
        lease_gone_since: float | None = None
        lease_seen_at: float | None = None  # when the producer's lease was last seen
        inbox: _Inbox | None = None
        try:
            for _ in range(_MAX_ATTEMPTS * 100):  # each turn takes a poll or brings events
                for item in items:
                    self.last = item.seq
                    yield item
                    if isinstance(item.event, MessageCompleted):
                        return
                if items:
                    idle_since = time.monotonic()
                    lease_gone_since = None
                if inbox is None:
                    inbox = _Inbox(max(cfg.maxlen, cfg.batch))
                    cursor = tail.join(self.events_key, self.last, inbox, self.seen)
                    if cursor > self.last:  # the tail is ahead of us: read the difference
                        held = tail.after(self.events_key, self.last)
                        items = held if held is not None else await self._resume(self.last)
                        continue
                got = await inbox.get(cfg.poll)
                if got is not None:
                    entries, overflow = got
                    entries = [e for e in entries if e.seq > self.last]
                    if overflow or (
                        entries and (entries[0].seq != self.last + 1 or not _contiguous(entries))
                    ):
                        items = await self._resume(self.last)  # fill the gap (or a new snapshot)
                    else:
                        items = entries
                    continue
                items = []
                # Idle: is the producer still there?
                lease, end, seen_at = await self._liveness()
                now = time.monotonic()
                if end is not None:
                    if self.last >= end:
                        return  # the caller saw MessageCompleted already (after=<its id>)
                    items = await self._resume(self.last)
                    if not items:
                        lease_gone_since = lease_gone_since or now
                        if now - lease_gone_since >= cfg.lease_ttl:
                            yield await self._lost("its last entries are gone")
                            return
                    continue
                if lease:
                    lease_gone_since = None
                    lease_seen_at = seen_at
                    if now - idle_since >= cfg.idle_timeout:
                        yield await self._lost(f"no event for {cfg.idle_timeout:g} s")
                        return
                    continue
                lease_gone_since = lease_gone_since or now
                if not await self._lease_lapsed(lease_seen_at, seen_at, now - lease_gone_since):
                    continue
                items = await self._resume(self.last)  # a last look before giving up
                if items:
                    continue
                yield await self._lost("its lease expired with no end")
                return
            raise RelayError(f"stream {self.stream_id!r}: the subscription ran too long")
        finally:
            if inbox is not None:
                tail.leave(self.events_key, inbox)
                inbox.close()

    async def _liveness(self) -> tuple[bool, int | None, float]:
        """(the lease is there, the end's seq, when that was asked): shared by the readers
        of one stream in this worker for a fraction of a poll."""
        relay = self.relay
        now = time.monotonic()
        known = relay._liveness.get(self.lease_key)
        if known is not None and now - known[0] < self.cfg.poll / 2:
            return (*known[1], known[0])
        lease, end = await relay._commands(
            ("exists", (self.lease_key,), {}), ("hget", (self.checkpoint_key, "end"), {})
        )
        result = bool(lease), None if end is None else int(_text(end))
        if len(relay._liveness) > 65_536:
            relay._liveness.clear()
        relay._liveness[self.lease_key] = (now, result)
        return (*result, now)

    async def _lease_lapsed(self, seen_at: float | None, missed_at: float, gone_for: float) -> bool:
        """Whether a missing lease means the producer stopped. It does once Redis has been
        up since the lease was last seen (it expired: nobody renewed it), or for longer
        than a lease (a live producer renews its lease within a heartbeat of a restart).
        Where INFO is refused (an ACL, a proxy), a restart cannot be told apart from a
        crash: the lease then gets one more `lease_ttl` of grace."""
        uptime = await self.relay._uptime(missed_at)
        if uptime is None:
            return gone_for >= self.cfg.lease_ttl
        since_seen = self.cfg.lease_ttl if seen_at is None else time.monotonic() - seen_at
        return uptime > min(self.cfg.lease_ttl, since_seen)

    async def _lost(self, why: str) -> Relayed:
        """The synthetic end: the last checkpoint and every entry after it, incomplete."""
        checkpoint = await self.relay.checkpoint(self.stream_id)
        if checkpoint is None:
            mirror = _Mirror(Snapshot(message=Message(role="assistant", status="incomplete")))
        else:
            mirror = _Mirror(checkpoint.snapshot())
            after = checkpoint.seq
            for _ in range(self.cfg.maxlen // self.cfg.batch + 8):
                if after >= self.last:
                    break
                entries = await self.relay._range(self.events_key, after, self.cfg.batch)
                entries = [e for e in entries if e.seq <= self.last]
                if not entries:
                    break
                for entry in entries:
                    mirror.apply(entry.event)
                after = entries[-1].seq
        message = mirror.message()
        metadata = dict(message.metadata)
        metadata["error"] = {
            "type": "relay_producer_lost",
            "message": f"the producer of stream {self.stream_id!r} stopped: {why}",
        }
        message = message.model_copy(update={"status": "incomplete", "metadata": metadata})
        return Relayed(
            _entry_id(self.last), self.last, MessageCompleted(message=message), synthetic=True
        )


def _contiguous(entries: list[Relayed]) -> bool:
    return all(b.seq == a.seq + 1 for a, b in itertools.pairwise(entries))


# --- turns: the responses of an agent loop and the tool results between them -----------
#
# A turn is a list of steps under `P T:turn` (RPUSH, JSON): {"response": <stream id>} for
# each response, published as a stream of its own (`T/0`, `T/1`, ...: everything above
# holds for it), {"tool_result": <ToolResult>} for each result the app sends, and a last
# {"end": {"status": ...}}. `P T:turn-lease` is the turn producer's heartbeat. A reader
# walks the list: a response's stream from its start (a snapshot of a finished one is
# the whole message), a tool result as it is, then waits for the next step; one that
# joins late gets the loop so far, then the rest.


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """The turn is over: `status` complete, cancelled (stopped), error, or incomplete (its
    producer was lost: `synthetic`)."""

    type: Literal["turn_completed"] = field(default="turn_completed", init=False)
    status: Literal["complete", "cancelled", "error", "incomplete"] = "complete"
    synthetic: bool = False


@dataclass(frozen=True, slots=True)
class TurnRelayed:
    """One item of a turn's subscription."""

    id: str
    """`<step>:<entry id>` (a response's entry), `<step>` (a tool result or the end): pass
    it as `after=` to resume right after it."""
    step: int
    """The step's place in the turn (responses and tool results, in order)."""
    item: Relayed | ToolResult | TurnCompleted

    def events(self) -> list[Event | ToolResult]:
        """This item as what the UI and AG-UI encoders take: a snapshot's events, an
        event, a tool result; nothing for the end (close the encoder)."""
        item = self.item
        if isinstance(item, Relayed):
            event = item.event
            return list(event.events()) if isinstance(event, Snapshot) else [event]
        if isinstance(item, ToolResult):
            return [item]
        return []


def _turn_keys(relay: Relay, turn_id: str) -> tuple[str, str]:
    base = relay.keys(turn_id)[0].removesuffix(":events")
    return base + ":turn", base + ":turn-lease"


class RelayTurn:
    """Publishes one turn of an agent loop: `respond(chunks)` per response, `tool_result`
    per result the app sends, `close()`. As an async context manager it starts, and on
    leaving ends the turn: complete, cancelled if the block was cancelled or a stop was
    requested, error if the block raised."""

    def __init__(self, relay: Relay, turn_id: str) -> None:
        if len(turn_id) > 190:
            raise UsageError(
                f"relay.turn: expected a turn id of at most 190 characters, got {len(turn_id)}"
            )
        self.relay = relay
        self.turn_id = turn_id
        self.list_key, self.lease_key = _turn_keys(relay, turn_id)
        self.stop_key = relay.stop_key(turn_id)
        self.steps = 0
        self.messages: list[Message] = []
        self.producer: RelayProducer | None = None
        """The response being published now."""
        self._token = secrets.token_hex(8)
        self._started = False
        self._done = False
        self._stopped = False
        self._beat: asyncio.Task[None] | None = None

    @property
    def stop_requested(self) -> bool:
        """True once a `Relay.request_stop` of the turn reached it."""
        return self._stopped

    async def start(self) -> None:
        """Take the turn's lease; refuse a turn id that exists already."""
        if self._started:
            return
        relay = self.relay
        relay._check_running(f"produce turn {self.turn_id!r}")
        await relay._take_lease(
            self.lease_key,
            self._token,
            (self.list_key,),
            f"turn {self.turn_id!r}",
            "; use a new id",
        )
        # A stop request left from an earlier turn of this id is not for this one.
        await relay._commands(("delete", (self.stop_key,), {}))
        self._started = True
        self._beat = asyncio.create_task(self._heartbeat(), name=f"relay-turn-{self.turn_id}")

    async def _push(self, step: dict[str, Any]) -> None:
        expire_ms = int(self.relay.config.expire_after * 1000)
        await self.relay._commands(
            ("rpush", (self.list_key, _dumps(step)), {}),
            ("pexpire", (self.list_key, expire_ms), {}),
        )
        self.steps += 1

    async def _check_stop(self) -> bool:
        (asked,) = await self.relay._commands(("exists", (self.stop_key,), {}))
        self._stopped = self._stopped or bool(asked)
        return self._stopped

    async def respond(
        self, chunks: Any, *, provider: str | None = None, folder: StreamFolder | None = None
    ) -> Message:
        """Fold one response of the loop and publish it as the turn's next step; return
        its Message (status cancelled when a stop came meanwhile)."""
        await self.start()
        self._check_open("respond")
        if await self._check_stop():
            raise RelayStopped(f"turn {self.turn_id!r}: a stop was requested")
        stream_id = f"{self.turn_id}/{self.steps}"
        source, provider = _source(chunks, provider, "RelayTurn.respond", asynchronous=True)
        producer = self.relay.producer(
            stream_id, folder=folder, provider=None if folder else provider
        )
        await producer.start()  # the stream exists before the step names it
        await self._push({"response": stream_id})
        self.producer = producer
        if self._stopped:  # asked between the check above and now
            producer._stop_seen()
        try:
            async with producer:
                message = await producer.pump(source)
        finally:
            self.producer = None
        self.messages.append(message)
        if producer.stop_requested:
            self._stopped = True
        return message

    async def tool_result(self, result: ToolResult) -> None:
        """Publish a tool result the app got (the loop's next step)."""
        if not isinstance(result, ToolResult):
            raise UsageError(f"tool_result: expected a ToolResult, got {type(result).__name__}")
        await self.start()
        self._check_open("tool_result")
        await self._push({"tool_result": result.model_dump(mode="json")})

    async def close(self, status: Literal["complete", "cancelled", "error"] = "complete") -> None:
        """End the turn (its readers get TurnCompleted)."""
        await self.start()
        if self._done:
            return
        if self._stopped and status == "complete":
            status = "cancelled"
        self._done = True
        await self._push({"end": {"status": status}})
        expire_ms = int(self.relay.config.expire_after * 1000)
        await self.relay._commands(
            ("delete", (self.lease_key,), {}), ("pexpire", (self.list_key, expire_ms), {})
        )
        await self._stop_beat()

    def _check_open(self, what: str) -> None:
        if self._done:
            raise UsageError(f"RelayTurn.{what}: the turn {self.turn_id!r} is closed")

    async def _heartbeat(self) -> None:
        relay, cfg = self.relay, self.relay.config
        ttl_ms = int(cfg.lease_ttl * 1000)
        while not self._done:
            await asyncio.sleep(cfg.heartbeat)
            with contextlib.suppress(RelayError, *relay._errors):
                _lease, asked = await relay._commands(
                    ("set", (self.lease_key, self._token), {"px": ttl_ms}),
                    ("exists", (self.stop_key,), {}),
                )
                if asked and not self._stopped:
                    self._stopped = True
                    producer = self.producer
                    if producer is not None:  # the response being written stops too
                        producer._stop_seen()

    async def _stop_beat(self) -> None:
        task, self._beat = self._beat, None
        await _end_task(task)

    async def __aenter__(self) -> RelayTurn:
        await self.start()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if self._done:
                return
            if exc is None or (isinstance(exc, RelayStopped) and self._stopped):
                await self.close()
            elif isinstance(exc, asyncio.CancelledError | GeneratorExit | KeyboardInterrupt):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.close("cancelled"), _LAST_WORD_TIMEOUT)
            elif not isinstance(exc, RelayUnavailable):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.close("error"), _LAST_WORD_TIMEOUT)
        finally:
            await self._stop_beat()


async def _turn_items(
    relay: Relay, turn_id: str, after: str | int | None
) -> AsyncIterator[TurnRelayed]:
    list_key, lease_key = _turn_keys(relay, turn_id)
    cfg = relay.config
    step, entry_after = _turn_after(after)
    deadline = time.monotonic() + cfg.start_timeout
    delay = 0.02
    lease_gone_since: float | None = None
    for _ in range(_MAX_ATTEMPTS * 1000):
        (raw,) = await relay._commands(("lindex", (list_key, step), {}))
        if raw is None:
            lease, length = await relay._commands(
                ("exists", (lease_key,), {}), ("llen", (list_key,), {})
            )
            now = time.monotonic()
            if not lease and not length and now >= deadline:
                raise RelayNotFound(
                    f"no relayed turn {turn_id!r} within {cfg.start_timeout:g} s "
                    "(never started, or expired)"
                )
            if length and not lease:
                lease_gone_since = lease_gone_since or now
                if now - lease_gone_since >= cfg.lease_ttl:
                    yield TurnRelayed(str(step), step, TurnCompleted("incomplete", synthetic=True))
                    return
            else:
                lease_gone_since = None
            await asyncio.sleep(delay)
            delay = min(delay * 2, cfg.poll)
            continue
        delay = 0.02
        entry = _json(raw)
        if not isinstance(entry, dict) or len(entry) != 1:
            raise RelayError(
                f"turn {turn_id!r} step {step}: expected one step, got {preview(entry)}"
            )
        ((kind, value),) = entry.items()
        if kind == "response" and isinstance(value, str):
            async for relayed in relay.subscribe(value, after=entry_after):
                yield TurnRelayed(f"{step}:{relayed.id}", step, relayed)
        elif kind == "tool_result":
            try:
                result = ToolResult.model_validate(value)
            except StreamfoldError as exc:
                raise RelayError(f"turn {turn_id!r} step {step}: {exc}") from None
            yield TurnRelayed(str(step), step, result)
        elif kind == "end" and isinstance(value, dict):
            said = value.get("status")
            status: Literal["complete", "cancelled", "error", "incomplete"] = (
                said if said in ("complete", "cancelled", "error") else "incomplete"
            )
            yield TurnRelayed(str(step), step, TurnCompleted(status))
            return
        else:
            raise RelayError(f"turn {turn_id!r} step {step}: unknown step {kind!r}")
        step += 1
        entry_after = None
    raise RelayError(f"turn {turn_id!r}: the subscription ran too long")


def _turn_after(after: str | int | None) -> tuple[int, str | None]:
    """Where a turn's subscription starts: (step, the entry id in its response, if any)."""
    if after is None:
        return 0, None
    if isinstance(after, str):
        head, colon, entry = after.partition(":")
        if head.isdigit() and (not colon or _ENTRY_ID.match(entry)):
            return (int(head), entry) if colon else (int(head) + 1, None)
    raise UsageError(
        f"subscribe_turn: expected after= an id '<step>' or '<step>:0-<seq>', got {after!r}"
    )


__all__ = [
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "Relay",
    "RelayBusy",
    "RelayConfig",
    "RelayError",
    "RelayNotFound",
    "RelayProducer",
    "RelayStopped",
    "RelayTurn",
    "RelayUnavailable",
    "Relayed",
    "Snapshot",
    "TurnCompleted",
    "TurnRelayed",
    "event_from_json",
]
