"""An S3-compatible server for tests and benchmarks: moto in server mode (moto's WSGI app, served by waitress), in
its own process, on 127.0.0.1 with a free port, counting the requests it serves.

    with S3Server() as s3:            # sets nothing globally; s3.env() is what a client needs
        s3.make_bucket("lake")
        s3.reset_counts(); ...; s3.counts()   # [{"method", "path", "query", "range", "copy_source"}, ...]

`python -m tests.support.s3_server` runs the server and prints `PORT <n>` once it listens. The request log is
served at `/_tidemark/requests` (GET: the log, DELETE: clear it), outside any bucket name S3 allows.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

LOG_PATH = "/_tidemark/requests"
LATENCY_ENV = "TIDEMARK_S3_SERVER_LATENCY_MS"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


class CountingApp:
    """WSGI middleware: records each request's method, path, query, Range, copy source and arrival time (epoch
    seconds, `at`: lets a benchmark attribute requests to the phase that made them)."""

    def __init__(self, app: Any, latency_s: float = 0.0) -> None:
        self.app = app
        self.log: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.conditional = threading.Lock()   # one conditional write at a time (see __call__)
        self.latency_s = latency_s

    def __call__(self, environ: dict, start_response: Any) -> Any:
        if environ.get("PATH_INFO") == LOG_PATH:
            with self.lock:
                if environ["REQUEST_METHOD"] == "DELETE":
                    self.log.clear()
                body = json.dumps(self.log).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        # moto takes a key from RAW_URI (as werkzeug's server gives it), else from the decoded path, where an escaped
        # "?" or "%" in a key would end or change it; waitress gives the raw URI as REQUEST_URI
        environ.setdefault("RAW_URI", environ.get("REQUEST_URI", ""))
        entry = {"method": environ.get("REQUEST_METHOD", ""), "path": environ.get("PATH_INFO", ""),
                 "query": environ.get("QUERY_STRING", ""), "range": environ.get("HTTP_RANGE", ""),
                 "copy_source": environ.get("HTTP_X_AMZ_COPY_SOURCE", ""), "at": time.time()}
        with self.lock:
            self.log.append(entry)
        if self.latency_s:   # a remote store's time to first byte, spent waiting (no CPU), before the answer
            time.sleep(self.latency_s)
        t0 = time.thread_time()
        try:
            if environ.get("HTTP_IF_NONE_MATCH") or environ.get("HTTP_IF_MATCH"):
                # moto checks a write's condition, then writes: two racing conditional writes on its threads could
                # both pass the check. S3 decides between them atomically; so does this server.
                with self.conditional:
                    return self.app(environ, start_response)
            return self.app(environ, start_response)
        finally:
            entry["cpu_ms"] = round((time.thread_time() - t0) * 1000, 3)   # the app's CPU on this request's thread
            entry["done"] = time.time()   # answered (the body may still be streaming): what a caller waited for


def _iso_or_parsed(original: Any) -> Any:
    """moto's serializer turns each stored timestamp string back into a datetime with dateutil (~0.2 ms each:
    most of a LIST's cost per key); `fromisoformat` reads the ISO-8601 form moto stores, the rest goes on."""
    def parse(value: Any) -> Any:
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                return original(value)
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
        return original(value)
    return parse


def _waitress_channel() -> Any:
    """waitress's connection handler, mended for botocore's empty PUTs: they send `Expect: 100-continue` with
    `Content-Length: 0`, and waitress answers "100 Continue" by waiting for a body that never comes."""
    from waitress.channel import HTTPChannel
    from waitress.parser import HTTPRequestParser

    class Parser(HTTPRequestParser):  # type: ignore[misc]
        def parse_header(self, header_plus: bytes) -> None:
            super().parse_header(header_plus)
            if not self.chunked and self.content_length == 0:
                self.expect_continue = False

    class Channel(HTTPChannel):  # type: ignore[misc]
        parser_class = Parser
    return Channel


def serve() -> None:
    import waitress
    from moto import backends
    from moto.core import serialize
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    # moto resolves every request's backend by listing its own package directory (os.listdir + ~180 isdir
    # calls, twice per request: a third of its CPU per GET); the list cannot change while it runs, so read it once.
    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules
    serialize.parse_to_aware_datetime = _iso_or_parsed(serialize.parse_to_aware_datetime)

    # moto's app behind waitress rather than moto's own werkzeug server: werkzeug's development server closes
    # the connection after every response (a TCP set-up and a new thread per request, ~1 ms of CPU each), where
    # S3 and every client here keep connections alive.
    latency_s = float(os.environ.get(LATENCY_ENV) or 0) / 1000
    app = CountingApp(DomainDispatcherApplication(create_backend_app), latency_s)
    # Connections now stay open: every client a test makes (boto3, pyarrow, hudi-rs) keeps a few until it is
    # collected, past waitress's default limit of 100 over a test session. With a latency, more requests wait at
    # once (a remote store serves them all in parallel).
    server = waitress.create_server(app, host="127.0.0.1", port=0, threads=64 if latency_s else 8, ident="moto",
                                    connection_limit=1000, channel_timeout=60)
    server.channel_class = _waitress_channel()
    print(f"PORT {server.effective_port}", flush=True)
    server.run()


class S3Server:
    """The server process; `stop()` (or leaving the `with`) ends it. `latency_ms`: each request waits this long
    before it is served, as a remote store's time to first byte (a benchmark's model of S3; tests use none)."""

    def __init__(self, latency_ms: float = 0) -> None:
        env = {**os.environ, **CREDENTIALS, LATENCY_ENV: str(latency_ms)}
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.s3_server"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True,
                                     cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.proc.kill()
            raise RuntimeError(f"moto server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._wait_ready()

    def _wait_ready(self) -> None:
        import urllib.request

        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.endpoint + LOG_PATH, timeout=2).read()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def env(self) -> dict[str, str]:
        """The AWS chain's variables that point a client (pyarrow.fs, boto3, hudi-rs) at this server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def storage_options(self) -> dict[str, str]:
        """The same for hudi-rs (object_store's keys)."""
        return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_region": "us-east-1",
                "aws_endpoint_url": self.endpoint, "aws_allow_http": "true"}

    def client(self) -> Any:
        return boto3.session.Session().client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                                              aws_access_key_id="testing", aws_secret_access_key="testing")

    def make_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def counts(self) -> list[dict[str, str]]:
        import urllib.request

        with urllib.request.urlopen(self.endpoint + LOG_PATH, timeout=10) as resp:
            return json.loads(resp.read())

    def reset_counts(self) -> None:
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(self.endpoint + LOG_PATH, method="DELETE"), timeout=10).read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> S3Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One moto server per test process (free port), stopped at the end of the session."""
    with S3Server() as server:
        yield server


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The AWS chain pointed at the server, and a fresh bucket: `bucket_uri`, `storage_options` (hudi-rs)."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN", "TIDEMARK_S3_CONDITIONAL_PUT"):
        monkeypatch.delenv(key, raising=False)
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    s3_server.make_bucket(bucket)
    return {"bucket_uri": f"s3://{bucket}", "storage_options": s3_server.storage_options(), "server": s3_server}


if __name__ == "__main__":
    serve()
