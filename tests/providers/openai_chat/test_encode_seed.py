"""The ActiveAgent seed's OpenAI Chat transforms, behaviour by behaviour, on streamfold's encoder.

Each test names the seed method (and the behaviour of it) it checks. Where streamfold
deliberately differs (a merge never drops tool_calls or fields; `strict: false` survives),
the test says so.
"""

from __future__ import annotations

import pytest

from streamfold import ContentPart, Message, ToolCall
from streamfold.encoding import EncodeError, encode
from streamfold.providers.openai_chat.encode import (
    CHAT_DEFAULTS,
    cleanup_chat_request,
    content_to_array,
    merge_content,
    simplify_messages,
)


def chat(messages: object, **params: object) -> list[dict[str, object]]:
    body = encode(messages, "openai-chat", **params)
    out: list[dict[str, object]] = body["messages"]
    return out


# --- normalize_params ------------------------------------------------------------------------


def test_normalize_params_maps_instructions_to_developer_messages_before_the_messages() -> None:
    assert chat("hi", instructions="be brief") == [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


def test_normalize_params_normalizes_tools_tool_choice_and_response_format_together() -> None:
    body = encode(
        "hi",
        model="gpt-4o",
        tools=[{"name": "f", "parameters": {"type": "object"}}],
        tool_choice={"name": "f"},
        response_format="json_object",
    )
    assert body == {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
        ],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "response_format": {"type": "json_object"},
    }


def test_normalize_params_leaves_other_params_alone() -> None:
    body = encode("hi", model="gpt-4o", max_completion_tokens=50, seed=7)
    assert body["max_completion_tokens"] == 50 and body["seed"] == 7


# --- normalize_messages ------------------------------------------------------------------------


def test_normalize_messages_string_is_one_user_message() -> None:
    assert chat("hello") == [{"role": "user", "content": "hello"}]


def test_normalize_messages_hash_is_one_message() -> None:
    assert chat({"role": "system", "content": "x"}) == [{"role": "system", "content": "x"}]


def test_normalize_messages_nil_is_no_messages() -> None:
    assert chat(None) == []


def test_normalize_messages_other_type_raises() -> None:
    with pytest.raises(EncodeError, match="expected a list of messages, got int"):
        encode(42)


def test_normalize_messages_merges_consecutive_same_role_messages() -> None:
    assert chat(["a", "b", {"role": "assistant", "content": "c"}, "d"]) == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": "d"},
    ]


def test_normalize_messages_never_merges_tool_messages() -> None:
    calls = [ToolCall(call_id="1", name="f", arguments={}), ToolCall(call_id="2", name="f")]
    out = chat(
        [
            Message.assistant("", calls),
            {"role": "tool", "tool_call_id": "1", "content": "x"},
            {"role": "tool", "tool_call_id": "2", "content": "y"},
        ]
    )
    assert out[1:] == [
        {"role": "tool", "tool_call_id": "1", "content": "x"},
        {"role": "tool", "tool_call_id": "2", "content": "y"},
    ]


def test_normalize_messages_merge_keeps_tool_calls() -> None:
    # The seed rebuilt the merged message from role and content only, losing tool_calls.
    first = Message.assistant("Let me check.", [ToolCall(call_id="c1", name="f", arguments={})])
    second = Message.assistant("", [ToolCall(call_id="c2", name="g", arguments={"a": 1})])
    (merged,) = chat([first, second])
    assert merged["content"] == "Let me check."
    assert [c["id"] for c in merged["tool_calls"]] == ["c1", "c2"]  # type: ignore[index]


def test_normalize_messages_does_not_merge_when_a_field_would_be_lost() -> None:
    out = chat([{"role": "user", "content": "a", "name": "ann"}, {"content": "b", "name": "bob"}])
    assert out == [
        {"role": "user", "content": "a", "name": "ann"},
        {"role": "user", "content": "b", "name": "bob"},
    ]


# --- normalize_message ------------------------------------------------------------------------


def test_normalize_message_string_is_a_user_message() -> None:
    assert chat(["x"]) == [{"role": "user", "content": "x"}]


def test_normalize_message_passes_a_message_through() -> None:
    assert chat([Message.system("s")]) == [{"role": "system", "content": "s"}]


def test_normalize_message_role_defaults_to_user() -> None:
    assert chat([{"content": "x"}]) == [{"role": "user", "content": "x"}]


def test_normalize_message_text_shorthand() -> None:
    assert chat([{"text": "x"}]) == [{"role": "user", "content": "x"}]


def test_normalize_message_role_and_text_shorthand() -> None:
    assert chat([{"role": "system", "text": "x"}]) == [{"role": "system", "content": "x"}]


def test_normalize_message_image_shorthand() -> None:
    assert chat([{"image": "https://x/a.png"}]) == [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}],
        }
    ]


