"""A real ``redis-server`` for the tests: started on 127.0.0.1 and a free port, with
persistence off (unless a test asks for it), stopped afterwards. No mocks."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REDIS_SERVER = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One ``redis-server`` process; ``start``/``kill``/``stop`` for the fault tests."""

    def __init__(self, workdir: Path, *extra: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.workdir = workdir
        self.extra = list(extra)
        self.proc: subprocess.Popen | None = None

    def start(self) -> Server:
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir)]
        if "--appendonly" not in self.extra:
            args += ["--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen([*args, *self.extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.02)
        msg = f"redis-server did not start on 127.0.0.1:{self.port}"
        raise RuntimeError(msg)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if REDIS_SERVER is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server); the nox session installs it.")
    server = Server(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator:
    """Starts extra servers (``server_factory("--requirepass", "pw")``); all stopped after the test."""
    started: list[Server] = []

    def make(*extra: str) -> Server:
        server = Server(tmp_path, *extra).start()
        started.append(server)
        return server

    yield make
    for s in started:
        s.stop()


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple]:
    """``(port, certificate)`` of a ``redis-server`` listening with TLS only, on a
    self-signed certificate for 127.0.0.1 made with ``openssl`` for the test."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    port = free_port()
    server = Server(
        tmp_path, "--port", "0", "--tls-port", str(port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
        "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no", port=port,
    ).start()
    yield port, cert
    server.stop()


@pytest.fixture
def kw(redis_server: Server) -> dict:
    """Connection keywords of the session server."""
    return {"host": "127.0.0.1", "port": redis_server.port}


@pytest.fixture
def client(redis_server: Server) -> Iterator:
    import redis

    c = redis.Redis(host="127.0.0.1", port=redis_server.port)
    yield c
    c.close()
