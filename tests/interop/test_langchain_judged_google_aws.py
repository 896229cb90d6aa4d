"""`to_ai_message` judged by langchain-google-genai's and langchain-aws's own chat models.

Each recording is served by `streamfold serve`: `ChatGoogleGenerativeAI` reads the Gemini
recordings through the google-genai client pointed at serve (`base_url`), and
`ChatBedrockConverse` the Bedrock ones through a botocore client whose `endpoint_url` is serve
(dummy credentials). Both build their own `AIMessage` (`output_version="v1"`) from serve's
whole answer. For the same recording:
(a) `to_ai_message(fold_message(recording))` equals the library's message, except for the
    differences in `DIFFERENCES` (each with its reason; docs/adapters/langchain.md lists
    them);
(b) the next request's contents the library builds from `[Human, ours, tool results]`
    equal those it builds from `[Human, theirs, tool results]`, except for
    `REQUEST_DIFFERENCES`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_support import drop_zero_details, history, streamed
from server_support import bedrock_client, serve_in_thread
from support import EVENTSTREAMS, REAL, TESTS, read, recordings

from streamfold import fold_message
from streamfold.interop.langchain import from_ai_message, to_ai_message

pytest.importorskip("uvicorn")
google_genai = pytest.importorskip("langchain_google_genai")
langchain_aws = pytest.importorskip("langchain_aws")
pytest.importorskip("botocore.session")
from langchain_aws.chat_models.bedrock_converse import _messages_to_bedrock  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402

from streamfold.serve import create_app  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning"),
    # langchain-google-genai's own note on a code execution answer.
    pytest.mark.filterwarnings("ignore:(?s).*Output may vary each run:UserWarning"),
]

# --- what differs, and why (docs/adapters/langchain.md mirrors these) -----------------------

DIFFERENCES: dict[str, str] = {
    "streamfold record": "response_metadata['streamfold'] is streamfold's own (see above).",
    "message id": "streamfold writes Gemini's responseId; ChatGoogleGenerativeAI and "
    "ChatBedrockConverse leave LangChain's run id (lc_run-...).",
    "response envelope": "ChatGoogleGenerativeAI copies safety_ratings, ChatBedrockConverse "
    "botocore's ResponseMetadata and the metrics into response_metadata; streamfold keeps "
    "what it folded in response_metadata['streamfold'].",
    "requested model": "ChatBedrockConverse writes the model id it was configured with as "
    "model_name; a Converse stream does not name its model, and streamfold writes none.",
    "zero usage details": "the chat models write 0 for the cache counts the provider did not "
    "report; streamfold writes only the counts reported.",
    "utterance markers": "streamfold's text blocks carry its answer/narration marker in "
    "extras (utterance, utterance_inferred); the chat models' do not. Neither chat model "
    "sends extras on.",
    "tool call extras": "streamfold's tool_call blocks keep the call's metadata in extras "
    "(Gemini's thought_signature, generated_id); ChatGoogleGenerativeAI keeps the "
    "signatures in additional_kwargs only, where streamfold writes them too.",
    "legacy function_call": "ChatGoogleGenerativeAI also writes the last function call in "
    "additional_kwargs['function_call'] (OpenAI's old form); it reads tool_calls first, "
    "and streamfold leaves it out.",
    "trailing newline": "ChatGoogleGenerativeAI strips the trailing newlines of a text part "
    "in a whole (non-streamed) answer, not in a streamed one; streamfold keeps the text as "
    "it streamed.",
    "server tool extras": "streamfold's server tool blocks keep Gemini's part whole in "
    "extras (type, block, id), for from_ai_message; ChatGoogleGenerativeAI sends no extras.",
    "code execution ids": "ChatGoogleGenerativeAI's message here gives the executed code an "
    "id of its own making (a uuid) and links no result to it; streamfold writes Gemini's "
    "id on both. Neither goes into the next request.",
    "Gemini file search": "a file search's toolCall and toolResponse parts: "
    "ChatGoogleGenerativeAI holds the call as a non_standard block and sends it back as a "
    "code execution result ('{}'), which it was not; streamfold writes them as "
    "server_tool_call / server_tool_result blocks, which do not go back.",
    "grounding citations": "streamfold writes Gemini's grounding supports as citations on "
    "the text; ChatGoogleGenerativeAI's message has none (it reads groundingMetadata into "
    "citations only for an answer held as one string). Citations do not go into the next "
    "request.",
    "Nova thinking tags": "ChatBedrockConverse reads Nova's inline <thinking>...</thinking> "
    "text as a reasoning block (left out of the next request); streamfold keeps it as "
    "the text that streamed, marked as narration, and it goes back as text.",
    "Bedrock server tools": "ChatBedrockConverse holds a Nova server tool's use and result "
    "as Anthropic-like non_standard blocks and sends them back as toolUse/toolResult "
    "without the type that marks them as the server's; "
    "streamfold's server_tool_call / non_standard blocks are left out of the next request.",
    "redacted reasoning": "ChatBedrockConverse reads a redacted reasoning block as a "
    "reasoning block holding the redacted bytes in extras; streamfold keeps the block "
    "whole as non_standard. Neither goes back (ChatBedrockConverse drops both).",
}

REQUEST_DIFFERENCES: dict[str, str] = {
    "trailing newline": DIFFERENCES["trailing newline"],
    "Gemini file search": DIFFERENCES["Gemini file search"],
    "Nova thinking tags": DIFFERENCES["Nova thinking tags"],
    "Bedrock server tools": DIFFERENCES["Bedrock server tools"],
}

# Recordings whose content differs in one of the named ways (and only there).
CONTENT_DIFFERS: dict[str, str] = {
    "gemini/file-search-toolcall-toolresponse.sse": "Gemini file search",
    "gemini/text-2.0-flash.sse": "trailing newline",
    "bedrock/text-then-tool-use-nova.ndjson": "Nova thinking tags",
    "bedrock/text-then-tool-use-nova.eventstream": "Nova thinking tags",
    "bedrock/server-tool-code-execution-nova2.ndjson": "Bedrock server tools",
    "bedrock/server-tool-code-execution-nova2.eventstream": "Bedrock server tools",
    "bedrock/redacted-thinking-claude.ndjson": "redacted reasoning",
    "bedrock/redacted-thinking-claude.eventstream": "redacted reasoning",
}

ENVELOPE = {"safety_ratings", "ResponseMetadata", "metrics"}


_OUR_EXTRAS = {
    "text": {"utterance", "utterance_inferred"},  # utterance markers
    "tool_call": {"thought_signature", "generated_id"},  # tool call extras
    "server_tool_call": {"type", "block", "id"},  # server tool extras
    "server_tool_result": {"type", "block", "id"},
}


def _plain_blocks(content: Any, theirs: Any, gemini: bool) -> Any:
    """Our blocks without streamfold's own extras, and with the library's own code
    execution ids (code execution ids)."""
    their_ids = [b["id"] for b in theirs if b.get("type") == "server_tool_call"]
    out = []
    for block in content:
        block = dict(block)
        drop = _OUR_EXTRAS.get(block["type"], set())
        extras = {k: v for k, v in block.pop("extras", {}).items() if k not in drop}
        if extras:
            block["extras"] = extras
        if block["type"] == "server_tool_call" and block["name"] == "code_interpreter":
            block["id"] = their_ids.pop(0) if their_ids else block["id"]
        if block["type"] == "server_tool_result" and "outcome" in extras:
            block["tool_call_id"] = ""
        if gemini and block["type"] == "text":  # grounding citations
            block.pop("annotations", None)
        out.append(block)
    return out


def comparable(
    ours: AIMessage, theirs: AIMessage, rel: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both messages' JSON with the listed differences taken out (and only those)."""
    o, t = ours.model_dump(mode="json"), theirs.model_dump(mode="json")
    o["response_metadata"].pop("streamfold")  # streamfold record
    if isinstance(t["id"], str) and t["id"].startswith("lc_run-"):  # message id
        o["id"] = t["id"]
    for key in ENVELOPE:  # response envelope
        t["response_metadata"].pop(key, None)
    if "model_name" not in o["response_metadata"]:  # requested model
        t["response_metadata"].pop("model_name", None)
    o["usage_metadata"] = drop_zero_details(o["usage_metadata"])  # zero usage details
    t["usage_metadata"] = drop_zero_details(t["usage_metadata"])
    o["content"] = _plain_blocks(o["content"], t["content"], rel.startswith("gemini/"))
    t["additional_kwargs"].pop("function_call", None)  # legacy function_call
    if rel in CONTENT_DIFFERS:  # the named content differences
        o["content"] = t["content"] = None
    return o, t


