"""Save a fold's whole state as JSON and restore it, in this process or another.

A state is data in a closed, explicit schema: each box (the framer, the provider's
decoder, the accumulator, the fold itself) declares what it needs to resume as a strict
pydantic model in a module beside its own (`FoldState` in fold_state.py holds the others),
and rebuilds itself from a validated one with its own constructor. The models live apart
from the boxes because the boxes are compiled with mypyc and the models must not be:
pydantic reads a model's annotations, which mypyc does not keep as written. A state names no class
and no module: the decoder's model is picked by the provider's name from the registry.

`load_state` checks the whole document before anything is built (JSON types, nesting
depth, the version, the HMAC when a key is given, every field's type and the fields'
agreement) and refuses anything else with one `StateError` naming the field.

The envelope: {"streamfold_state": <version>, "folder": <FoldState>, "mac": <hex>} (the
mac only with a key: HMAC-SHA256 over the canonical JSON of the rest; without a key, a
mac is not checked).

A box that gains an attribute: add a field to its state model (`SSEState` in
framing_state.py for framing.py's SSEDecoder, `AnthropicState` in
providers/anthropic/state.py, ...) with a default, write it in
the box's `to_state()` and read it back in `from_state()`, checking it against the other
fields where they must agree. A cache or a value derived from others is not saved: the
constructor `from_state` starts from rebuilds it (tests/state/test_state_schema.py lists those,
and fails on an attribute that is in neither). Bump STATE_VERSION with the change.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from typing import Any, TypeVar, cast

import jiter
from pydantic import BaseModel, ValidationError

from .arguments import check_key
from .errors import StateError, StreamfoldError, UsageError, preview
from .limits import MAX_JSON_DEPTH
from .providers import PROVIDERS, decoder_class
from .state_schema import validation_error

# 3: the closed schema (2 and before were a dump of the object graph). A change to a
# box's state model that an older streamfold could not read changes this number; a
# state of another version is refused, never half restored.
STATE_VERSION = 3
# How deep a whole state may nest: the boxes' own levels above the JSON values they keep.
MAX_STATE_DEPTH = MAX_JSON_DEPTH + 24
# The most a state may measure unless restore() is given another bound: a fold within the
# default Limits (64 MiB of input) saves well under it, its text counted twice at most
# (the open slots and the final message) and its framer's bytes as base64.
MAX_STATE_SIZE = 256 * 1024 * 1024
# No count, index or provider number comes near this; a bigger int is refused before it
# could reach int-to-text conversion (limited to 4300 digits).
_MAX_INT_BITS = 256
_VERSION = "streamfold_state"
_MAC = "mac"

# The fold's state model (FoldState); taken as a parameter, so that this module, which
# fold.py calls, does not import fold.py back.
Model = TypeVar("Model", bound=BaseModel)

# Every decoder is imported with this module, so restoring a state imports nothing.
for _name in PROVIDERS:
    decoder_class(_name)


def _key_bytes(key: bytes | str) -> bytes:
    data = check_key("state key", key)  # (a str UTF-8 cannot write: a UsageError too)
    if data is None:
        raise UsageError("state key: expected non-empty bytes or str, got None")
    return data


def _canonical(state: dict[str, Any]) -> bytes:
    """The bytes the MAC covers: the state without its mac, as canonical JSON."""
    body = {name: value for name, value in state.items() if name != _MAC}
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    except (TypeError, ValueError) as exc:
        raise StateError("", f"expected JSON data, got data JSON cannot hold ({exc})") from None
    return text.encode("ascii")


def _mac(state: dict[str, Any], key: bytes | str) -> str:
    return hmac.new(_key_bytes(key), _canonical(state), hashlib.sha256).hexdigest()


def dump_state(state: BaseModel, *, key: bytes | str | None = None) -> dict[str, Any]:
    """The JSON-ready envelope of a fold's state, with its HMAC when `key` is given."""
    out: dict[str, Any] = {_VERSION: STATE_VERSION, "folder": state.model_dump(mode="json")}
    if key is not None:
        out[_MAC] = _mac(out, key)
    return out


