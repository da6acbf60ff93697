"""The NYU download command against a loopback file server on 127.0.0.1 that honours Range
requests: a first download cut short is resumed by the second call, size mismatches give clear
errors that keep the partial file, and a complete file has its layout checked (and extracted)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from support.evaluations.nyu_distance.download import DownloadError, download, main
from support.evaluations.nyu_distance.mat import FILE_NAME, NyuMat, NyuMatError
from support.evaluations.nyu_distance.synthetic import write_nyu_mat


@dataclass
class Served:
    """What the server sends and how it misbehaves; what it was asked."""

    payload: bytes = b""
    cut_after: list[int] = field(default_factory=list)  # per request: stop after N body bytes
    honour_range: bool = True
    announce: int | None = None  # a Content-Length/total other than the payload's size
    ranges: list[str | None] = field(default_factory=list)  # Range header of each request
    status: int | None = None  # answer every request with this error status


class _Handler(BaseHTTPRequestHandler):
    timeout = 10  # s per socket operation: a stuck client cannot hold the server

    def log_message(self, format, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        served: Served = self.server.served  # type: ignore[attr-defined]
        rng = self.headers.get("Range")
        served.ranges.append(rng)
        if served.status:
            self.send_error(served.status)
            return
        data, size = served.payload, served.announce or len(served.payload)
        start = 0
        m = re.fullmatch(r"bytes=(\d+)-", rng or "")
        if m and served.honour_range:
            start = int(m.group(1))
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(size - start))
        self.end_headers()
        cut = served.cut_after.pop(0) if served.cut_after else None
        try:
            self.wfile.write(body if cut is None else body[:cut])
            self.wfile.flush()
        except OSError:
            pass
        self.close_connection = True


@pytest.fixture
def server() -> Iterator[tuple[str, Served]]:
    """(url, Served) of a file server on 127.0.0.1, stopped after the test."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.served = Served()  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/{FILE_NAME}", httpd.served  # type: ignore[attr-defined]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def mat_bytes(tmp_path_factory) -> bytes:
    """A small file in the real layout (2 images) to serve."""
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (480, 640, 3), dtype=np.uint8) for _ in range(2)]
    depths = [rng.uniform(0.5, 5, (480, 640)).astype(np.float32) for _ in range(2)]
    labels = [np.zeros((480, 640), np.uint16)] * 2
    path = write_nyu_mat(tmp_path_factory.mktemp("serve") / FILE_NAME, images, depths, labels)
    return path.read_bytes()


def test_complete_download_then_layout_check_and_extract(server, mat_bytes, tmp_path, capsys):
    url, served = server
    served.payload = mat_bytes
    assert main(["--to", str(tmp_path), "--url", url, "--quiet", "--extract", "1"]) == 0
    dest = tmp_path / FILE_NAME
    assert dest.read_bytes() == mat_bytes
    assert not (tmp_path / f"{FILE_NAME}.part").exists()
    assert served.ranges == [None]
    assert "2 images, layout checked" in capsys.readouterr().out
    extracted = tmp_path / "extracted"
    assert np.array_equal(np.load(extracted / "depth" / "00000.npy"), NyuMat(dest).depth(0))
    assert (extracted / "rgb" / "00000.png").is_file() and not (
        extracted / "rgb" / "00001.png"
    ).exists()
    assert json.loads((extracted / "camera_intrinsics.json").read_text())["fx"] == 518.857901
    # a second run finds the file complete: no request
    assert main(["--to", str(tmp_path), "--url", url, "--quiet"]) == 0
    assert served.ranges == [None]


def test_interrupted_download_is_resumed(server, mat_bytes, tmp_path):
    url, served = server
    served.payload = mat_bytes
    cut = len(mat_bytes) // 3
    served.cut_after = [cut]  # the first response stops a third of the way
    dest, part = tmp_path / FILE_NAME, tmp_path / f"{FILE_NAME}.part"
    with pytest.raises(DownloadError) as err:
        download(url, dest, progress=False, timeout_s=10)
    message = str(err.value)
    assert f"{cut} of {len(mat_bytes)} bytes" in message
    assert str(part) in message and "run the same command to resume" in message
    assert part.stat().st_size == cut and not dest.exists()
    assert download(url, dest, progress=False, timeout_s=10) == dest
    assert served.ranges == [None, f"bytes={cut}-"]  # the second call asked for the rest only
    assert dest.read_bytes() == mat_bytes and not part.exists()
    assert len(NyuMat(dest)) == 2