# --- the library's models on streamfold serve ------------------------------------------------


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(create_app(REAL, speed=0)) as url:
        yield url


def chat_model(base_url: str, rel: str) -> BaseChatModel:
    if rel.startswith("gemini/"):
        return google_genai.ChatGoogleGenerativeAI(
            model="gemini-test", google_api_key="test", base_url=base_url, max_retries=0,
            additional_headers={"x-streamfold-recording": rel}, output_version="v1",
        )  # fmt: skip
    client = bedrock_client(base_url, {"x-streamfold-recording": rel})
    return langchain_aws.ChatBedrockConverse(
        model="amazon.nova-micro-v1:0", client=client, region_name="us-east-1",
        output_version="v1",
    )  # fmt: skip


def request(model: BaseChatModel, ai: AIMessage) -> list[Any]:
    """The messages of the next turn's request, as the chat model's own code builds them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(model, google_genai.ChatGoogleGenerativeAI):
            built = model._prepare_request(history(ai))
            return [c.model_dump(mode="json", exclude_none=True) for c in built["contents"]]
        build: Callable[..., Any] = _messages_to_bedrock
        bedrock = model  # type: Any
        return list(build(history(ai), None, model_id=bedrock._get_base_model(),
                          provider=bedrock.provider)[0])  # fmt: skip


CASES = [*recordings("gemini"), *recordings("bedrock"), *EVENTSTREAMS]


@pytest.mark.parametrize("rel", CASES)
def test_ours_is_the_librarys_own_message_and_builds_its_next_request(
    base_url: str, rel: str
) -> None:
    model = chat_model(base_url, rel)
    theirs = model.invoke([HumanMessage("hi")])
    assert isinstance(theirs, AIMessage)
    ours = to_ai_message(fold_message(read(rel)))
    o, t = comparable(ours, theirs, rel)
    assert o == t
    mine, their = request(model, ours), request(model, theirs)
    if REQUEST_DIFFERENCES.get(CONTENT_DIFFERS.get(rel, "")):
        # The named difference is in the answer's turn only: the rest is the same.
        assert mine[1] != their[1]
        mine[1] = their[1] = None
    assert mine == their
    assert from_ai_message(ours).content == fold_message(read(rel)).content


# --- what goes back, named -------------------------------------------------------------------


def _sent(base_url: str, rel: str) -> list[Any]:
    """The answer's turn in the next request built from ours."""
    message = to_ai_message(fold_message(read(rel)))
    return list(request(chat_model(base_url, rel), message)[1]["parts"])


