"""Caller mistakes: one UsageError, in the same words, on both builds.

Every public door's parameters given a wrong type (or a value out of range): compiled, the
doors take them as `Any` and check them in `streamfold.arguments`, so mypyc's own bare
TypeError never answers first; interpreted, nothing wrong is taken silently. And input a
fold cannot read: a path, an awaitable, an async source given to `fold`, input without a
single event, a `choice` the stream does not hold. The suite runs this file on the compiled
wheel as well (tests/test_build.py says which build is under test).
"""

from __future__ import annotations

import asyncio
import math
import types
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import REAL, read

import streamfold
from streamfold import (
    Accumulator,
    ChoiceError,
    Decoder,
    Limits,
    NoEventsError,
    StreamFolder,
    StreamProtocolError,
    StreamTiming,
    UsageError,
    afold,
    afold_message,
    encode,
    fold,
    fold_message,
    load_recording,
    register_provider,
    unregister_provider,
)
from streamfold.providers.openai_chat.decode import OpenAIChatDecoder
from streamfold.record import atee, check_speed, schedule, tee

CHAT = "openai-chat/text-include-usage.sse"
SURROGATE = "key\ud800"


def _afold(*args: Any, **kwargs: Any) -> Any:
    return asyncio.run(afold_message(*args, **kwargs))


def _save(key: Any) -> Any:
    return StreamFolder().save_state(key=key)


def _restore(key: Any) -> Any:
    return StreamFolder.restore(StreamFolder().save_state(key=b"k"), key=key)