def test_resume_twice_then_complete_partial_file(server, mat_bytes, tmp_path):
    url, served = server
    served.payload = mat_bytes
    served.cut_after = [1000, 5000]
    dest = tmp_path / FILE_NAME
    for _ in range(2):
        with pytest.raises(DownloadError, match="incomplete download"):
            download(url, dest, progress=False)
    assert (tmp_path / f"{FILE_NAME}.part").stat().st_size == 6000
    download(url, dest, progress=False)
    assert served.ranges == [None, "bytes=1000-", "bytes=6000-"]
    assert dest.read_bytes() == mat_bytes


def test_partial_that_is_already_whole_is_finished(server, mat_bytes, tmp_path):
    url, served = server
    served.payload = mat_bytes
    (tmp_path / f"{FILE_NAME}.part").write_bytes(mat_bytes)  # the rename was lost
    dest = download(url, tmp_path / FILE_NAME, progress=False)
    assert served.ranges == [f"bytes={len(mat_bytes)}-"]  # answered 416 with the total
    assert dest.read_bytes() == mat_bytes


def test_server_that_ignores_range_starts_over(server, mat_bytes, tmp_path):
    url, served = server
    served.payload, served.honour_range = mat_bytes, False
    (tmp_path / f"{FILE_NAME}.part").write_bytes(b"x" * 777)
    dest = download(url, tmp_path / FILE_NAME, progress=False)
    assert dest.read_bytes() == mat_bytes


def test_expected_size_mismatch_is_clear_and_keeps_the_partial(server, mat_bytes, tmp_path):
    url, served = server
    served.payload = mat_bytes
    served.cut_after = [4096]
    dest, part = tmp_path / FILE_NAME, tmp_path / f"{FILE_NAME}.part"
    with pytest.raises(DownloadError):
        download(url, dest, progress=False)
    wrong = len(mat_bytes) + 123
    with pytest.raises(DownloadError) as err:
        download(url, dest, expected_bytes=wrong, progress=False)
    message = str(err.value)
    assert f"reports {len(mat_bytes)} bytes, expected {wrong}" in message
    assert str(part) in message and "kept" in message
    assert part.read_bytes() == mat_bytes[:4096]  # untouched
    # the command line says the same, with exit status 1
    assert (
        main(["--to", str(tmp_path), "--url", url, "--quiet", "--expected-bytes", str(wrong)]) == 1
    )
    assert part.read_bytes() == mat_bytes[:4096]
    download(url, dest, expected_bytes=len(mat_bytes), progress=False)
    assert dest.read_bytes() == mat_bytes


def test_server_announcing_more_than_it_sends(server, mat_bytes, tmp_path):
    url, served = server
    served.payload, served.announce = mat_bytes, len(mat_bytes) + 10  # a lie about the size
    dest, part = tmp_path / FILE_NAME, tmp_path / f"{FILE_NAME}.part"
    with pytest.raises(DownloadError, match=rf"{len(mat_bytes)} of {len(mat_bytes) + 10} bytes"):
        download(url, dest, progress=False)
    assert part.read_bytes() == mat_bytes and not dest.exists()


def test_complete_file_with_the_wrong_layout_is_reported(server, tmp_path, capsys):
    url, served = server
    served.payload = b"<html>not found</html>"  # an error page served as 200
    assert main(["--to", str(tmp_path), "--url", url, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "not an HDF5 / MATLAB v7.3 file" in err and str(tmp_path / FILE_NAME) in err
    with pytest.raises(NyuMatError):
        NyuMat(tmp_path / FILE_NAME)


def test_unreachable_server_is_a_clear_error(tmp_path):
    with pytest.raises(DownloadError, match="no network"):
        download("http://127.0.0.1:9/nothing.mat", tmp_path / FILE_NAME, timeout_s=2)


def test_http_error_is_reported(server, tmp_path):
    url, served = server
    served.status = 404
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(url, tmp_path / FILE_NAME, progress=False)
    assert not (tmp_path / FILE_NAME).exists()
