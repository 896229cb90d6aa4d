"""streamfold's own MessageDeltas: the stream decoder.

decode.py: events in, neutral deltas out; state.py: the decoder's saved-state model.
"""

from .decode import MessageDeltaDecoder, events_to_deltas

__all__ = ["MessageDeltaDecoder", "events_to_deltas"]