# (what is called, the words the error must hold)
WRONG: dict[str, tuple[Callable[[], Any], str]] = {
    "fold provider=5": (lambda: fold([], provider=5), r"^fold: provider: expected a provider"),
    "fold choice='a'": (lambda: fold([], choice="a"), r"^fold: choice: expected an int, got str"),
    "fold choice=True": (lambda: fold([], choice=True), r"choice: expected an int, got bool"),
    "fold choice=-1": (lambda: fold([], choice=-1), r"choice: expected at least 0, got int -1"),
    "fold strict='yes'": (lambda: fold([], strict="yes"), r"^fold: strict: expected True or"),
    "fold strict=1": (lambda: fold([], strict=1), r"strict: expected True or False, got int 1"),
    "fold limits=None": (lambda: fold([], limits=None), r"limits: expected a streamfold.Limits"),
    "fold limits={}": (lambda: fold([], limits={}), r"limits: expected a streamfold.Limits"),
    "fold partial_arguments": (
        lambda: fold([], partial_arguments="no"),
        r"partial_arguments: expected True or False",
    ),
    "fold started_at='x'": (lambda: fold([], started_at="x"), r"^fold: started_at: expected"),
    "fold started_at=nan": (lambda: fold([], started_at=math.nan), r"started_at: expected"),
    "fold clock=5": (lambda: fold([], clock=5), r"^fold: clock: expected None or a function"),
    "fold_message provider=5": (lambda: fold_message([], provider=5), r"provider: expected"),
    "fold_message strict='yes'": (lambda: fold_message([], strict="yes"), r"strict: expected"),
    "fold_message choice=1.0": (lambda: fold_message([], choice=1.0), r"choice: expected an int"),
    "afold provider=5": (lambda: afold([], provider=5), r"^afold: provider: expected"),
    "afold choice='a'": (lambda: afold([], choice="a"), r"^afold: choice: expected an int"),
    "afold strict='yes'": (lambda: afold([], strict="yes"), r"^afold: strict: expected"),
    "afold limits=0": (lambda: afold([], limits=0), r"^afold: limits: expected"),
    "afold started_at='x'": (lambda: afold([], started_at="x"), r"^afold: started_at:"),
    "afold_message key=0 provider": (lambda: _afold([], provider=0), r"provider: expected"),
    "afold_message clock='now'": (lambda: _afold([], clock="now"), r"clock: expected"),
    "StreamFolder provider=5": (lambda: StreamFolder(5), r"^StreamFolder: provider: expected"),
    "StreamFolder choice=1.5": (lambda: StreamFolder(choice=1.5), r"choice: expected an int"),
    "StreamFolder strict='yes'": (lambda: StreamFolder(strict="yes"), r"strict: expected"),
    "StreamFolder role='robot'": (lambda: StreamFolder(role="robot"), r"role: expected one of"),
    "StreamFolder limits='x'": (lambda: StreamFolder(limits="x"), r"limits: expected"),
    "StreamFolder partial_arguments=0": (
        lambda: StreamFolder(partial_arguments=0),
        r"partial_arguments: expected True or False",
    ),
    "StreamFolder timing=5": (lambda: StreamFolder(timing=5), r"timing: expected None or a"),
    "StreamTiming clock=5": (lambda: StreamTiming(clock=5), r"^StreamTiming: clock: expected"),
    "StreamTiming started_at='x'": (
        lambda: StreamTiming(started_at="x"),
        r"^StreamTiming: started_at: expected",
    ),
    "Limits max_bytes='x'": (lambda: Limits(max_bytes="x"), r"^Limits: max_bytes: expected an int"),
    "Limits max_parts=-1": (
        lambda: Limits(max_parts=-1),
        r"max_parts: expected an int of at least 0",
    ),
    "Limits max_part_chars=True": (
        lambda: Limits(max_part_chars=True),
        r"max_part_chars: expected",
    ),
    "Limits max_tool_argument_chars=1.5": (
        lambda: Limits(max_tool_argument_chars=1.5),
        r"max_tool_argument_chars: expected an int, got float",
    ),
    "Limits max_depth=None": (lambda: Limits(max_depth=None), r"max_depth: expected an int"),
    "save_state key=0": (lambda: _save(0), r"state key: expected non-empty bytes or str, got int"),
    "save_state key=''": (lambda: _save(""), r"state key: expected non-empty bytes or str"),
    "save_state key surrogate": (lambda: _save(SURROGATE), r"lone surrogate"),
    "restore key=0": (lambda: _restore(0), r"state key: expected non-empty bytes or str"),
    "restore key surrogate": (lambda: _restore(SURROGATE), r"lone surrogate"),
    "register_provider aliases='abc'": (
        lambda: register_provider("acme-x", OpenAIChatDecoder, aliases="abc"),
        r"aliases: expected a list of names, got str",
    ),
    "register_provider aliases=5": (
        lambda: register_provider("acme-x", OpenAIChatDecoder, aliases=5),
        r"aliases: expected a list of names, got int",
    ),
    "register_provider replace='yes'": (
        lambda: register_provider("acme-x", OpenAIChatDecoder, replace="yes"),
        r"replace: expected True or False",
    ),
    "encode provider=5": (lambda: encode([], 5), r"provider: expected a provider name"),
    "encode strict='yes'": (lambda: encode([], strict="yes"), r"^encode: strict: expected"),
    "encode inferred_utterances=1": (
        lambda: encode([], inferred_utterances=1),
        r"inferred_utterances: expected True or False",
    ),
    "load_recording 5": (lambda: load_recording(5), r"^load_recording: path: expected a file"),
    "tee path=5": (lambda: tee([], 5), r"^tee: path: expected a file name"),
    "tee provider=5": (lambda: tee([], "x.sse", 5), r"^tee: provider: expected"),
    "tee timing='x'": (lambda: tee([], "x.sse", timing="x"), r"^tee: timing: expected True"),
    "atee path=None": (lambda: atee([], None), r"^atee: path: expected a file name"),
    "check_speed 'x'": (lambda: check_speed("x"), r"speed: expected a number, got str"),
    "schedule data=str": (lambda: schedule("data", "sse"), r"schedule: data: expected"),
    "schedule format='x'": (lambda: schedule(b"", "x"), r"schedule: format: expected one of"),
}


@pytest.mark.parametrize("case", list(WRONG))
def test_a_wrong_argument_is_one_usage_error(case: str) -> None:
    call, words = WRONG[case]
    with pytest.raises(UsageError, match=words) as info:
        call()
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_register_provider_refused_a_str_of_aliases_without_registering_anything() -> None:
    with pytest.raises(UsageError):
        register_provider("acme-y", OpenAIChatDecoder, aliases="abc")
    assert "acme-y" not in streamfold.registered_providers()
    with pytest.raises(UsageError, match="expected one of"):
        streamfold.providers.canonical_provider("a")


def test_limits_keep_their_values_equality_and_repr() -> None:
    limits = Limits(max_bytes=10, max_depth=3)
    assert (limits.max_bytes, limits.max_depth, limits.max_parts) == (10, 3, 10_000)
    assert limits == Limits(max_bytes=10, max_depth=3) and limits != Limits()
    assert hash(limits) == hash(Limits(max_bytes=10, max_depth=3))
    assert repr(Limits(max_bytes=10)).startswith("Limits(max_bytes=10, max_parts=10000")
    with pytest.raises(AttributeError):
        limits.max_bytes = 5
    # A fold's limits go into its saved state and come back equal.
    state = StreamFolder(limits=limits).save_state()
    assert StreamFolder.restore(state)._limits == limits


