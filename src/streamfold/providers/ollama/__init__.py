"""Ollama's native API: the stream decoder.

decode.py: events in, neutral deltas out; state.py: the decoder's saved-state model.
"""

from .decode import OllamaDecoder

__all__ = ["OllamaDecoder"]
