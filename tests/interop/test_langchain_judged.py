"""`to_ai_message` judged by LangChain's own chat models, not by streamfold's reading.

Each recording is served by `streamfold serve`; langchain-anthropic's `ChatAnthropic` and
langchain-openai's `ChatOpenAI` (Chat Completions, and the Responses API) read it through
their own clients and build their own `AIMessage` (`output_version="v1"`). For the same
recording:
(a) `to_ai_message(fold_message(recording))` equals the library's message, except for the
    differences in `DIFFERENCES` (each with its reason; docs/adapters/langchain.md lists
    them);
(b) the next request the library builds from `[Human, ours, tool results]` equals the one
    it builds from `[Human, theirs, tool results]`, except for `REQUEST_DIFFERENCES`.
For (a) and (b) the library's message is built from serve's whole (non-streaming) answer;
then (b) is checked again against the message the chat model accumulates from its own
stream, except for the artifacts of LangChain's stream accumulation (`STREAM_DIFFERENCES`,
`STREAM_LOSES`).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_support import drop_zero_details, history, streamed
from server_support import serve_in_thread
from support import REAL, TESTS, read, recordings

from streamfold import fold_message
from streamfold.interop.langchain import from_ai_message, to_ai_message

pytest.importorskip("uvicorn")
langchain_anthropic = pytest.importorskip("langchain_anthropic")
langchain_openai = pytest.importorskip("langchain_openai")
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402

from streamfold.serve import create_app  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning"),
    # langchain-anthropic streaming a block its SDK types do not know (MCP, tool search):
    # its own warning, on its own reading.
    pytest.mark.filterwarnings("ignore:Received unexpected tool content block:UserWarning"),
]

# --- what differs, and why (docs/adapters/langchain.md mirrors these) -----------------------

DIFFERENCES: dict[str, str] = {
    "streamfold record": "response_metadata['streamfold'] is streamfold's own: status, stop "
    "reason, raw usage, metadata and the parts whole, so that from_ai_message gives the "
    "Message back; no chat model reads it.",
    "message id": "streamfold writes the provider's message id; ChatAnthropic and ChatOpenAI "
    "on Chat Completions leave LangChain's run id (lc_run-...).",
    "response envelope": "the chat models copy fields of the provider's response envelope "
    "(created_at, object, service_tier, system_fingerprint, container, raw usage...) into "
    "response_metadata; streamfold keeps those it folded in response_metadata['streamfold'].",
    "zero usage details": "the chat models write 0 for detail counts the provider did not "
    "report (audio, cache_creation); streamfold writes only the counts reported.",
    "reasoning tokens": "streamfold reads Anthropic's output_tokens_details.thinking_tokens "
    "as reasoning tokens; langchain-anthropic does not read them.",
    "chat reasoning": "on Chat Completions, ChatOpenAI drops the reasoning a compatible "
    "server streams (reasoning_content, reasoning); streamfold keeps it as reasoning blocks, "
    "which ChatOpenAI leaves out of the next request.",
    "items the SDK refuses": "serve's whole answer, the reference here, is built by "
    "streamfold's openai adapter with the SDK's models, which refuse a web_search_call item "
    "without its action, and leaves out an empty reasoning item: that reference lacks the "
    "items, which the stream carried and streamfold keeps (the streamed reference has them).",
    "refusal": "ChatOpenAI on Chat Completions writes additional_kwargs['refusal'] = None "
    "when no refusal came; streamfold leaves additional_kwargs empty.",
    "beta blocks": "ChatAnthropic reads blocks only the beta API has (MCP tool use and its "
    "result) through the non-beta SDK types, which add null fields (text: None) and drop "
    "null ones (citations: None) inside them; streamfold keeps the block as it came.",
}

REQUEST_DIFFERENCES: dict[str, str] = {
    "items the SDK refuses": "the same items, in the next request.",
    "beta blocks": "the same null fields inside beta-only blocks, as they go back.",
    "text as a list": "from a v1 message the chat model sends text as a list of text blocks; "
    "its own non-streaming message holds one plain string when the answer is only text "
    "(the same content for the API).",
}

# The recordings the library's own code cannot read (nothing to compare with).
NOT_READ: dict[str, str] = {
    "anthropic/compaction.sse": "langchain-anthropic fails on a compaction block "
    "(AttributeError: 'dict' object has no attribute 'model_dump').",
    "openai-responses/error-insufficient-quota-failed.sse": "a failed response: ChatOpenAI "
    "raises the API's error, as it should.",
    "groq/error-mid-stream-tool-use-failed.sse": "the stream ends in the API's error: "
    "ChatOpenAI raises it.",
    "openrouter/error-finish-length.sse": "the stream ends in the API's error: ChatOpenAI "
    "raises it.",
}

ENVELOPE = {"id", "model", "created_at", "object", "service_tier", "system_fingerprint",
            "container", "diagnostics", "stop_details", "usage", "token_usage", "logprobs",
            "metadata", "status"}  # fmt: skip


_OPAQUE = {"server_tool_call", "server_tool_result", "non_standard"}


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _beta_blocks(content: Any, kinds: set[str] | None) -> Any:
    if not isinstance(content, list):
        return content
    return [_without_nulls(b) if kinds is None or b.get("type") in kinds else b
            for b in content]  # fmt: skip


def _ids(value: Any) -> set[str]:
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found |= {v for k, v in item.items() if k in ("id", "tool_call_id")
                      and isinstance(v, str)}  # fmt: skip
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _only_known(ours: list[Any], theirs: list[Any]) -> list[Any]:
    """Our blocks (or items) but those of an id the other side does not hold at all."""
    known = _ids(theirs)
    return [b for b in ours
            if not any(isinstance(b.get(k), str) and b[k] not in known
                       for k in ("id", "tool_call_id"))]  # fmt: skip


def comparable(
    ours: AIMessage, theirs: AIMessage, kind: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both messages' JSON with the listed differences taken out (and only those)."""
    o, t = ours.model_dump(mode="json"), theirs.model_dump(mode="json")
    # streamfold record
    o["response_metadata"].pop("streamfold")
    # message id
    if isinstance(t["id"], str) and t["id"].startswith("lc_run-"):
        o["id"] = t["id"]
    # response envelope: theirs only, or equal
    for key in ENVELOPE:
        if key in t["response_metadata"] and key not in o["response_metadata"]:
            del t["response_metadata"][key]
    # zero usage details
    o["usage_metadata"] = drop_zero_details(o["usage_metadata"])
    t["usage_metadata"] = drop_zero_details(t["usage_metadata"])
    # reasoning tokens
    theirs_usage = t["usage_metadata"] or {}
    if kind == "anthropic" and o["usage_metadata"] and "output_token_details" not in theirs_usage:
        o["usage_metadata"].get("output_token_details", {}).pop("reasoning", None)
        o["usage_metadata"] = drop_zero_details(o["usage_metadata"])
    # chat reasoning
    if kind == "chat":
        o["content"] = [b for b in o["content"] if b.get("type") != "reasoning"]
    # beta blocks
    if kind == "anthropic":
        o["content"] = _beta_blocks(o["content"], _OPAQUE)
        t["content"] = _beta_blocks(t["content"], _OPAQUE)
    # items the SDK refuses
    if kind == "responses":
        o["content"] = _only_known(o["content"], t["content"])
    # refusal
    if t["additional_kwargs"] == {"refusal": None}:
        t["additional_kwargs"] = {}
    return o, t


