"""A real uvicorn server on a free 127.0.0.1 port, in a thread, for the HTTP tests."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Serve `app` until the block ends; yields its base URL."""
    import uvicorn

    # The socket is bound here and handed to uvicorn, so no other process can take the
    # port between choosing it and listening on it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="auto"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive(), "uvicorn stopped before it started"
            assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def bedrock_client(base_url: str, headers: dict[str, str] | None = None) -> Any:
    """botocore's bedrock-runtime client (boto3's, without boto3) at a serve, with dummy
    credentials; `headers` go on every request (`x-streamfold-recording` picks one)."""
    from botocore.session import get_session

    client = get_session().create_client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=base_url,
        aws_access_key_id="streamfold",
        aws_secret_access_key="streamfold",
    )
    if headers:

        def add_headers(request: Any, **_: Any) -> None:
            for name, value in headers.items():
                request.headers[name] = value

        client.meta.events.register("before-sign.bedrock-runtime.*", add_headers)
    return client
