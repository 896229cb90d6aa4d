"""Gemini / Vertex AI: the stream decoder and the request encoder.

decode.py: events in, neutral deltas out; encode.py: a Message
history as the request body; state.py: the decoder's saved-state model.
"""

from .decode import GeminiDecoder
from .encode import encode_request, replay_problems

__all__ = ["GeminiDecoder", "encode_request", "replay_problems"]