def comparable_requests(ours: dict[str, Any], theirs: dict[str, Any], kind: str) -> tuple[Any, Any]:
    """Both requests with the listed differences taken out."""
    o, t = copy.deepcopy(ours), copy.deepcopy(theirs)
    for payload in (o, t):
        for message in payload.get("messages", []):
            if message.get("role") != "assistant":
                continue
            if isinstance(message.get("content"), str):  # text as a list
                message["content"] = [{"type": "text", "text": message["content"]}]
            if kind == "anthropic":  # beta blocks
                message["content"] = _beta_blocks(message["content"], None)
    if "input" in o:  # items the SDK refuses
        o["input"] = _only_known(o["input"], t["input"])
    return o, t


# --- the library's models on streamfold serve ------------------------------------------------


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(create_app(REAL, speed=0)) as url:
        yield url


def chat_model(kind: str, base_url: str, rec: str) -> BaseChatModel:
    pick = {"x-streamfold-recording": rec}
    if kind == "anthropic":
        return langchain_anthropic.ChatAnthropic(
            model="claude-test", base_url=base_url, api_key="test", default_headers=pick,
            max_retries=0, output_version="v1",
        )  # fmt: skip
    return langchain_openai.ChatOpenAI(
        model="gpt-test", base_url=f"{base_url}/v1", api_key="test", default_headers=pick,
        max_retries=0, output_version="v1", use_responses_api=kind == "responses",
    )  # fmt: skip


def request(model: BaseChatModel, ai: AIMessage) -> dict[str, Any]:
    """The request body the chat model builds for the next turn (its own payload builder)."""
    build: Callable[..., dict[str, Any]] = model._get_request_payload  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build(history(ai))


