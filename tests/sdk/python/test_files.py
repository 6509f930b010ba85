"""The Files API through the official SDK with strict validation: the round trip on both
stores and on an S3-compatible bucket (moto in server mode, started here), a large file
streamed through a server whose memory is watched, and the size limit."""

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import anthropic
import pytest

from conftest import BACKENDS, free_port, fresh_postgres, start_mast, wait_http


class Mast:
    """A `mast serve` process with extra environment; `pid` for /proc, `data_dir` on disk."""

    def __init__(self, backend: str, extra_env: dict, data_dir: str | None = None, database_url: str | None = None):
        self.port = free_port()
        env = dict(os.environ, MAST_LOG="warn", **extra_env)
        env.pop("DATABASE_URL", None)
        self.database_url = database_url or (fresh_postgres() if backend == "postgres" else None)
        if self.database_url:
            env["DATABASE_URL"] = self.database_url
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="mast-py-files-")
        self.proc, self.base = start_mast(self.data_dir, env, self.port)
        self.client = anthropic.Anthropic(base_url=self.base, api_key="sdk-test", _strict_response_validation=True, max_retries=0)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=15)


@pytest.fixture
def mast_factory():
    started = []

    def start(backend, **kw):
        m = Mast(backend, **kw)
        started.append(m)
        return m

    yield start
    for m in started:
        if m.proc.poll() is None:
            m.stop()
        shutil.rmtree(m.data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 in server mode on a free loopback port, with a bucket."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    wait_http(endpoint + "/moto-api/", proc, "moto")
    import boto3
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket="mast-files")
    yield endpoint, s3
    proc.terminate()
    proc.wait(timeout=15)


def s3_env(endpoint: str) -> dict:
    return {"MAST_FILES_S3_BUCKET": "mast-files", "MAST_FILES_S3_ENDPOINT": endpoint, "MAST_FILES_S3_REGION": "us-east-1",
            "MAST_FILES_S3_PREFIX": "blobs", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def round_trip(client: anthropic.Anthropic, tmp_path: pathlib.Path) -> list[str]:
    """Upload, list (pages, ids, scope), retrieve, download, delete; returns the ids deleted."""
    p = tmp_path / "summary.csv"
    p.write_bytes(b"city,temp\nParis,21\n")
    up = client.beta.files.upload(file=p, expires_in_seconds=3600)
    assert up.type == "file" and up.id.startswith("file_")
    assert up.filename == "summary.csv" and up.mime_type == "text/csv" and up.size_bytes == 19
    assert up.downloadable is True and up.scope is None
    assert (up.expires_at - up.created_at).total_seconds() == pytest.approx(3600, abs=1)
    # A bare-bytes upload has no filename: `unnamed`, octet-stream.
    raw = client.beta.files.upload(file=b"\x00\x01\x02")
    assert raw.filename == "unnamed" and raw.mime_type == "application/octet-stream" and raw.expires_at is None
    # A tuple with a path-like name keeps its last component and given type.
    md = client.beta.files.upload(file=("notes/today.md", b"# hi\n", "text/markdown"))
    assert md.filename == "today.md" and md.mime_type == "text/markdown"

    page = client.beta.files.list(limit=2)
    assert [f.id for f in page.data] == [md.id, raw.id], "newest first"
    assert page.next_page and page.next_page.startswith("page_")
    every = [f.id for f in client.beta.files.list(limit=1)]
    assert every == [md.id, raw.id, up.id], "auto-pagination walks every page"
    picked = client.beta.files.list(ids=[up.id, md.id, "file_missing"])
    assert sorted(f.id for f in picked.data) == sorted([up.id, md.id]) and picked.next_page is None
    assert client.beta.files.list(scope_id="sesn_none").data == []

    got = client.beta.files.retrieve_metadata(up.id)
    assert got == up
    body = client.beta.files.download(up.id)
    assert body.read() == b"city,temp\nParis,21\n"
    assert body.http_response.headers["content-type"] == "text/csv"
    assert body.http_response.headers["content-length"] == "19"
    assert 'filename="summary.csv"' in body.http_response.headers["content-disposition"]
    assert client.beta.files.download(raw.id).read() == b"\x00\x01\x02"

    for f in (up, raw, md):
        gone = client.beta.files.delete(f.id)
        assert gone.id == f.id and gone.type == "file_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.beta.files.retrieve_metadata(up.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.files.download(up.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.files.delete(up.id)
    assert client.beta.files.list().data == []
    return [up.id, raw.id, md.id]


@pytest.mark.parametrize("backend", BACKENDS)
def test_files_round_trip_on_local_storage(backend, mast_factory, tmp_path):
    m = mast_factory(backend, extra_env={})
    ids = round_trip(m.client, tmp_path)
    blobs = pathlib.Path(m.data_dir, "files", "blobs")
    assert not [b for b in blobs.iterdir() if b.name in ids], "deleting frees the bytes"


@pytest.mark.parametrize("backend", BACKENDS)
def test_files_round_trip_on_s3(backend, mast_factory, s3_server, tmp_path):
    endpoint, s3 = s3_server
    m = mast_factory(backend, extra_env=s3_env(endpoint))
    f = m.client.beta.files.upload(file=("kept.txt", b"in the bucket", "text/plain"))
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="mast-files").get("Contents", [])]
    assert f"blobs/{f.id}" in keys, keys
    assert s3.get_object(Bucket="mast-files", Key=f"blobs/{f.id}")["Body"].read() == b"in the bucket"
    m.client.beta.files.delete(f.id)
    ids = round_trip(m.client, tmp_path)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="mast-files").get("Contents", [])]
    assert not [k for k in keys if k.rsplit("/", 1)[-1] in ids + [f.id]], f"deleting frees the bytes: {keys}"
    assert not pathlib.Path(m.data_dir, "files").exists(), "nothing is kept on local disk"