def test_normalize_message_text_and_image_shorthand() -> None:
    assert chat([{"text": "what is it?", "image": "https://x/a.png"}]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is it?"},
                {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
            ],
        }
    ]


def test_normalize_message_no_content_gives_a_message_without_content() -> None:
    assert chat([{"role": "user"}]) == [{"role": "user"}]


def test_normalize_message_keeps_extra_params() -> None:
    out = chat([{"role": "tool", "tool_call_id": "c1", "content": "42"}])
    assert out == [{"role": "tool", "tool_call_id": "c1", "content": "42"}]
    out = chat([{"role": "user", "content": "hi", "name": "ann"}])
    assert out == [{"role": "user", "content": "hi", "name": "ann"}]


def test_normalize_message_developer_role() -> None:
    assert chat([{"role": "developer", "content": "d"}]) == [{"role": "developer", "content": "d"}]


def test_normalize_message_other_type_raises_with_the_index() -> None:
    with pytest.raises(EncodeError, match=r"messages\[1\]: cannot normalise a int to a message"):
        encode(["ok", 3])


# --- create_message_param ---------------------------------------------------------------------


def test_create_message_param_unknown_role_raises_with_the_index() -> None:
    with pytest.raises(EncodeError, match=r"messages\[2\]: unknown message role 'robot'") as err:
        encode(["a", "b", {"role": "robot", "content": "x"}])
    assert isinstance(err.value, ValueError)
    assert err.value.index == 2


# --- normalize_content -------------------------------------------------------------------------


def test_normalize_content_string_stays_a_string() -> None:
    assert chat([{"content": "x"}])[0]["content"] == "x"


def test_normalize_content_array_maps_each_part() -> None:
    out = chat([{"content": ["a", {"type": "text", "text": "b"}]}])
    assert out[0]["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]


def test_normalize_content_single_hash_is_wrapped() -> None:
    part = {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}}
    assert chat([{"content": part}])[0]["content"] == [part]


def test_normalize_content_nil_gives_no_content() -> None:
    assert chat([{"role": "assistant", "content": None}]) == [{"role": "assistant"}]


def test_normalize_content_other_type_raises_with_the_index() -> None:
    with pytest.raises(EncodeError, match=r"messages\[0\]: cannot normalise a int to message"):
        encode([{"content": 5}])


# --- normalize_content_part ----------------------------------------------------------------------


def test_normalize_content_part_hash_passes_through() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}}
    assert chat([{"content": [audio]}])[0]["content"] == [audio]


def test_normalize_content_part_string_becomes_a_text_part() -> None:
    out = chat([{"content": ["a", "b"]}])
    assert out[0]["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]


def test_normalize_content_part_other_type_raises_with_the_index() -> None:
    with pytest.raises(EncodeError, match=r"messages\[0\]: cannot normalise a float"):
        encode([{"content": [1.5]}])


def test_normalize_content_part_hash_without_type_raises() -> None:
    with pytest.raises(EncodeError, match="without a type"):
        encode([{"content": [{"text": "x"}]}])


# --- content_to_array / merge_content --------------------------------------------------------


def test_content_to_array() -> None:
    assert content_to_array("a") == [{"type": "text", "text": "a"}]
    assert content_to_array(["a", {"type": "x"}]) == [{"type": "text", "text": "a"}, {"type": "x"}]
    assert content_to_array(None) == []
    assert content_to_array({"type": "x"}) == [{"type": "x"}]


def test_merge_content_keeps_parts_apart() -> None:
    assert merge_content("a", ["b"]) == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]
    assert merge_content(None, "b") == [{"type": "text", "text": "b"}]


def test_merge_content_keeps_mixed_content_in_a_merged_message() -> None:
    out = chat(["look", {"image": "https://x/a.png"}])
    assert out == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
            ],
        }
    ]


# --- normalize_instructions ------------------------------------------------------------------


def test_normalize_instructions_one_is_a_developer_message_with_string_content() -> None:
    assert chat([], instructions=["only"]) == [{"role": "developer", "content": "only"}]


def test_normalize_instructions_several_are_parts_of_one_developer_message() -> None:
    assert chat([], instructions=["a", "b"]) == [
        {
            "role": "developer",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        }
    ]


# --- normalize_tools ---------------------------------------------------------------------------


def tools(*given: dict[str, object]) -> object:
    return encode([], tools=list(given))["tools"]


def test_normalize_tools_common_format_with_parameters() -> None:
    assert tools({"name": "f", "description": "d", "parameters": {"type": "object"}}) == [
        {
            "type": "function",
            "function": {"name": "f", "description": "d", "parameters": {"type": "object"}},
        }
    ]


def test_normalize_tools_common_format_with_input_schema() -> None:
    assert tools({"name": "f", "input_schema": {"type": "object"}}) == [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    ]


