"""Amazon Bedrock InvokeModelWithResponseStream: the stream decoder and the request encoder.

decode.py: events in, neutral deltas out; encode.py: a Message
history as the request body; state.py: the decoder's saved-state model.
"""

from .decode import BedrockInvokeDecoder
from .encode import encode_request, invoke_stream, replay_problems

__all__ = ["BedrockInvokeDecoder", "encode_request", "invoke_stream", "replay_problems"]
