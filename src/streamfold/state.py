"""Save a fold's whole state as JSON and restore it, in this process or another.

The state is the object graph of a StreamFolder (framer, decoder, accumulator), written
as tagged JSON: shared mutable objects are written once and referenced after, so an
open part that two tables point at is still one object when restored. Only classes
from streamfold's own modules are restored; anything else in the graph is refused.
"""

from __future__ import annotations

import base64
import importlib
import math
from typing import Any

from pydantic import BaseModel

from .errors import UsageError

# The state is the object graph itself, so a change to what the fold's objects hold
# changes the format: 2 since Accumulator.finished became an attribute (was _finished).
# A state of another version is refused with a clear error, never half restored.
STATE_VERSION = 2
_OWN_MODULES = "streamfold."


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _load_class(path: Any) -> type:
    if not isinstance(path, str) or ":" not in path:
        raise UsageError(f"restore state: expected a class path 'module:Name', got {path!r}")
    module_name, _, qualname = path.partition(":")
    if not (module_name + ".").startswith(_OWN_MODULES):
        raise UsageError(
            f"restore state: expected a streamfold class, got {path!r} (refused: a saved state "
            "may only rebuild streamfold's own objects)"
        )
    try:
        target: Any = importlib.import_module(module_name)
        for name in qualname.split("."):
            target = getattr(target, name)
    except (ImportError, AttributeError):
        raise UsageError(f"restore state: no class {path!r} in this streamfold") from None
    if not isinstance(target, type):
        raise UsageError(f"restore state: expected a class at {path!r}, got {type(target)}")
    return target


def _attributes(obj: object) -> dict[str, Any]:
    names: list[str] = []
    for klass in type(obj).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else slots)
    skip = ("__weakref__", "__dict__")
    values = {n: getattr(obj, n) for n in names if n not in skip and hasattr(obj, n)}
    values.update(getattr(obj, "__dict__", {}))
    return values


class _Dumper:
    def __init__(self) -> None:
        self.ids: dict[int, int] = {}
        self.keep: list[object] = []  # keeps dumped objects alive so their ids stay unique

    def ref(self, obj: object) -> tuple[int, bool]:
        key = id(obj)
        if key in self.ids:
            return self.ids[key], True
        self.ids[key] = len(self.ids)
        self.keep.append(obj)
        return self.ids[key], False

    def dump(self, obj: Any) -> Any:
        if obj is None or type(obj) in (bool, int, str):
            return obj
        if type(obj) is float:
            return obj if math.isfinite(obj) else {"$": "float", "v": repr(obj)}
        if type(obj) is bytes:
            return {"$": "bytes", "v": base64.b64encode(obj).decode()}
        if type(obj) is tuple:
            return {"$": "tuple", "v": [self.dump(x) for x in obj]}
        if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
            # A named tuple (a delta a decoder holds back): immutable, written by value.
            values = [self.dump(x) for x in obj]
            return {"$": "ntuple", "c": _class_path(type(obj)), "v": values}
        if type(obj) is frozenset:
            return {"$": "frozenset", "v": [self.dump(x) for x in obj]}
        if isinstance(obj, BaseModel):
            # streamfold's models are frozen: written by value.
            return {"$": "model", "c": _class_path(type(obj)), "v": obj.model_dump(mode="json")}
        n, seen = self.ref(obj)
        if seen:
            return {"$ref": n}
        if type(obj) is list:
            return {"$": "list", "id": n, "v": [self.dump(x) for x in obj]}
        if type(obj) is dict:
            pairs = [[self.dump(k), self.dump(v)] for k, v in obj.items()]
            return {"$": "dict", "id": n, "v": pairs}
        if type(obj) is set:
            return {"$": "set", "id": n, "v": [self.dump(x) for x in obj]}
        if type(obj) is bytearray:
            return {"$": "bytearray", "id": n, "v": base64.b64encode(obj).decode()}
        module = type(obj).__module__
        if not (module + ".").startswith(_OWN_MODULES):
            raise UsageError(
                "save state: expected plain data or streamfold objects, got "
                f"{type(obj).__qualname__} from {module}"
            )
        entry: dict[str, Any] = {"$": "obj", "id": n, "c": _class_path(type(obj))}
        if isinstance(obj, list):
            entry["items"] = [self.dump(x) for x in obj]
        entry["a"] = {name: self.dump(value) for name, value in _attributes(obj).items()}
        return entry


class _Loader:
    def __init__(self) -> None:
        self.objects: dict[int, Any] = {}

    def load(self, data: Any) -> Any:
        if data is None or isinstance(data, bool | int | float | str):
            return data
        if not isinstance(data, dict):
            raise UsageError(f"restore state: expected a tagged object, got {type(data).__name__}")
        if "$ref" in data:
            try:
                return self.objects[data["$ref"]]
            except (KeyError, TypeError):
                raise UsageError(f"restore state: reference {data['$ref']!r} to nothing") from None
        tag = data.get("$")
        value: Any = data.get("v")
        if tag == "float":
            return float(value)
        if tag == "bytes":
            return base64.b64decode(value)
        if tag == "tuple":
            return tuple(self.load(x) for x in value)
        if tag == "ntuple":
            named: Any = _load_class(data.get("c"))
            return named(*(self.load(x) for x in value))
        if tag == "frozenset":
            return frozenset(self.load(x) for x in value)
        if tag == "model":
            cls = _load_class(data.get("c"))
            if not issubclass(cls, BaseModel):
                raise UsageError(f"restore state: {data.get('c')!r} is not a model")
            return cls.model_validate(value)
        if tag == "list":
            out: list[Any] = []
            self.objects[data["id"]] = out
            out.extend(self.load(x) for x in value)
            return out
        if tag == "dict":
            mapping: dict[Any, Any] = {}
            self.objects[data["id"]] = mapping
            for k, v in value:
                mapping[self.load(k)] = self.load(v)
            return mapping
        if tag == "set":
            items: set[Any] = set()
            self.objects[data["id"]] = items
            items.update(self.load(x) for x in value)
            return items
        if tag == "bytearray":
            buffer = bytearray(base64.b64decode(value))
            self.objects[data["id"]] = buffer
            return buffer
        if tag == "obj":
            klass: Any = _load_class(data.get("c"))
            obj: Any = klass.__new__(klass)
            self.objects[data["id"]] = obj
            if "items" in data:
                obj.extend(self.load(x) for x in data["items"])
            for name, item in data.get("a", {}).items():
                object.__setattr__(obj, name, self.load(item))
            return obj
        raise UsageError(f"restore state: expected a known tag, got {tag!r}")


def dump_state(obj: object) -> dict[str, Any]:
    """The JSON-ready state of a streamfold object graph (a StreamFolder, an Accumulator)."""
    return {"streamfold_state": STATE_VERSION, "root": _Dumper().dump(obj)}


def load_state(state: Any) -> Any:
    """Rebuild the object graph that `dump_state` wrote."""
    if not isinstance(state, dict) or state.get("streamfold_state") != STATE_VERSION:
        got = state.get("streamfold_state") if isinstance(state, dict) else type(state).__name__
        raise UsageError(
            f"restore state: expected a streamfold state of version {STATE_VERSION}, got {got!r}"
        )
    try:
        return _Loader().load(state["root"])
    except UsageError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"restore state: malformed state ({type(exc).__name__}: {exc})") from None