def test_normalize_tools_nested_format_passes_through() -> None:
    nested = {"type": "function", "function": {"name": "f", "parameters": {}, "strict": True}}
    assert tools(nested) == [nested]


def test_normalize_tools_other_tools_pass_through() -> None:
    assert tools({"type": "custom", "custom": {"name": "g"}}) == [
        {"type": "custom", "custom": {"name": "g"}}
    ]


# --- normalize_tool_choice ------------------------------------------------------------------


@pytest.mark.parametrize("choice", ["auto", "required", "none"])
def test_normalize_tool_choice_strings_pass_through(choice: str) -> None:
    assert encode([], tool_choice=choice)["tool_choice"] == choice


def test_normalize_tool_choice_name_becomes_nested() -> None:
    assert encode([], tool_choice={"name": "f"})["tool_choice"] == {
        "type": "function",
        "function": {"name": "f"},
    }


def test_normalize_tool_choice_nested_passes_through() -> None:
    nested = {"type": "function", "function": {"name": "f"}}
    assert encode([], tool_choice=nested)["tool_choice"] == nested


# --- normalize_response_format -------------------------------------------------------------------


def fmt(value: object) -> object:
    return encode([], response_format=value)["response_format"]


def test_normalize_response_format_flat_json_schema() -> None:
    assert fmt({"type": "json_schema", "name": "r", "schema": {"type": "object"}}) == {
        "type": "json_schema",
        "json_schema": {"name": "r", "schema": {"type": "object"}},
    }


def test_normalize_response_format_nested_json_schema() -> None:
    nested = {"type": "json_schema", "json_schema": {"name": "r", "schema": {}, "strict": True}}
    assert fmt(nested) == nested


def test_normalize_response_format_keeps_strict_false() -> None:
    # The seed's `strict || ...` dropped an explicit false.
    out = fmt({"type": "json_schema", "name": "r", "schema": {}, "strict": False})
    assert out == {
        "type": "json_schema",
        "json_schema": {"name": "r", "schema": {}, "strict": False},
    }


@pytest.mark.parametrize("kind", ["json_object", "text"])
def test_normalize_response_format_other_types(kind: str) -> None:
    assert fmt({"type": kind}) == {"type": kind}
    assert fmt(kind) == {"type": kind}


def test_normalize_response_format_without_type_passes_through() -> None:
    assert fmt({"something": "else"}) == {"something": "else"}


# --- simplify_messages -------------------------------------------------------------------------


def test_simplify_messages_single_text_part_becomes_a_string() -> None:
    out = simplify_messages([{"role": "user", "content": [{"type": "text", "text": "x"}]}])
    assert out == [{"role": "user", "content": "x"}]


def test_simplify_messages_keeps_a_text_part_with_more_keys() -> None:
    part = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    assert simplify_messages([{"role": "user", "content": [part]}])[0]["content"] == [part]


def test_simplify_messages_keeps_several_parts() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert simplify_messages([{"role": "user", "content": parts}])[0]["content"] == parts


def test_simplify_messages_removes_empty_content() -> None:
    assert simplify_messages([{"role": "assistant", "content": []}]) == [{"role": "assistant"}]


def test_simplify_messages_on_encoded_parts() -> None:
    message = Message.user([ContentPart.text("only")])
    assert chat([message]) == [{"role": "user", "content": "only"}]


# --- cleanup_serialized_request ----------------------------------------------------------------


def test_cleanup_removes_parameters_equal_to_the_defaults() -> None:
    body = encode("hi", model="m", temperature=1, top_p=1, n=1, stream=False, logprobs=False)
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_cleanup_keeps_parameters_that_differ_from_the_defaults() -> None:
    body = encode("hi", temperature=0.2, n=2, stream=True, parallel_tool_calls=False)
    assert (body["temperature"], body["n"], body["stream"]) == (0.2, 2, True)
    assert body["parallel_tool_calls"] is False


def test_cleanup_compares_kinds_not_just_values() -> None:
    # True == 1 in Python; a default of 1 must not remove a True (or the other way round).
    assert cleanup_chat_request({"n": True}, CHAT_DEFAULTS) == {"n": True}
    assert cleanup_chat_request({"temperature": 1.0}, CHAT_DEFAULTS) == {}


def test_cleanup_keeps_web_search_options_when_set() -> None:
    assert encode("hi", web_search_options={})["web_search_options"] == {}
    assert encode("hi", web_search_options=True)["web_search_options"] == {}
    options = {"search_context_size": "low"}
    assert encode("hi", web_search_options=options)["web_search_options"] == options
    assert "web_search_options" not in encode("hi")


def test_cleanup_simplifies_messages() -> None:
    body = cleanup_chat_request(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]}, {}
    )
    assert body == {"messages": [{"role": "user", "content": "x"}]}
