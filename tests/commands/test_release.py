"""fetch-release against a local HTTP server: download, resume (across runs and after a dropped
connection), size and checksum checks, safe unpacking, and fast failures."""

from __future__ import annotations

import errno
import hashlib
import http.server
import io
import os
import socket
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from lra.tasks import retrieval

from lra import data, release, tasks

TSV_ROW = b"1.0\tA\tB\tfirst document\tsecond document\n"


@dataclass
class ServerState:
    blob: bytes = b""
    honour_range: bool = True
    cut_after: int | None = None  # the first GET sends this many bytes, then drops the connection
    requests: list = field(default_factory=list)  # (method, Range header)
    served: int = 0  # body bytes sent


class Handler(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        state: ServerState = self.server.state
        wanted = self.headers.get("Range")
        state.requests.append((self.command, wanted))
        if self.path != "/lra_release.gz":
            self.send_error(404)
            return
        blob, start = state.blob, 0
        if wanted and state.honour_range:
            start = int(wanted.removeprefix("bytes=").split("-")[0])
            if start >= len(blob):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(blob)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(blob) - 1}/{len(blob)}")
        else:
            self.send_response(200)
        body = blob[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return
        if state.cut_after is not None:
            body, state.cut_after = body[:state.cut_after], None
            self.close_connection = True
        # counted before the write: the client can finish reading (and the test assert) before
        # this thread runs a line after it (seen on a loaded host)
        state.served += len(body)
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.state = ServerState()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    httpd.url = f"http://127.0.0.1:{httpd.server_port}/lra_release.gz"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def archive(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info, content in members:
            if content is not None:
                info.size = len(content)
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return buffer.getvalue()


def file_member(name: str, content: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), content


def release_archive() -> bytes:
    """A miniature lra_release: the AAN files plus 100 KB of noise, so that a download has parts."""
    noise = np.random.default_rng(0).integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    members = [file_member(f"lra_release/lra_release/tsv_data/{name}", TSV_ROW * 3)
               for name in retrieval.FILES.values()]
    return archive([*members, file_member("lra_release/noise.bin", noise)])


def fetch(url: str, out: Path, **kwargs) -> Path:
    return release.fetch_release(out, url=url, progress=False, retry_wait=0.0, **kwargs)


def test_downloads_verifies_unpacks_and_the_tasks_find_it(server, tmp_path, capsys):
    blob = server.state.blob = release_archive()
    digest = hashlib.sha256(blob).hexdigest()
    out = tmp_path / "data"
    fetch(server.url, out, sha256=digest.upper())
    assert (out / "lra_release.gz").read_bytes() == blob
    assert (out / "lra_release.gz.sha256").read_text() == f"{digest}  lra_release.gz\n"
    assert f"sha256 {digest}" in capsys.readouterr().err
    assert server.state.requests == [("HEAD", None), ("GET", None)]  # the probe, then the file
    assert sorted(p.name for p in out.iterdir()) == [
        ".lra_release.gz.extracted", "lra_release", "lra_release.gz", "lra_release.gz.sha256"]
    task = tasks.build("retrieval", out, max_length=32)
    assert task.directory == out / "lra_release" / "lra_release" / "tsv_data"
    assert len(task.source("train")) == 3

    fetch(server.url, out)  # again: neither downloaded nor unpacked a second time
    assert len(server.state.requests) == 2
    assert "already unpacked" in capsys.readouterr().err


def test_the_command_line_fetches_and_can_delete_the_archive(server, tmp_path, capsys):
    server.state.blob = release_archive()
    out = tmp_path / "data"
    assert data.main(["fetch-release", "--url", server.url, "--out", str(out), "--no-progress",
                      "--delete-archive"]) == 0
    assert capsys.readouterr().out.splitlines() == [str(out / "lra_release")]
    assert not (out / "lra_release.gz").exists() and (out / "lra_release.gz.sha256").exists()
    assert data.main(["fetch-release", "--url", server.url, "--out", str(out), "--no-progress"]) == 0
    assert [method for method, _ in server.state.requests] == ["HEAD", "GET"]  # not again


def test_a_partial_file_is_resumed_with_a_range_request(server, tmp_path):
    blob = server.state.blob = release_archive()
    out = tmp_path / "data"
    out.mkdir()
    (out / "lra_release.gz.part").write_bytes(blob[:30_000])
    fetch(server.url, out, sha256=hashlib.sha256(blob).hexdigest())
    assert server.state.requests[1:] == [("GET", "bytes=30000-")]
    assert server.state.served == len(blob) - 30_000
    assert (out / "lra_release.gz").read_bytes() == blob and not (out / "lra_release.gz.part").exists()


def test_a_dropped_connection_resumes_in_the_same_run(server, tmp_path, capsys):
    blob = server.state.blob = release_archive()
    server.state.cut_after = 20_000
    fetch(server.url, tmp_path, sha256=hashlib.sha256(blob).hexdigest())
    assert server.state.requests[1:] == [("GET", None), ("GET", "bytes=20000-")]
    assert (tmp_path / "lra_release.gz").read_bytes() == blob
    assert "resuming at byte 20000" in capsys.readouterr().err


def test_a_server_that_ignores_range_makes_it_start_over(server, tmp_path):
    blob = server.state.blob = release_archive()
    server.state.honour_range = False
    (tmp_path / "lra_release.gz.part").write_bytes(b"stale bytes from another file")
    fetch(server.url, tmp_path, sha256=hashlib.sha256(blob).hexdigest())
    assert (tmp_path / "lra_release.gz").read_bytes() == blob


def test_a_complete_part_file_is_not_downloaded_again(server, tmp_path):
    blob = server.state.blob = release_archive()
    (tmp_path / "lra_release.gz.part").write_bytes(blob)
    fetch(server.url, tmp_path)
    assert server.state.requests[1:] == [("GET", f"bytes={len(blob)}-")] and server.state.served == 0
    assert (tmp_path / "lra_release.gz").read_bytes() == blob


def test_a_wrong_checksum_deletes_the_file_and_unpacks_nothing(server, tmp_path):
    server.state.blob = release_archive()
    with pytest.raises(release.ReleaseError, match="does not match the expected 0000"):
        fetch(server.url, tmp_path, sha256="0" * 64)
    assert list(tmp_path.iterdir()) == []


def _link(name: str, target: str, kind=tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


@pytest.mark.parametrize("bad, name", [
    (file_member("lra_release/../../evil.txt", b"evil"), "lra_release/../../evil.txt"),
    (file_member("ABSOLUTE/evil.txt", b"evil"), "ABSOLUTE/evil.txt"),
    (_link("lra_release/escape", "../../evil.txt"), "lra_release/escape"),
    (_link("lra_release/passwd", "/etc/passwd"), "lra_release/passwd"),
    (_link("lra_release/hard", "../evil.txt", tarfile.LNKTYPE), "lra_release/hard"),
])
def test_unsafe_members_are_refused_and_nothing_is_written(server, tmp_path, bad, name):
    out = tmp_path / "deep" / "data"
    if name.startswith("ABSOLUTE"):
        name = str(tmp_path / "evil.txt")
        bad[0].name = name
    server.state.blob = archive([file_member("lra_release/fine.txt", b"fine"), bad])
    with pytest.raises(release.ReleaseError) as err:
        fetch(server.url, out)
    message = str(err.value)
    assert f"refusing to unpack: member {name!r} is unsafe" in message
    assert "nothing was unpacked" in message
    assert sorted(p.name for p in out.iterdir()) == ["lra_release.gz", "lra_release.gz.sha256"]
    assert not [p for p in tmp_path.rglob("*") if "evil" in p.name or p.name in ("passwd", "hard")]


@pytest.mark.slow
def test_no_network_fails_within_seconds(tmp_path):
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        start = time.perf_counter()
        with pytest.raises(release.ReleaseError, match=r"cannot reach 127\.0\.0\.1"):
            fetch(f"http://127.0.0.1:{silent.getsockname()[1]}/lra_release.gz", tmp_path)
        assert time.perf_counter() - start < 10
    assert list(tmp_path.iterdir()) == []


def test_http_errors_are_reported_at_once(server, tmp_path):
    with pytest.raises(release.ReleaseError, match="HTTP 404"):
        fetch(server.url.replace("lra_release.gz", "missing.gz"), tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.stat().st_size]


def test_a_corrupt_archive_is_reported(server, tmp_path):
    server.state.blob = release_archive()[:5_000]  # a truncated gzip, served as complete
    with pytest.raises(release.ReleaseError, match="cannot unpack it"):
        fetch(server.url, tmp_path)
    assert not (tmp_path / "lra_release").exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".extracting")]


# ----------------------------------------------------------------------------------------------
# --sha256 is checked first, a full disk is not a lost connection, a stalled server is given up
# on quickly (issue 11's fault injection).


class _StallingServer(http.server.BaseHTTPRequestHandler):
    blob = b"x" * (3 << 20)
    stall = False
    gets: ClassVar[list] = []

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.blob)))
        self.end_headers()

    def do_GET(self):
        type(self).gets.append(self.headers.get("Range"))
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.blob)))
        self.end_headers()
        if self.stall:
            time.sleep(1.5)
            return
        self.wfile.write(self.blob)

    def log_message(self, *args):
        pass


