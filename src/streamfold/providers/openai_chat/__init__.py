"""OpenAI Chat Completions and the servers that imitate them: decoder and encoder.

decode.py: events in, neutral deltas out (with its SSE hot lane); encode.py: a Message
history as the request body; state.py: the decoder's saved-state model.
"""

from .decode import OpenAIChatDecoder
from .encode import chat_tool_call, encode_request, replay_problems

__all__ = ["OpenAIChatDecoder", "chat_tool_call", "encode_request", "replay_problems"]