def _check_plain_json(state: object, max_size: int) -> None:
    """Refuse anything JSON cannot hold (other types, non-finite floats, text UTF-8
    cannot encode), nesting past MAX_STATE_DEPTH, and a state measuring more than
    `max_size` (the characters of its strings and keys, and one per value: at most its
    JSON text's length), without recursion: a state 400 lists deep must give a
    StateError, not a RecursionError. It stops where the size passes the bound, so
    refusing a huge state costs what accepting `max_size` of one would."""
    size = 0
    stack: list[tuple[object, int, str]] = [(state, 0, "")]
    while stack:
        value, depth, path = stack.pop()
        if depth > MAX_STATE_DEPTH:
            raise StateError(path, f"expected a state at most {MAX_STATE_DEPTH} levels deep")
        items: Any = value.items() if isinstance(value, dict) else enumerate(cast(list[Any], value))
        size += len(cast(Any, value))
        if size > max_size:
            raise _too_big(max_size)
        for name, item in items:
            where = f"{path}[{name}]" if type(name) is int else f"{path}.{name}" if path else name
            if type(name) is str:
                size += len(name)
                _check_text(name, where)
            elif type(value) is dict:
                raise StateError(path, f"expected str keys, got {type(name).__name__}")
            kind = type(item)
            if kind is dict or kind is list:
                stack.append((item, depth + 1, where))
            elif kind is str:
                size += len(item)
                if size > max_size:
                    raise _too_big(max_size)
                _check_text(item, where)
            elif kind is float:
                if not math.isfinite(item):
                    raise StateError(where, f"expected a JSON number, got {item!r}")
            elif kind is int:
                if item.bit_length() > _MAX_INT_BITS:
                    raise StateError(where, f"expected an integer under 2**{_MAX_INT_BITS}")
            elif not (item is None or kind is bool):
                raise StateError(where, f"expected a JSON value, got {kind.__name__}")


def _too_big(max_size: int) -> StateError:
    return StateError(
        "",
        f"expected a state of at most {max_size} characters (restore's max_size), got a larger one",
    )


def _max_size(max_size: object) -> int:
    if max_size is None:
        return MAX_STATE_SIZE
    if type(max_size) is not int or max_size <= 0:
        raise UsageError(f"max_size: expected a positive int, got {preview(max_size, 40)}")
    return max_size


def _parsed(state: str | bytes | bytearray, max_size: int) -> object:
    """A state given as JSON text, parsed once its length is known to be within bounds."""
    if len(state) > max_size:
        raise StateError(
            "",
            f"expected a state of at most {max_size} characters (restore's max_size), "
            f"got {len(state)}",
        )
    data = state.encode("utf-8", "surrogatepass") if isinstance(state, str) else bytes(state)
    try:
        return jiter.from_json(data, allow_inf_nan=False)
    except ValueError as exc:
        raise StateError("", f"expected a state as JSON text, got other text ({exc})") from None


def _check_text(text: str, where: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise StateError(where, "expected text, got a lone surrogate") from None


def load_state(
    state: Any, model: type[Model], *, key: bytes | str | None = None, max_size: object = None
) -> Model:
    """Check a saved state (a dict, or its JSON text) whole and return its validated
    `model`; StateError if not, UsageError for a bad `max_size`."""
    limit = _max_size(max_size)
    if isinstance(state, str | bytes | bytearray):
        state = _parsed(state, limit)
    if not isinstance(state, dict) or _VERSION not in state:
        raise StateError("", f"expected a streamfold state (a dict with {_VERSION!r})")
    version = state[_VERSION]
    if type(version) is not int or version != STATE_VERSION:
        raise StateError(
            _VERSION,
            f"expected a streamfold state of version {STATE_VERSION}, got {preview(version, 40)} "
            "(states are read only by the streamfold version that wrote them)",
        )
    _check_plain_json(state, limit)  # (the top level is a dict: checked above)
    if key is not None:
        mac = state.get(_MAC)
        if not isinstance(mac, str):
            raise StateError(_MAC, "expected the state's HMAC (a key was given), got none")
        if not hmac.compare_digest(mac.encode("ascii", "replace"), _mac(state, key).encode()):
            raise StateError(_MAC, "expected the HMAC of this state under the key, got another")
    extra = set(state) - {_VERSION, "folder", _MAC}
    if extra:
        raise StateError(sorted(extra)[0], "expected no such field")
    try:
        return model.model_validate(state.get("folder"))
    except ValidationError as exc:
        raise validation_error(exc).within("folder") from None
    except StateError:
        raise
    except StreamfoldError as exc:
        # A model's own validation (a tool call's arguments, say) refused a field.
        raise StateError("folder", str(exc)) from None