def _cases(kind: str, *dirs: str, only: str = "") -> list[Any]:
    return [
        pytest.param(kind, rel, id=rel)
        for rel in recordings(*dirs)
        if rel not in NOT_READ and only in rel.split("/")[-1]
    ]


CHAT_DIRS = ("openai-chat", "alibaba", "deepseek", "groq", "mistral", "openrouter",
             "perplexity", "xai", "zai", "azure-openai")  # fmt: skip
CASES = [
    *_cases("anthropic", "anthropic"),
    *[p for p in _cases("chat", *CHAT_DIRS) if "responses" not in p.values[1]],
    *_cases("responses", "openai-responses"),
    *[p for p in _cases("responses", *CHAT_DIRS) if "responses" in p.values[1]],
]


@pytest.mark.parametrize(("kind", "rel"), CASES)
def test_ours_is_the_librarys_own_message_and_builds_its_next_request(
    base_url: str, kind: str, rel: str
) -> None:
    model = chat_model(kind, base_url, rel)
    theirs = model.invoke([HumanMessage("hi")])
    assert isinstance(theirs, AIMessage)
    ours = to_ai_message(fold_message(read(rel)))
    o, t = comparable(ours, theirs, kind)
    assert o == t
    o, t = comparable_requests(request(model, ours), request(model, theirs), kind)
    assert o == t
    # And the message reads back as the recording's Message.
    assert from_ai_message(ours).content == fold_message(read(rel)).content


# --- what goes back, named -------------------------------------------------------------------


def _payload(kind: str, base_url: str, rel: str) -> dict[str, Any]:
    return request(chat_model(kind, base_url, rel), to_ai_message(fold_message(read(rel))))


def test_chatanthropic_sends_the_thinking_back_signed_and_only_tool_use(base_url: str) -> None:
    rel = "anthropic/thinking-then-tool-use.sse"
    body = _payload("anthropic", base_url, rel)
    sent = body["messages"][1]["content"]
    thinking = fold_message(read(rel)).content[0]
    assert sent[0] == {"type": "thinking", "thinking": thinking.content,
                       "signature": thinking.options["signature"]}  # fmt: skip
    assert [b["type"] for b in sent] == ["thinking", "tool_use"]  # no "tool_call" block
    assert body["messages"][2]["content"][0]["type"] == "tool_result"


def test_chatopenai_responses_sends_the_reasoning_item_and_the_phase_back(base_url: str) -> None:
    rel = "openai-responses/phase-reasoning-function-call.sse"
    body = _payload("responses", base_url, rel)
    message = fold_message(read(rel))
    reasoning = message.content[0]
    items = body["input"][1:]
    assert items[0]["type"] == "reasoning"
    assert items[0]["id"] == reasoning.options["id"]
    assert items[0]["encrypted_content"] == reasoning.options["encrypted_content"]
    assert items[1]["type"] == "message" and items[1]["phase"] == "commentary"
    assert [i["type"] for i in items[2:]] == ["function_call", "function_call_output"]
    assert items[3]["call_id"] == message.tool_calls[0].call_id


def test_chatopenai_chat_completions_sends_the_tool_calls_and_results_back(base_url: str) -> None:
    rel = "openai-chat/tool-calls-parallel.sse"
    body = _payload("chat", base_url, rel)
    message = fold_message(read(rel))
    sent = body["messages"][1]["tool_calls"]
    assert [c["id"] for c in sent] == [c.call_id for c in message.tool_calls]
    assert [m["role"] for m in body["messages"][2:]] == ["tool", "tool"]


def test_the_docs_page_lists_every_difference() -> None:
    page = (TESTS.parent / "docs" / "adapters" / "langchain.md").read_text()
    names = [*DIFFERENCES, *REQUEST_DIFFERENCES, *NOT_READ, *STREAM_DIFFERENCES,
             *STREAM_NOT_READ, *STREAM_LOSES]  # fmt: skip
    for name in names:
        assert name in page, name


# --- against the chat models' own streamed messages ------------------------------------------