def test_chatgooglegenerativeai_sends_each_function_call_with_its_signature(
    base_url: str,
) -> None:
    # Gemini refuses a thinking model's function call sent back without its signature.
    rel = "gemini/function-call-streamed-args.sse"
    calls = fold_message(read(rel)).tool_calls
    sent = [p for p in _sent(base_url, rel) if "function_call" in p]
    assert [p["function_call"]["name"] for p in sent] == [c.name for c in calls]
    signature = calls[0].metadata["thought_signature"]
    assert sent[0]["thought_signature"] == signature.replace("+", "-").replace("/", "_")
    assert "thought_signature" not in sent[1]  # the second call came unsigned


def test_chatgooglegenerativeai_sends_no_thought_back_as_answer_text(base_url: str) -> None:
    rel = "gemini/thought-parts-signature.sse"
    message = fold_message(read(rel))
    thought = next(p for p in message.content if p.type == "thinking")
    sent = _sent(base_url, rel)
    assert all(thought.content not in p.get("text", "") for p in sent)
    assert [p["text"] for p in sent if p.get("text")] == [
        p.content for p in message.content if p.type == "text" and p.content
    ]


def test_chatgooglegenerativeai_sends_the_executed_code_and_its_result_back(
    base_url: str,
) -> None:
    rel = "gemini/code-execution.sse"
    sent = _sent(base_url, rel)
    assert [next(iter(p)) for p in sent[:2]] == ["executable_code", "code_execution_result"]
    assert sent[1]["code_execution_result"]["output"] == "-428330955.97745\n"