def test_a_multipart_upload_to_s3_streams_in_parts(mast_factory, s3_server, tmp_path):
    """A file over one part (8 MiB) goes up as a multipart upload and comes back whole."""
    endpoint, s3 = s3_server
    m = mast_factory("sqlite", extra_env=s3_env(endpoint))
    data = os.urandom(20 * 1024 * 1024 + 3)
    f = m.client.beta.files.upload(file=("big.bin", data))
    assert f.size_bytes == len(data)
    with m.client.beta.files.with_streaming_response.download(f.id) as r:
        assert hashlib.sha256(b"".join(r.iter_bytes())).digest() == hashlib.sha256(data).digest()
    m.client.beta.files.delete(f.id)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as s:
        for line in s:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def test_a_large_file_is_streamed_not_held_in_memory(mast_factory, tmp_path):
    size = 128 * 1024 * 1024
    path = tmp_path / "large.bin"
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        block = os.urandom(1024 * 1024)
        for _ in range(size // len(block)):
            out.write(block)
            digest.update(block)
    m = mast_factory("sqlite", extra_env={})
    base_rss = rss_kib(m.pid)
    peak = [base_rss]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(m.pid))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        f = m.client.beta.files.upload(file=path)
        assert f.size_bytes == size
        got = hashlib.sha256()
        with m.client.beta.files.with_streaming_response.download(f.id) as r:
            assert r.headers["content-length"] == str(size)
            for chunk in r.iter_bytes(1024 * 1024):
                got.update(chunk)
        assert got.digest() == digest.digest()
    finally:
        done.set()
        watcher.join()
    grown_mib = (peak[0] - base_rss) / 1024
    # Held whole, the file alone would add 128 MiB; streamed, a few buffers.
    assert grown_mib < 32, f"server RSS grew by {grown_mib:.1f} MiB for a 128 MiB file (from {base_rss} KiB)"


def test_uploads_over_the_limit_get_413(mast_factory):
    m = mast_factory("sqlite", extra_env={"MAST_FILES_MAX_BYTES": "4096"})
    with pytest.raises(anthropic.ContentTooLargeError) as e:
        m.client.beta.files.upload(file=("big.bin", b"x" * 100_000))
    assert e.value.status_code == 413
    assert "4096 bytes" in e.value.message
    assert e.value.body["error"]["type"] == "invalid_request_error"
    ok = m.client.beta.files.upload(file=("ok.bin", b"x" * 4096))
    assert ok.size_bytes == 4096
    assert [f.id for f in m.client.beta.files.list()] == [ok.id]


def test_expired_files_disappear_with_their_bytes(mast_factory):
    """A file past its `expires_at` is gone: the server is restarted with its clock an hour
    and a bit ahead (MAST_CLOCK_SKEW_MS), and its sweep deletes the file and its bytes. The
    restart also sweeps what a crash leaves: a blob without metadata, a half-written upload."""
    m = mast_factory("sqlite", extra_env={})
    f = m.client.beta.files.upload(file=("soon.txt", b"short-lived"), expires_in_seconds=3600)
    kept = m.client.beta.files.upload(file=("kept.txt", b"kept"))
    blob = pathlib.Path(m.data_dir, "files", "blobs", f.id)
    assert blob.exists()
    m.stop()
    two_hours_ago = time.time() - 7200
    orphan = pathlib.Path(m.data_dir, "files", "blobs", "file_011CNorphanFromACrash")
    partial = pathlib.Path(m.data_dir, "files", "tmp", "file_011CNhalfWritten.abc.part")
    for p in (orphan, partial):
        p.write_bytes(b"left by a crash")
        os.utime(p, (two_hours_ago, two_hours_ago))
    recent = pathlib.Path(m.data_dir, "files", "tmp", "file_011CNstillUploading.abc.part")
    recent.write_bytes(b"another replica's upload in flight")
    later = mast_factory("sqlite", extra_env={"MAST_CLOCK_SKEW_MS": str(3700 * 1000), "MAST_FILES_SWEEP_INTERVAL_MS": "100"},
                         data_dir=m.data_dir)
    with pytest.raises(anthropic.NotFoundError):
        later.client.beta.files.retrieve_metadata(f.id)
    with pytest.raises(anthropic.NotFoundError):
        later.client.beta.files.download(f.id)
    assert [x.id for x in later.client.beta.files.list()] == [kept.id]
    deadline = time.time() + 10
    while blob.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert not blob.exists(), "the sweep frees an expired file's bytes"
    assert not orphan.exists() and not partial.exists(), "the start-up sweep removes a crash's leftovers"
    assert recent.exists(), "a recent upload is left alone"
    assert later.client.beta.files.download(kept.id).read() == b"kept"