@pytest.fixture
def stalling_server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StallingServer)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _StallingServer.gets, _StallingServer.stall = [], False
    yield f"http://127.0.0.1:{httpd.server_address[1]}/lra_release.gz"
    httpd.shutdown()


def test_bad_sha256_is_refused_before_downloading(tmp_path, monkeypatch):
    monkeypatch.setattr(release, "download", lambda *a, **k: pytest.fail("downloaded"))
    with pytest.raises(release.ReleaseError, match="64 hexadecimal"):
        release.fetch_release(tmp_path, url="http://127.0.0.1:9/lra_release.gz", sha256="abc")


def test_disk_full_during_fetch_is_not_a_lost_connection(tmp_path, stalling_server, monkeypatch):
    class Full(io.BytesIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(release, "open", lambda *a, **k: Full(), raising=False)
    with pytest.raises(release.ReleaseError) as err:
        release.download(stalling_server, tmp_path / "lra_release.gz", retry_wait=0.01, progress=False)
    assert "No space left" in str(err.value) and "connection lost" not in str(err.value)
    assert len(_StallingServer.gets) == 1  # not retried


def test_stalled_server_is_given_up_on_quickly(tmp_path, stalling_server):
    import inspect

    assert inspect.signature(release.download).parameters["timeout"].default == 30  # README
    _StallingServer.stall = True
    t0 = time.time()
    with pytest.raises(release.ReleaseError, match="stalled"):
        release.download(stalling_server, tmp_path / "lra_release.gz", timeout=0.3, retry_wait=0.2,
                         progress=False)
    assert time.time() - t0 < 1.5 and len(_StallingServer.gets) == release.STALLS
