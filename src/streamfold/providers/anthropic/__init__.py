"""Anthropic Messages: the stream decoder and the request encoder.

decode.py: events in, neutral deltas out (with its SSE hot lane); encode.py: a Message
history as the request body; state.py: the decoder's saved-state model.
"""

from .decode import AnthropicDecoder
from .encode import encode_request, replay_problems

__all__ = ["AnthropicDecoder", "encode_request", "replay_problems"]
