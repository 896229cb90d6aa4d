"""Amazon Bedrock ConverseStream: the stream decoder.

decode.py: events in, neutral deltas out; state.py: the decoder's saved-state model.
"""

from .decode import BedrockDecoder

__all__ = ["BedrockDecoder"]