def test_serves_whole_gemini_answer_counts_the_thoughts_once(base_url: str) -> None:
    # Gemini's candidates count leaves the thoughts out; its total holds them once.
    rel = "gemini/thought-parts-signature.sse"
    usage = fold_message(read(rel)).usage
    assert usage is not None and usage.reasoning_tokens
    theirs = chat_model(base_url, rel).invoke([HumanMessage("hi")])
    assert isinstance(theirs, AIMessage) and theirs.usage_metadata is not None
    assert theirs.usage_metadata["total_tokens"] == usage.raw["totalTokenCount"]
    assert theirs.usage_metadata["output_tokens"] == usage.output_tokens


def test_the_docs_page_lists_every_difference() -> None:
    page = (TESTS.parent / "docs" / "adapters" / "langchain.md").read_text()
    for name in [*DIFFERENCES, *REQUEST_DIFFERENCES]:
        assert name in page, name


# --- against the chat models' own streamed messages ------------------------------------------

# The next request built from the chat model's own streamed message differs from ours only
# at the answer's turn of these recordings, for these reasons (artifacts of LangChain's
# stream accumulation):
STREAM_DIFFERENCES: dict[str, str] = {
    "gemini/code-execution.sse": "signature merged: Gemini streams the closing thought "
    "signature on an empty text part; LangChain's accumulation merges it into the text "
    "before it, streamfold sends the part as it came.",
    "gemini/file-search-toolcall-toolresponse.sse": "the same, and the file search as "
    "above (Gemini file search).",
    "gemini/structured-output-response-schema.sse": "the same: the signature after the "
    "JSON answer.",
    "bedrock/reasoning-empty-text-delta-gpt-oss.ndjson": "empty text delta: "
    "ChatBedrockConverse's stream turns the empty text delta before the answer into a "
    "'.' text block, which goes back; streamfold has no such text.",
    "bedrock/reasoning-empty-text-delta-gpt-oss.eventstream": "the same.",
}

# Where the streamed message loses what the stream carried.
STREAM_LOSES: dict[str, str] = {
    "gemini/function-call-streamed-args.sse": "LangChain's stream accumulation drops the "
    "arguments Gemini streams in parts (partialArgs): the first call goes back with {} "
    "and eight function responses follow two calls; streamfold sends both calls whole.",
}

STREAM_NOT_READ: dict[str, str] = {
    "bedrock/server-tool-code-execution-nova2.ndjson": "ChatBedrockConverse's stream "
    "raises KeyError('input') on a Nova server tool's use.",
    "bedrock/server-tool-code-execution-nova2.eventstream": "the same.",
}


@pytest.mark.parametrize("rel", [r for r in CASES if r not in STREAM_NOT_READ])
def test_ours_builds_the_request_the_models_own_streamed_message_builds(
    base_url: str, rel: str
) -> None:
    model = chat_model(base_url, rel)
    theirs = request(model, streamed(model))
    ours = request(model, to_ai_message(fold_message(read(rel))))
    if rel in STREAM_DIFFERENCES or rel in STREAM_LOSES:
        assert ours[1] != theirs[1]
        ours[1] = theirs[1] = None
    if rel in STREAM_LOSES:  # (and the tool results that follow)
        ours, theirs = ours[:2], theirs[:2]
    assert ours == theirs


def test_the_docs_page_lists_every_stream_difference() -> None:
    page = (TESTS.parent / "docs" / "adapters" / "langchain.md").read_text()
    for name in [*STREAM_DIFFERENCES, *STREAM_LOSES, *STREAM_NOT_READ]:
        assert name in page, name


def test_from_ai_message_reads_the_stop_reason_chatbedrockconverse_writes(base_url: str) -> None:
    rel = "bedrock/tool-call.ndjson"
    theirs = chat_model(base_url, rel).invoke([HumanMessage("hi")])
    assert isinstance(theirs, AIMessage)
    folded = fold_message(read(rel))
    read_back = from_ai_message(theirs)
    assert (read_back.raw_stop_reason, read_back.stop_reason) == (
        folded.raw_stop_reason,
        folded.stop_reason,
    )
    assert to_ai_message(folded).response_metadata["stopReason"] == folded.raw_stop_reason
