"""A real `redis-server` for the relay tests and benchmark: on 127.0.0.1, a free port, a temp dir.

server = RedisServer(tmp_dir)            # --save '' --appendonly no (nothing on disk)
server = RedisServer(tmp_dir, persistent=True)   # AOF, fsync on every write
server.start(); server.url; server.stop(kill=True); server.start()  # same port, same dir
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

REDIS_SERVER = shutil.which("redis-server")
SKIP_REASON = "redis-server is not on PATH (apt-get install redis-server)"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One redis-server process; `start()` again after `stop()` reuses the port and dir."""

    def __init__(
        self, directory: Path, *, persistent: bool = False, maxclients: int = 10_000
    ) -> None:
        if REDIS_SERVER is None:
            raise RuntimeError(SKIP_REASON)
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.persistent = persistent
        self.maxclients = maxclients
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _command(self) -> list[str]:
        assert REDIS_SERVER is not None
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "always"]
            if self.persistent
            else ["--appendonly", "no"]
        )
        return [
            REDIS_SERVER,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--protected-mode", "yes",
            "--save", "",
            *persistence,
            "--dir", str(self.directory),
            "--daemonize", "no",
            "--maxclients", str(self.maxclients),
            "--loglevel", "warning",
        ]  # fmt: skip

    def start(self, timeout: float = 10.0) -> None:
        """Start (or restart on the same port) and wait until it answers PING."""
        for _attempt in range(5):
            if not self.port:
                self.port = free_port()
            log = (self.directory / "redis.log").open("ab")
            self.process = subprocess.Popen(
                self._command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.directory
            )
            log.close()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break  # the port was taken, say: try another (first start only)
                if _ping(self.port):
                    return
                time.sleep(0.02)
            self.stop(kill=True)
            if self.persistent and self.process is not None:
                break
            self.port = 0
        log_text = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"redis-server did not start on 127.0.0.1: {log_text}")

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server: SIGKILL (a crash) or SIGTERM (a clean shutdown)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