# --- what a fold cannot read -------------------------------------------------------------


async def _agen() -> AsyncIterator[bytes]:
    yield b"data: {}\n\n"


async def _coroutine() -> list[bytes]:
    return [read(CHAT)]


def test_a_path_is_a_usage_error_saying_to_pass_its_bytes() -> None:
    with pytest.raises(UsageError, match=r"got a path \(PosixPath\).*read_bytes\(\)"):
        fold_message(REAL / CHAT)


def test_a_coroutine_given_to_fold_is_a_usage_error_saying_to_await_it() -> None:
    with pytest.raises(UsageError, match=r"awaitable \(coroutine\) that has not been awaited"):
        fold_message(_coroutine())


def test_a_generator_based_coroutine_is_refused_while_a_plain_generator_folds() -> None:
    # A generator is taken without the source checks unless it is awaitable.
    @types.coroutine
    def awaitable() -> Iterator[bytes]:
        yield read(CHAT)

    with pytest.raises(UsageError, match=r"awaitable \(generator\) that has not been awaited"):
        fold_message(awaitable(), "openai-chat")
    plain = fold_message((chunk for chunk in [read(CHAT)]), "openai-chat")
    assert plain == fold_message([read(CHAT)], "openai-chat")


def test_an_async_iterable_given_to_fold_is_a_usage_error_naming_afold() -> None:
    with pytest.raises(UsageError, match=r"async iterable \(async_generator\).*afold\(\)"):
        fold(_agen())


def test_something_not_iterable_given_to_fold_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"got int, which is not iterable"):
        fold(5)


def test_a_coroutine_given_to_afold_is_a_usage_error_saying_to_await_it() -> None:
    with pytest.raises(UsageError, match=r"await it first"):
        _afold(_coroutine())
    with pytest.raises(UsageError, match=r"got int, which is not iterable"):
        _afold(5)


def test_afold_still_takes_a_sync_iterable() -> None:
    assert _afold([read(CHAT)]) == fold_message([read(CHAT)])


# --- input without a single event ----------------------------------------------------------


NOT_A_STREAM: dict[str, tuple[Any, str]] = {
    "a file name as str": (str(REAL / CHAT), r"not the name of a file.*read_bytes"),
    "a relative file name": ("recordings/chat.sse", r"not the name of a file"),
    "a README's bytes": (
        (Path(__file__).parent.parent / "README.md").read_bytes(),
        r"starting b'# streamfold.*text without SSE or JSON events",
    ),
    "the anthropic SDK's text_stream": (["Hello", " world", "!"], r"`text_stream`"),
    "an empty list": ([], r"no input at all"),
    "empty bytes": (b"", r"no input at all"),
    "only [DONE]": ([b"data: [DONE]\n\n"], r"no provider's event"),
}


@pytest.mark.parametrize("case", list(NOT_A_STREAM))
def test_input_without_a_single_event_is_a_no_events_error(case: str) -> None:
    chunks, words = NOT_A_STREAM[case]
    with pytest.raises(NoEventsError, match=words) as info:
        fold_message(chunks)
    error = info.value
    assert isinstance(error, UsageError) and isinstance(error, StreamProtocolError)
    assert "expected a provider stream" in str(error) and "without a single event" in str(error)
    assert error.partial is not None and error.partial.content == []
    with pytest.raises(NoEventsError, match=words):
        _afold(chunks)


def test_input_without_an_event_is_refused_even_with_the_provider_named() -> None:
    with pytest.raises(NoEventsError, match="text without SSE or JSON events"):
        fold_message(["Hello"], provider="anthropic")


def test_a_stream_folder_closed_without_input_raises_no_events_error() -> None:
    folder = StreamFolder("openai-chat")
    with pytest.raises(NoEventsError, match="no input at all"):
        folder.close()


# --- a choice the stream does not hold -------------------------------------------------------


def _two_choices() -> list[dict[str, Any]]:
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return [
        {
            **head,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": "A"}},
                {"index": 1, "delta": {"role": "assistant", "content": "B"}},
            ],
        },
        {
            **head,
            "choices": [
                {"index": 0, "delta": {}, "finish_reason": "stop"},
                {"index": 1, "delta": {}, "finish_reason": "stop"},
            ],
        },
    ]


