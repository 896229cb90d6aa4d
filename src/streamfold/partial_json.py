"""An incremental scanner for one JSON value that arrives in fragments.

A tool call's arguments stream as JSON text cut at arbitrary points (inside strings,
escapes, numbers, literals). Re-parsing the whole prefix at every fragment costs time
proportional to the prefix, so a 1 MB argument costs quadratic time. `IncrementalJSON`
keeps the parse state between fragments instead: each `feed()` costs time proportional
to the fragment (inside strings a regex jumps to the next quote or backslash; nothing
is rescanned), and it returns what grew, as changes:

- `("set", path, value)`: a new member or element at `path` (a tuple of keys and
  indexes; `()` is the whole value). `value` is a scalar (a number, true, false, null),
  `""` for a string that just opened, or an empty `{}` / `[]` for a container that just
  opened (its members follow as later changes).
- `("append", path, text)`: more characters of the open string at `path` (escapes
  decoded). At most one append per string per `feed()`.

Numbers are reported once complete, that is when the character after them arrives (a
`2` may still become `23`; a top-level number completes at `close()`); `true`, `false`
and `null` once their last letter arrives. A key is not reported on its own: its member
appears with its value.

`value` is the partial value so far, a live structure of dicts and lists owned by the
scanner (do not mutate it; copy it to keep a snapshot). Only one string can be open at a
time; its text is kept as chunks and joined when `value` is read, then cached: a read
costs O(1) when nothing grew since the last read, else O(length of the open string).
Read the changes, not `value`, at every fragment when the strings are long.

The prefix view agrees with jiter's `partial_mode="trailing-strings"` except that a
number at the very end of the prefix is left out until it is complete (jiter shows
`[1, 2` as `[1, 2]`; here it is `[1]` until the `2` is followed by something), and that
lone surrogate escapes (`"\\ud800"`) are accepted as `json.loads` accepts them (jiter
refuses them). Like jiter, and unlike `json.loads`, `NaN` and `Infinity` are refused.

Invalid text raises `PartialJSONError` (a `StreamfoldError`) naming the character offset
and what was expected; its `changes` are those the failing fragment made before the
fault (they are in `value`). The scanner then stays broken: every later call raises the
same error again.
Text after a complete value that is not whitespace is an error.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from .errors import StreamfoldError

__all__ = [
    "Change",
    "IncrementalJSON",
    "PartialJSONError",
    "Path",
    "apply_change",
    "partial_arguments",
]

Path = tuple[str | int, ...]
# ("set", path, value) or ("append", path, text); plain tuples, built per fragment.
Change = tuple[Literal["set", "append"], Path, Any]


class PartialJSONError(StreamfoldError, ValueError):
    """The text is not a prefix of one JSON value (or has more after the value)."""

    def __init__(self, offset: int, expected: str, got: str) -> None:
        self.offset = offset
        self.expected = expected
        self.got = got
        # The changes the failing feed() made before the fault (already in `value`).
        self.changes: tuple[Change, ...] = ()
        super().__init__(f"invalid JSON at offset {offset}: expected {expected}, got {got}")


# Scanner states.
_VALUE = 0  # a value must come (after ':' or ',' in an array, or at the start)
_ARRAY_FIRST = 1  # after '[': a value or ']'
_OBJ_FIRST = 2  # after '{': a key or '}'
_OBJ_KEY = 3  # after ',' in an object: a key
_COLON = 4  # after a key: ':'
_AFTER = 5  # after a value in a container: ',' or the closing bracket
_STRING = 6  # inside a string (a key or a value)
_ESCAPE = 7  # inside a backslash escape (self._esc holds it so far)
_SURROGATE = 8  # after a high surrogate escape: a low one may follow
_NUMBER = 9  # inside a number (self._num holds its pieces)
_LITERAL = 10  # inside true / false / null (self._lit holds it so far)
_DONE = 11  # the value is complete: only whitespace may follow

_STRING_RUN = re.compile(r'[^"\\\x00-\x1f]*').match
_WHITESPACE = re.compile(r"[ \t\n\r]*").match
_NUMBER_RUN = re.compile(r"[-+0-9.eE]*").match
_NUMBER_FULL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\Z").match
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_LITERALS = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}
_WS_CHARS = frozenset(" \t\n\r")
_EXPECTED = {
    _VALUE: "a value",
    _ARRAY_FIRST: "a value or ']'",
    _OBJ_FIRST: "'\"' (a key) or '}'",
    _OBJ_KEY: "'\"' (a key)",
    _COLON: "':'",
    _DONE: "the end of the text (the value is complete)",
}


class IncrementalJSON:
    """Scan one JSON value fed in fragments; see the module docstring for the changes.

    `feed(fragment)` -> the changes it caused; `close()` at the end of the text (it
    completes a top-level number, and raises if the value is incomplete); `value`, the
    partial value; `started` / `complete`; `offset`, characters consumed so far.
    """

    __slots__ = (
        "_chunks",
        "_containers",
        "_dirty",
        "_error",
        "_esc",
        "_high",
        "_is_key",
        "_keys",
        "_lit",
        "_num",
        "_num_start",
        "_offset",
        "_paths",
        "_pieces",
        "_root",
        "_started",
        "_state",
        "_str_key",
        "_str_parent",
        "_str_path",
    )

    def __init__(self) -> None:
        self._state = _VALUE
        self._offset = 0
        self._root: Any = None
        self._started = False
        self._error: PartialJSONError | None = None
        # Open containers, innermost last: the live dict/list, its path, and (objects)
        # the key whose value comes next.
        self._containers: list[dict[str, Any] | list[Any]] = []
        self._paths: list[Path] = []
        self._keys: list[str | None] = []
        # The open string: chunks joined on read, this fragment's pieces, where it lives.
        self._chunks: list[str] = []
        self._pieces: list[str] = []
        self._is_key = False
        self._dirty = False
        self._str_parent: dict[str, Any] | list[Any] | None = None
        self._str_key: str | int | None = None
        self._str_path: Path = ()
        self._esc = ""
        self._high = -1  # a pending high surrogate's code point
        self._num: list[str] = []
        self._num_start = 0
        self._lit = ""

    # --- reading --------------------------------------------------------------------

    @property
    def value(self) -> Any:
        """The partial value (None before it starts): O(open string) if it grew, else O(1)."""
        if self._dirty:
            self._dirty = False
            chunks = self._chunks
            if len(chunks) > 1:
                chunks[:] = ["".join(chunks)]
            text = chunks[0] if chunks else ""
            parent = self._str_parent
            if parent is None:
                self._root = text
            else:
                parent[self._str_key] = text  # type: ignore[index]
        return self._root

    @property
    def started(self) -> bool:
        """True once the value's first character arrived."""
        return self._started

    @property
    def complete(self) -> bool:
        """True once the whole value arrived (a top-level number: after `close()`)."""
        return self._state == _DONE

    @property
    def offset(self) -> int:
        """Characters consumed so far."""
        return self._offset

    def is_open(self, path: Path) -> bool:
        """True while the value at `path` still grows: an open container or string.

        A value that closed does so without a change (a closing bracket adds nothing),
        so a consumer that acts on complete values asks here.
        """
        paths = self._paths
        depth = len(path)
        if depth < len(paths) and paths[depth] == path:
            return True
        return _STRING <= self._state <= _SURROGATE and not self._is_key and self._str_path == path

    # --- feeding --------------------------------------------------------------------

    def feed(self, text: str) -> list[Change]:
        """Scan one more fragment; return the changes it caused, in order."""
        if self._state == _STRING and not self._pieces and self._error is None:
            # The common fragment: more plain characters of an open string.
            end = _STRING_RUN(text).end()  # type: ignore[union-attr]  # `*`: always matches
            if end == len(text):
                self._offset += end
                if not end:
                    return []
                self._chunks.append(text)
                if self._is_key:
                    return []
                self._dirty = True
                return [("append", self._str_path, text)]
        if self._error is not None:
            raise self._error
        changes: list[Change] = []
        try:
            self._scan(text, changes)
        except PartialJSONError as exc:
            exc.changes = tuple(changes)
            self._error = exc
            raise
        self._offset += len(text)
        return changes

    def close(self) -> list[Change]:
        """The text ended: complete a top-level number; raise if the value is incomplete."""
        if self._error is not None:
            raise self._error
        changes: list[Change] = []
        if self._state == _NUMBER and not self._containers:
            self._end_number(changes, self._offset)
        if self._state != _DONE:
            expected = _EXPECTED.get(self._state, "more of the value")
            self._error = PartialJSONError(self._offset, expected, "the end of the text")
            raise self._error
        return changes

    def _fail(self, offset: int, expected: str, got: str) -> PartialJSONError:
        return PartialJSONError(self._offset + offset, expected, got)

    def _scan(self, text: str, changes: list[Change]) -> None:
        i = 0
        n = len(text)
        pieces = self._pieces
        while i < n:
            state = self._state
            if state == _STRING:
                j = _STRING_RUN(text, i).end()  # type: ignore[union-attr]  # `*`: always matches
                if j > i:
                    pieces.append(text[i:j])
                    i = j
                    if i == n:
                        break
                c = text[i]
                i += 1
                if c == '"':
                    self._end_string(changes)
                elif c == "\\":
                    self._esc = "\\"
                    self._state = _ESCAPE
                else:
                    raise self._fail(i - 1, "a string character or '\"'", repr(c))
                continue
            if state == _ESCAPE:
                i = self._escape(text, i)
                continue
            if state == _SURROGATE:
                if text[i] == "\\":
                    i += 1
                    self._esc = "\\"
                    self._state = _ESCAPE
                else:
                    pieces.append(chr(self._high))
                    self._high = -1
                    self._state = _STRING
                continue
            if state == _NUMBER:
                j = _NUMBER_RUN(text, i).end()  # type: ignore[union-attr]  # `*`: always matches
                self._num.append(text[i:j])
                i = j
                if i < n:
                    self._end_number(changes, i)
                continue
            if state == _LITERAL:
                word, scalar = _LITERALS[self._lit[0]]
                need = len(word) - len(self._lit)
                got = text[i : i + need]
                if not word.startswith(got, len(self._lit)):
                    bad = next(k for k, ch in enumerate(got) if ch != word[len(self._lit) + k])
                    raise self._fail(i + bad, repr(word), repr(self._lit + got[: bad + 1]))
                self._lit += got
                i += len(got)
                if len(self._lit) == len(word):
                    self._put(scalar, scalar, changes)
                    self._after_value()
                continue
            c = text[i]
            if c in _WS_CHARS:
                i = _WHITESPACE(text, i).end()  # type: ignore[union-attr]  # `*`: always matches
                continue
            if state == _AFTER:
                i += 1
                top = self._containers[-1]
                if c == ",":
                    self._state = _OBJ_KEY if type(top) is dict else _VALUE
                elif (c == "}" and type(top) is dict) or (c == "]" and type(top) is list):
                    self._pop()
                else:
                    closer = "'}'" if type(top) is dict else "']'"
                    raise self._fail(i - 1, f"',' or {closer}", repr(c))
                continue
            if state in (_VALUE, _ARRAY_FIRST):
                i += 1
                if c == '"':
                    self._started = True
                    path = self._put("", "", changes)
                    self._open_string(False, path)
                elif c == "{":
                    self._started = True
                    live: dict[str, Any] = {}
                    path = self._put({}, live, changes)
                    self._push(live, path)
                    self._state = _OBJ_FIRST
                elif c == "[":
                    self._started = True
                    items: list[Any] = []
                    path = self._put([], items, changes)
                    self._push(items, path)
                    self._state = _ARRAY_FIRST
                elif c == "]" and state == _ARRAY_FIRST:
                    self._pop()
                elif c == "-" or "0" <= c <= "9":
                    self._started = True
                    self._num_start = self._offset + i - 1
                    j = _NUMBER_RUN(text, i).end()  # type: ignore[union-attr]  # `*`: always matches
                    self._num = [text[i - 1 : j]]
                    i = j
                    self._state = _NUMBER
                    if i < n:
                        self._end_number(changes, i)
                elif c in _LITERALS:
                    self._started = True
                    self._lit = c
                    self._state = _LITERAL
                else:
                    raise self._fail(i - 1, _EXPECTED[state], repr(c))
                continue
            if state in (_OBJ_FIRST, _OBJ_KEY):
                i += 1
                if c == '"':
                    self._open_string(True, ())
                elif c == "}" and state == _OBJ_FIRST:
                    self._pop()
                else:
                    raise self._fail(i - 1, _EXPECTED[state], repr(c))
                continue
            if state == _COLON:
                i += 1
                if c != ":":
                    raise self._fail(i - 1, "':'", repr(c))
                self._state = _VALUE
                continue
            raise self._fail(i, _EXPECTED[_DONE], repr(c))
        if pieces:
            self._flush(changes)

    # --- strings --------------------------------------------------------------------

    def _open_string(self, is_key: bool, path: Path) -> None:
        self._state = _STRING
        self._is_key = is_key
        self._chunks = []
        if not is_key:
            self._str_path = path
            if self._containers:
                parent = self._containers[-1]
                self._str_parent = parent
                self._str_key = self._keys[-1] if type(parent) is dict else len(parent) - 1
            else:
                self._str_parent = None
                self._str_key = None

    def _flush(self, changes: list[Change]) -> None:
        pieces = self._pieces
        text = pieces[0] if len(pieces) == 1 else "".join(pieces)
        pieces.clear()
        if text:
            self._chunks.append(text)
            if not self._is_key:
                self._dirty = True
                changes.append(("append", self._str_path, text))

    def _end_string(self, changes: list[Change]) -> None:
        if self._pieces:
            self._flush(changes)
        chunks = self._chunks
        text = chunks[0] if len(chunks) == 1 else "".join(chunks)
        self._chunks = []
        if self._is_key:
            self._keys[-1] = text
            self._state = _COLON
            return
        self._dirty = False
        parent = self._str_parent
        if parent is None:
            self._root = text
        else:
            parent[self._str_key] = text  # type: ignore[index]
        self._str_parent = None
        self._after_value()

    def _escape(self, text: str, i: int) -> int:
        """Consume escape characters from text[i:]; return the next index."""
        n = len(text)
        esc = self._esc
        while i < n:
            c = text[i]
            if len(esc) == 1:
                if c == "u":
                    esc = "\\u"
                    i += 1
                    continue
                simple = _SIMPLE_ESCAPES.get(c)
                if simple is None:
                    raise self._fail(i, 'an escape (one of "\\/bfnrtu)', repr(c))
                if self._high >= 0:
                    self._pieces.append(chr(self._high))
                    self._high = -1
                self._pieces.append(simple)
                self._state = _STRING
                return i + 1
            if c not in _HEX:
                raise self._fail(i, "a hex digit of a \\u escape", repr(c))
            esc += c
            i += 1
            if len(esc) == 6:
                code = int(esc[2:], 16)
                if self._high >= 0:
                    if 0xDC00 <= code <= 0xDFFF:
                        self._pieces.append(
                            chr(0x10000 + ((self._high - 0xD800) << 10) + code - 0xDC00)
                        )
                        self._high = -1
                        self._state = _STRING
                        return i
                    self._pieces.append(chr(self._high))
                    self._high = -1
                if 0xD800 <= code <= 0xDBFF:
                    self._high = code
                    self._state = _SURROGATE
                else:
                    self._pieces.append(chr(code))
                    self._state = _STRING
                return i
        self._esc = esc
        return i

    # --- numbers --------------------------------------------------------------------

    def _end_number(self, changes: list[Change], i: int) -> None:
        """The number in self._num is over (text[i] is not part of it)."""
        pieces = self._num
        token = pieces[0] if len(pieces) == 1 else "".join(pieces)
        self._num = []
        if _NUMBER_FULL(token) is None:
            raise PartialJSONError(self._num_start, "a JSON number", repr(token))
        try:
            number: int | float = (
                float(token) if "." in token or "e" in token or "E" in token else int(token)
            )
        except ValueError:  # more digits than int() converts
            raise PartialJSONError(
                self._num_start, "a number int() can convert", repr(token[:40])
            ) from None
        self._put(number, number, changes)
        self._after_value()

    # --- containers -----------------------------------------------------------------

    def _put(self, value: Any, live: Any, changes: list[Change]) -> Path:
        """Add a value to the open container (or make it the root); report it."""
        containers = self._containers
        if not containers:
            self._root = live
            path: Path = ()
        else:
            top = containers[-1]
            if type(top) is dict:
                key = self._keys[-1]
                assert key is not None
                top[key] = live
                path = (*self._paths[-1], key)
            else:
                path = (*self._paths[-1], len(top))
                top.append(live)  # type: ignore[union-attr]
        changes.append(("set", path, value))
        return path

    def _push(self, container: dict[str, Any] | list[Any], path: Path) -> None:
        self._containers.append(container)
        self._paths.append(path)
        self._keys.append(None)

    def _pop(self) -> None:
        self._containers.pop()
        self._paths.pop()
        self._keys.pop()
        self._after_value()

    def _after_value(self) -> None:
        self._state = _AFTER if self._containers else _DONE


def apply_change(root: Any, change: Change) -> Any:
    """Apply one change to `root` (None before the first); return the new root.

    Empty containers are copied, so two consumers of the same changes never share one.
    An append to a string costs O(its length): this is a reference, not a fast path.
    """
    op, path, value = change
    if op == "set" and type(value) in (dict, list):
        value = type(value)()
    if not path:
        return value if op == "set" else root + value
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if op == "append":
        parent[key] += value
    elif type(parent) is list and key == len(parent):
        parent.append(value)
    else:
        parent[key] = value
    return root


def partial_arguments(call: Any) -> Any:
    """The arguments of a (snapshot's) ToolCall as parsed so far.

    A dict when the call is complete; for an incomplete call, the partial value of its
    argument text (O(its length): the text is scanned once); None when nothing arrived
    or the text is not the start of a JSON value.
    """
    arguments = getattr(call, "arguments", call)
    if arguments is None or isinstance(arguments, dict):
        return arguments
    scanner = IncrementalJSON()
    try:
        scanner.feed(str(arguments))
    except PartialJSONError:
        return None
    return scanner.value
