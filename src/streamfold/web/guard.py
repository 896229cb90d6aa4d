"""The door of streamfold's web routes: every request is checked before a handler sees it.

    app = Starlette(routes=[...], middleware=[Middleware(RequestGuard)])

- **Host**: only the names in `allowed_hosts` (any port) are served, loopback names by
  default; a Host header that is not a name or a bracketed IPv6 address with an optional
  numeric port (`[::1]evil.com`, `localhost:evil`) is refused. A page on another site
  that rebinds its own DNS name to 127.0.0.1 still sends its own name as `Host`, so it is
  refused (403) instead of reading the local server.
- **Content-Type**: a POST (PUT, PATCH, DELETE) must say `application/json` (415). The
  types a web page may send across origins without asking (text/plain, forms) never are,
  so a page elsewhere cannot make this server act. On the paths in `aws_signed_paths`
  only (Bedrock's), a request signed for AWS (SigV4 `Authorization`) may leave the type
  out, as botocore does: a page cannot send that header without asking either.
- **Size**: a body is read as it arrives, at most `max_body` bytes (413 past that,
  whatever `Content-Length` says), so one request cannot take the server's memory.
- **JSON**: `read_json` parses a body nested at most a few hundred levels deep; a deeper
  or malformed one is a 400, never a `RecursionError`.

Refusals are JSON in the route's own error shape: `error_body(path, status, message)`
builds it (by default `{"error": {"message": ...}}`, the demo routes' shape).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Any

import jiter

from ..errors import UsageError, preview

try:
    from starlette.datastructures import Headers
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise UsageError(
        "streamfold's web routes need starlette: pip install 'streamfold[serve]'"
    ) from exc

LOOPBACK_HOSTS: frozenset[str] = frozenset({"localhost", "127.0.0.1", "::1"})
"""The Host names a server bound to loopback answers (with any port)."""

DEFAULT_MAX_BODY = 1024 * 1024
"""The largest request body read by default (1 MiB): a chat request is a few KiB."""

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

ErrorBody = Callable[[str, int, str], dict[str, Any]]
"""(request path, status, message) -> the JSON error body that route's clients expect."""


class RequestRefused(Exception):
    """A request the guard (or a handler reading its body) turns away with `status`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def plain_error(path: str, status: int, message: str) -> dict[str, Any]:
    """The demo routes' error body: `{"error": {"message": ...}}`."""
    return {"error": {"message": message}}


# A Host header as RFC 9110 has it: a name (or IPv4 address), or an IPv6 address in
# brackets, then an optional port of digits, and nothing else. Anything looser lets a
# header such as `[::1]evil.com` or `localhost:evil` pass as a loopback name.
_HOST = re.compile(
    r"(?:\[(?P<ip6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?))(?::[0-9]{0,5})?"
)


def host_name(header: str) -> str | None:
    """The name in a Host header, lower case, without port or IPv6 brackets; None if the
    header is not a name or bracketed IPv6 address with an optional numeric port."""
    match = _HOST.fullmatch(header.strip().lower())
    if match is None:
        return None
    return match["ip6"] or match["name"]


def _allowed_name(name: str) -> str:
    """A name given to `allowed_hosts`, as `host_name` spells it (`[::1]` or `::1`)."""
    value = name.strip().lower()
    return host_name(value) or value.strip("[]")


def is_json_type(content_type: str | None) -> bool:
    """True for `application/json`, with or without parameters (charset...)."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


class RequestGuard:
    """ASGI middleware: Host allowlist, JSON-only bodies, a body size limit (see module)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body: int = DEFAULT_MAX_BODY,
        allowed_hosts: Collection[str] | None = LOOPBACK_HOSTS,
        error_body: ErrorBody = plain_error,
        aws_signed_paths: tuple[str, ...] = (),
    ) -> None:
        if max_body < 0:
            raise UsageError(f"max_body: expected a number of bytes >= 0, got {max_body}")
        self.app = app
        self.max_body = max_body
        # None or "*" among them: any Host (a server reachable by its address anyway).
        names = None if allowed_hosts is None else {_allowed_name(h) for h in allowed_hosts}
        self.allowed_hosts = None if names is None or "*" in names else frozenset(names)
        self.error_body = error_body
        self.aws_signed_paths = aws_signed_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            self._check_headers(scope)
            if scope["method"] in _BODY_METHODS:
                body = await self._read_body(receive)
                receive = _replay(body, receive)
        except RequestRefused as exc:
            response = JSONResponse(
                self.error_body(scope["path"], exc.status, exc.message), exc.status
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _check_headers(self, scope: Scope) -> None:
        headers = Headers(scope=scope)
        if self.allowed_hosts is not None:
            host = headers.get("host", "")
            if host_name(host) not in self.allowed_hosts:
                raise RequestRefused(
                    403,
                    f"Host {preview(host, 100)} is not served here: expected one of "
                    f"{sorted(self.allowed_hosts)} (with any numeric port; see --allow-host)",
                )
        if scope["method"] not in _BODY_METHODS:
            return
        content_type = headers.get("content-type")
        # A request signed for AWS (botocore leaves out Content-Type when its caller does,
        # and Bedrock reads the body as JSON then): no page can send that header without
        # a CORS preflight, which is what requiring application/json achieves.
        # Only on the routes AWS clients call: elsewhere the header proves nothing wanted.
        aws_signed = (
            content_type is None
            and scope["path"].startswith(self.aws_signed_paths)
            and headers.get("authorization", "").startswith("AWS4-HMAC-SHA256 ")
        )
        if not is_json_type(content_type) and not aws_signed:
            raise RequestRefused(
                415, f"expected Content-Type: application/json, got {content_type!r}"
            )
        # Refused before a byte is read when it says it is too large (digits compared by
        # length first: int() refuses thousands of them); never trusted when it says less.
        declared = headers.get("content-length", "").lstrip("0")
        if declared.isdigit() and (len(declared) > 18 or int(declared) > self.max_body):
            raise RequestRefused(413, self._too_large(f"{declared[:40]} bytes"))

    async def _read_body(self, receive: Receive) -> bytes:
        # The declared length is not trusted: the bytes are counted as they come.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away; the handler sees an empty body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise RequestRefused(413, self._too_large(f"more than {self.max_body} bytes"))
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    def _too_large(self, got: str) -> str:
        return f"expected a request body of at most {self.max_body} bytes, got {got}"


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body already read, then what the client sends next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def read_json(request: Request) -> Any:
    """The request body as JSON; RequestRefused(400) if it is not JSON or nests too deep."""
    raw = await request.body()
    try:
        # jiter stops at a fixed depth (a ValueError), far below Python's recursion limit.
        return jiter.from_json(raw, allow_inf_nan=False)
    except ValueError as exc:
        raise RequestRefused(400, f"the request body is not valid JSON: {exc}") from None


__all__ = [
    "DEFAULT_MAX_BODY",
    "LOOPBACK_HOSTS",
    "ErrorBody",
    "RequestGuard",
    "RequestRefused",
    "host_name",
    "is_json_type",
    "plain_error",
    "read_json",
]