def test_a_choice_the_stream_lacks_is_a_choice_error_naming_those_it_has() -> None:
    data = read(CHAT)
    assert data.rstrip().endswith(b"data: [DONE]")
    cut = data[: data.rindex(b"data: [DONE]")]
    for chunks in ([data], [cut]):  # ended by [DONE], and by the end of the input
        with pytest.raises(ChoiceError, match=r"choices the stream holds \(0\), got 3") as info:
            fold_message(chunks, choice=3)
        assert info.value.choice == 3 and info.value.available == [0]
        assert isinstance(info.value, UsageError)
        assert info.value.partial is not None


def test_a_choice_error_on_gemini_candidates() -> None:
    rel = "gemini/" + sorted(p.name for p in (REAL / "gemini").glob("*.sse"))[0]
    with pytest.raises(ChoiceError, match=r"\(0\), got 2"):
        fold_message([read(rel)], choice=2)


def test_every_choice_of_a_two_choice_stream_folds_and_a_third_is_refused() -> None:
    assert fold_message(_two_choices(), choice=0).text == "A"
    assert fold_message(_two_choices(), choice=1).text == "B"
    with pytest.raises(ChoiceError, match=r"\(0, 1\), got 2"):
        fold_message(_two_choices(), choice=2)


# --- a registered decoder's StopIteration ------------------------------------------------------


class _Stopper(Decoder):
    provider = "stopper-test"

    def decode(self, payload: dict[str, Any], event: str | None = None) -> list[Any]:
        return [next(iter(()))]  # a stray next() past an iterator's end


@pytest.fixture
def stopper() -> Any:
    register_provider("stopper-test", _Stopper)
    yield "stopper-test"
    unregister_provider("stopper-test")


@pytest.mark.parametrize("chunks", [[b'data: {"a": 1}\n\n'], [{"a": 1}]])
def test_a_decoders_stop_iteration_is_a_stream_protocol_error(stopper: str, chunks: Any) -> None:
    with pytest.raises(StreamProtocolError, match="StopIteration") as info:
        fold_message(chunks, provider=stopper)
    assert info.value.provider == stopper
    with pytest.raises(StreamProtocolError, match="StopIteration"):
        _afold(chunks, provider=stopper)


def test_a_restored_fold_still_names_the_choices_there_are() -> None:
    folder = StreamFolder(choice=2)
    folder.feed(_two_choices()[0])
    restored = StreamFolder.restore(folder.save_state())
    with pytest.raises(ChoiceError, match=r"\(0, 1\), got 2"):
        restored.close()


def test_async_for_over_fold_and_for_over_afold_are_usage_errors_naming_the_other() -> None:
    async def over_fold() -> None:
        async for _event in fold([read(CHAT)]):
            pass

    with pytest.raises(UsageError, match=r"got `async for`: .* use afold\(\)"):
        asyncio.run(over_fold())
    with pytest.raises(UsageError, match=r"got `for`: .* use fold\(\)"):
        list(afold([read(CHAT)]))


def test_a_folds_events_given_as_a_stream_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"got a fold \(Fold\), whose events are a fold.s output"):
        fold_message(fold([read(CHAT)]))
    with pytest.raises(UsageError, match=r"got a fold \(AsyncFold\), whose events"):
        _afold(afold([read(CHAT)]))


ACCUMULATOR_WRONG: dict[str, tuple[Callable[[], Any], str]] = {
    "Accumulator strict='yes'": (lambda: Accumulator(strict="yes"), r"strict: expected True"),
    "Accumulator provider=5": (lambda: Accumulator(provider=5), r"provider: expected"),
    "Accumulator role='robot'": (lambda: Accumulator(role="robot"), r"role: expected one of"),
    "Accumulator limits=3": (lambda: Accumulator(limits=3), r"limits: expected a streamfold"),
    "Accumulator partial_arguments=1": (
        lambda: Accumulator(partial_arguments=1),
        r"partial_arguments: expected True or False",
    ),
    "Accumulator.partial_arguments('a')": (
        lambda: Accumulator().partial_arguments("a"),
        r"index: expected an int, got str",
    ),
    "StreamFolder.partial_arguments(None)": (
        lambda: StreamFolder().partial_arguments(None),
        r"index: expected an int, got null",
    ),
    "Fold.partial_arguments(1.0)": (
        lambda: fold([read(CHAT)]).partial_arguments(1.0),
        r"index: expected an int, got float",
    ),
}


@pytest.mark.parametrize("case", list(ACCUMULATOR_WRONG))
def test_a_wrong_accumulator_argument_is_one_usage_error(case: str) -> None:
    call, words = ACCUMULATOR_WRONG[case]
    with pytest.raises(UsageError, match=words):
        call()
