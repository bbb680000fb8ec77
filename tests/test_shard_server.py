"""A Spark shard server survives bad clients (issue 18, case 9): a wrong key, or a client
that connects and never speaks, neither stops it nor reaches it; its key file and socket
are owner-only from their creation."""

from __future__ import annotations

import os
import secrets
import socket
import stat
import subprocess
import sys
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client

import pytest


@pytest.fixture
def server(tmp_path):
    address, keyfile = str(tmp_path / "s.sock"), tmp_path / "s.key"
    fd = os.open(keyfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, secrets.token_bytes(32))
    os.close(fd)
    proc = subprocess.Popen([sys.executable, "-c", "from upkeep.spark.shards import main; main()",
                             address, str(keyfile), str(os.getpid())])
    deadline = time.monotonic() + 30
    while not os.path.exists(address):
        assert time.monotonic() < deadline and proc.poll() is None, "the server did not start"
        time.sleep(0.05)
    yield address, keyfile.read_bytes()
    proc.kill()
    proc.wait()


def ask_stats(address: str, key: bytes) -> dict:
    with Client(address, "AF_UNIX", authkey=key) as conn:
        conn.send(("stats", None, None))
        status, stats = conn.recv()
    assert status == "ok"
    return stats


def test_a_wrong_key_or_a_silent_client_does_not_stop_the_server(server) -> None:
    address, key = server
    assert stat.S_IMODE(os.stat(address).st_mode) & 0o077 == 0
    silent = socket.socket(socket.AF_UNIX)
    silent.connect(address)  # connects and never answers the challenge
    for _ in range(3):
        with pytest.raises((AuthenticationError, EOFError, ConnectionError)):
            Client(address, "AF_UNIX", authkey=b"not the key")
    assert ask_stats(address, key) == {"loads": 0, "applies": 0}
    silent.close()
    assert ask_stats(address, key) == {"loads": 0, "applies": 0}


def test_the_key_file_is_created_owner_only(tmp_path, monkeypatch) -> None:
    from upkeep.spark import shard_client

    opened: list[int] = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *args, **kwargs):
        if str(path).endswith(".key"):
            opened.append(mode)
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    monkeypatch.setattr(shard_client.tempfile, "gettempdir", lambda: str(tmp_path))
    address, keyfile = shard_client._address(0, owner=os.getpid())
    # no server is running (Client refuses); the one spawned only creates its socket file
    monkeypatch.setattr(shard_client.subprocess, "Popen",
                        lambda *a, **k: open(address, "w").close())
    monkeypatch.setattr(shard_client, "Client", _refuse)
    shard_client._spawn(0, address, keyfile)
    assert opened == [0o600]
    assert stat.S_IMODE(keyfile.stat().st_mode) == 0o600


def _refuse(*args, **kwargs):
    raise ConnectionRefusedError
