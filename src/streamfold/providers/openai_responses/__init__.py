"""OpenAI Responses: the stream decoder and the request encoder.

decode.py: events in, neutral deltas out (with its SSE hot lane); encode.py: a Message
history as the request body; state.py: the decoder's saved-state model.
"""

from .decode import CLIENT_CALL_INPUTS, OpenAIResponsesDecoder
from .encode import call_item, encode_request, replay_problems

__all__ = [
    "CLIENT_CALL_INPUTS",
    "OpenAIResponsesDecoder",
    "call_item",
    "encode_request",
    "replay_problems",
]