# What the next request built from the chat model's own streamed message differs in, and
# why: artifacts of LangChain's stream accumulation. ChatAnthropic is streamed with its
# native content (output_version="v0"): with "v1", its stream's opening empty text block
# absorbs the first block and the thinking does not go back at all (see the docs page).
STREAM_DIFFERENCES: dict[str, str] = {
    "empty opening text": "langchain-anthropic's stream opens with an empty text block, "
    "which goes back in the next request; streamfold has no such block.",
    "text as a list": REQUEST_DIFFERENCES["text as a list"],
    "empty cited text": "LangChain's v1 to Anthropic conversion leaves out a citation's "
    "empty cited_text; the native stream's block keeps it.",
    "item status": "a Responses item's status: LangChain's stream keeps the status the item "
    "was announced with (in_progress) or none; streamfold's item is the finished one "
    "(completed).",
    "reasoning content": "a reasoning item's content: LangChain's stream keeps the one the "
    "item was announced with (an empty list) and drops the raw reasoning text a compatible "
    "server (DeepSeek, OpenRouter) streams; streamfold's item holds that text.",
    "whitespace text": "ChatAnthropic leaves a whitespace-only text block of a v1 message "
    "out of the request (the Messages API refuses one); from its native streamed message it "
    "sends the block.",
}

STREAM_NOT_READ: dict[str, str] = {
    "openai-responses/reasoning-encrypted-parallel-function-calls.sse": "LangChain's stream "
    "accumulation raises TypeError merging the response metadata.",
}


def _normal_stream_request(payload: dict[str, Any], kind: str) -> dict[str, Any]:
    out = copy.deepcopy(payload)
    for message in out.get("messages", []):
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):  # text as a list
            content = [{"type": "text", "text": content}]
        if kind == "anthropic" and isinstance(content, list):
            # empty opening text, whitespace text
            content = [b for b in content if b.get("type") != "text" or b.get("text", "").strip()]
            content = _beta_blocks(content, None)
            for block in content:  # empty cited text
                for citation in block.get("citations") or []:
                    if citation.get("cited_text") == "":
                        del citation["cited_text"]
        message["content"] = content
    for item in out.get("input", []):
        if item.get("type") in ("reasoning", "function_call", "custom_tool_call"):
            item.pop("status", None)  # item status
        if item.get("type") == "reasoning":
            item.pop("content", None)  # reasoning content
    return out


# Where the streamed message loses what the stream carried: the same text and blocks, but
# theirs without the citations.
STREAM_LOSES: dict[str, str] = {
    "anthropic/web-search-citations.sse": "langchain-anthropic's stream drops the citations "
    "of a cited sentence and merges it with the text after it (22 text and tool blocks "
    "become 14); streamfold sends each sentence with its citations.",
    "anthropic/web-search-thinking-citations.sse": "the same (17 blocks become 12).",
}

STREAM_CASES = [p for p in CASES if p.values[1] not in STREAM_NOT_READ]


def _text_and_blocks(content: list[Any]) -> tuple[str, list[Any], int]:
    """The text, the other blocks, and how many citations."""
    text = "".join(b["text"] for b in content if b["type"] == "text")
    others = [b for b in content if b["type"] != "text"]
    cited = sum(len(b.get("citations") or []) for b in content if b["type"] == "text")
    return text, others, cited


@pytest.mark.parametrize(("kind", "rel"), STREAM_CASES)
def test_ours_builds_the_request_the_models_own_streamed_message_builds(
    base_url: str, kind: str, rel: str
) -> None:
    model = chat_model(kind, base_url, rel)
    if kind == "anthropic":
        native = langchain_anthropic.ChatAnthropic(
            model="claude-test", base_url=base_url, api_key="test", max_retries=0,
            default_headers={"x-streamfold-recording": rel},
        )  # fmt: skip
        theirs = request(native, streamed(native))
    else:
        theirs = request(model, streamed(model))
    ours = request(model, to_ai_message(fold_message(read(rel))))
    o, t = _normal_stream_request(ours, kind), _normal_stream_request(theirs, kind)
    if rel in STREAM_LOSES:
        mine = _text_and_blocks(o["messages"][1]["content"])
        their = _text_and_blocks(t["messages"][1]["content"])
        assert mine[:2] == their[:2]
        assert mine[2] > 0 and their[2] == 0
        o["messages"][1]["content"] = t["messages"][1]["content"] = []
    assert o == t


def test_chatanthropics_own_v1_stream_sends_no_thinking_back_ours_does(base_url: str) -> None:
    # What the docs page says of langchain-anthropic's v1 stream, measured: its opening empty
    # text block absorbs the thinking block, which then does not go back. (If this fails,
    # LangChain fixed its stream: the docs page's note goes.)
    rel = "anthropic/thinking-signature.sse"
    model = chat_model("anthropic", base_url, rel)
    theirs = request(model, streamed(model))["messages"][1]["content"]
    ours = request(model, to_ai_message(fold_message(read(rel))))["messages"][1]["content"]
    assert [b["type"] for b in theirs if b["type"] == "thinking"] == []
    assert [b["type"] for b in ours] == ["thinking", "text"] and ours[0]["signature"]
