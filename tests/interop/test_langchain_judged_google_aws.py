"""`to_ai_message` judged by langchain-google-genai's and langchain-aws's own chat models.

Each recording is served by `streamfold serve`: `ChatGoogleGenerativeAI` reads the Gemini
recordings through the google-genai client pointed at serve (`base_url`), and
`ChatBedrockConverse` the Bedrock ones through a boto3 client whose `endpoint_url` is serve
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

import copy
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from server_support import serve_in_thread
from support import EVENTSTREAMS, REAL, TESTS, read, recordings

from streamfold import fold_message
from streamfold.interop.langchain import from_ai_message, to_ai_message

pytest.importorskip("uvicorn")
google_genai = pytest.importorskip("langchain_google_genai")
langchain_aws = pytest.importorskip("langchain_aws")
boto3 = pytest.importorskip("boto3")
from langchain_aws.chat_models.bedrock_converse import _messages_to_bedrock  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402

from streamfold.serve import create_app  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")]

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
    "Gemini server tools": "Gemini's executed code and its result, and server tool calls "
    "(file search), are held by ChatGoogleGenerativeAI as its own blocks "
    "(executable_code, code_execution_result, a non_standard server_tool_call); streamfold "
    "writes server_tool_call / non_standard blocks of its own, which ChatGoogleGenerativeAI "
    "does not send back.",
    "Nova thinking tags": "ChatBedrockConverse reads Nova's inline <thinking>...</thinking> "
    "text as a reasoning block (left out of the next request); streamfold keeps it as "
    "the text that streamed, marked as narration, and it goes back as text.",
    "Bedrock server tools": "ChatBedrockConverse holds a Nova server tool's use and result "
    "as Anthropic-like non_standard blocks and sends them back as toolUse/toolResult; "
    "streamfold's server_tool_call / non_standard blocks are left out of the next request.",
    "redacted reasoning": "ChatBedrockConverse reads a redacted reasoning block as a "
    "reasoning block holding the redacted bytes in extras; streamfold keeps the block "
    "whole as non_standard. Neither goes back (ChatBedrockConverse drops both).",
}

REQUEST_DIFFERENCES: dict[str, str] = {
    "trailing newline": DIFFERENCES["trailing newline"],
    "Gemini server tools": DIFFERENCES["Gemini server tools"],
    "Nova thinking tags": DIFFERENCES["Nova thinking tags"],
    "Bedrock server tools": DIFFERENCES["Bedrock server tools"],
}

# Recordings whose content differs in one of the named ways (and only there).
CONTENT_DIFFERS: dict[str, str] = {
    "gemini/code-execution.sse": "Gemini server tools",
    "gemini/file-search-toolcall-toolresponse.sse": "Gemini server tools",
    "gemini/text-2.0-flash.sse": "trailing newline",
    "bedrock/text-then-tool-use-nova.ndjson": "Nova thinking tags",
    "bedrock/text-then-tool-use-nova.eventstream": "Nova thinking tags",
    "bedrock/server-tool-code-execution-nova2.ndjson": "Bedrock server tools",
    "bedrock/server-tool-code-execution-nova2.eventstream": "Bedrock server tools",
    "bedrock/redacted-thinking-claude.ndjson": "redacted reasoning",
    "bedrock/redacted-thinking-claude.eventstream": "redacted reasoning",
}

ENVELOPE = {"safety_ratings", "ResponseMetadata", "metrics"}


def _drop_zero_details(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    out = dict(usage)
    for key in ("input_token_details", "output_token_details"):
        details = {k: v for k, v in (out.get(key) or {}).items() if v != 0}
        if details:
            out[key] = details
        else:
            out.pop(key, None)
    return out


def _plain_blocks(content: Any) -> Any:
    """The blocks without streamfold's extras on text and tool calls (utterance markers,
    tool call extras)."""
    out = []
    for block in content:
        block = dict(block)
        if block.get("type") in ("text", "tool_call"):
            extras = {k: v for k, v in block.pop("extras", {}).items()
                      if k not in ("utterance", "utterance_inferred", "thought_signature",
                                   "generated_id")}  # fmt: skip
            if extras:
                block["extras"] = extras
        out.append(block)
    return out


def comparable(ours: AIMessage, theirs: AIMessage, rel: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both messages' JSON with the listed differences taken out (and only those)."""
    o, t = ours.model_dump(mode="json"), theirs.model_dump(mode="json")
    o["response_metadata"].pop("streamfold")  # streamfold record
    if isinstance(t["id"], str) and t["id"].startswith("lc_run-"):  # message id
        o["id"] = t["id"]
    for key in ENVELOPE:  # response envelope
        t["response_metadata"].pop(key, None)
    if "model_name" not in o["response_metadata"]:  # requested model
        t["response_metadata"].pop("model_name", None)
    o["usage_metadata"] = _drop_zero_details(o["usage_metadata"])  # zero usage details
    t["usage_metadata"] = _drop_zero_details(t["usage_metadata"])
    o["content"] = _plain_blocks(o["content"])  # utterance markers, tool call extras
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
    client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=base_url,
                          aws_access_key_id="test", aws_secret_access_key="test")  # fmt: skip

    def pick(request: Any, **_: Any) -> None:
        request.headers["x-streamfold-recording"] = rel

    client.meta.events.register("before-sign.bedrock-runtime.*", pick)
    return langchain_aws.ChatBedrockConverse(
        model="amazon.nova-micro-v1:0", client=client, region_name="us-east-1",
        output_version="v1",
    )  # fmt: skip


def history(ai: AIMessage) -> list[BaseMessage]:
    """The next turn's input: the question, the answer, a result for each tool call."""
    results = [ToolMessage(f"result of {c['name']}", tool_call_id=c["id"] or "")
               for c in ai.tool_calls]  # fmt: skip
    return [HumanMessage("hi"), ai, *results]


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
