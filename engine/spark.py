"""The SparkSession factory: local[*] by default, any cluster via SPARK_MASTER.

On a cluster master (anything but `local…`) the driver ships the `engine` package to the executors at
session start: a zip of the package, built at run time into the cache directory (named by its content, so
an edited engine is never confused with a stale zip) and added with `SparkContext.addPyFile`. Executors
then need only a Python with the runtime dependencies (pyarrow, fastavro, numpy, pandas, pyspark) — not
Tidemark itself. Which Python that is comes from `PYSPARK_PYTHON` (default: this interpreter's path, right
for a standalone cluster on hosts laid out like this one); on YARN / Kubernetes it is the packed venv that
`spark.archives` unpacks (docs/SPARK.md, "Running on a cluster").

Spark's JVM start dominates short jobs (~5 s). On local masters we build a JVM class-data-sharing
archive once per machine at run time (`-XX:ArchiveClassesAtExit`) and reuse it afterwards
(`-XX:SharedArchiveFile`), which brings start-up to ~2 s. The archive lives in a cache directory and
is never committed; a stale or foreign archive is harmless (the JVM ignores it with a warning).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import tempfile
import threading
import time
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from engine import env
from engine.io.arrow_pool import executor_pool_env

_LOCK = threading.Lock()

# Rows per Arrow batch between the JVM and Python (`mapInArrow`, `toArrow`): the Spark-task write receives its input
# in these. Spark's 10,000 costs a fixed JVM conversion and routing step per batch; 40,000 took our Spark-task write
# of 1 M cached rows 1.30 / 1.08 / 1.34 → 1.19 / 1.16 / 1.12 s, alternating (bench_write --versus-spark). A batch
# of 40,000 rows of a 1 KB-row table is 40 MB; a session someone else built keeps its own setting.
ARROW_BATCH_ROWS = 40_000


def cache_dir() -> Path:
    base = env.text("TIDEMARK_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "tidemark")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _cds_archive() -> Path:
    """One archive per (pyspark version, java home) so an upgrade never reuses a mismatched archive."""
    import pyspark

    key = f"{pyspark.__version__}|{env.text('JAVA_HOME')}|{sys.version_info[:2]}"
    return cache_dir() / f"spark-cds-{hashlib.sha1(key.encode()).hexdigest()[:12]}.jsa"


LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def _adopt_finished_archive(archive: Path) -> None:
    """Promote an archive a finished JVM dumped under its own name (`<archive>.<pid>.tmp`).

    Each first-time JVM dumps to a private name, so two processes starting Spark at once (parallel
    tests, two CLI calls) never write one file together; the JVM writes at exit, so a dump counts as
    finished once its writer process is gone and the file has not changed for a while.
    """
    for tmp in archive.parent.glob(archive.name + ".*.tmp"):
        try:
            _adopt_one(tmp, archive)
        except FileNotFoundError:  # another process starting Spark at the same moment adopted it first
            continue


def _adopt_one(tmp: Path, archive: Path) -> None:
    pid = tmp.name[len(archive.name) + 1:-len(".tmp")]
    settled = time.time() - tmp.stat().st_mtime > 30  # the JVM may outlive its Python parent briefly
    if pid.isdigit() and not Path(f"/proc/{pid}").exists() and settled:
        if tmp.stat().st_size > 0 and not archive.exists():
            os.replace(tmp, archive)
        else:
            tmp.unlink(missing_ok=True)


def _driver_java_options(master: str) -> str:
    logging = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
    # The driver JVM runs in this process's host whatever the master (pyspark is always client mode), so a
    # cluster driver starts from the same archive as a local one.
    if env.flag("TIDEMARK_NO_CDS", False):
        return logging
    archive = _cds_archive()
    _adopt_finished_archive(archive)
    quiet = "-Xlog:cds=off -Xlog:cds+dynamic=off"
    if archive.exists() and archive.stat().st_size > 0:
        return f"{logging} -XX:SharedArchiveFile={archive} -Xshare:auto {quiet}"
    # The JVM is a child of this process, so our pid names the dump; it is adopted by a later start.
    return f"{logging} -XX:ArchiveClassesAtExit={archive}.{os.getpid()}.tmp {quiet}"


def master_url() -> str:
    return env.text("SPARK_MASTER", "local[*]")


def is_local(master: str) -> bool:
    return master.startswith("local")


def spark_path(location: str) -> str:
    """`location` as a path Spark's own (JVM, Hadoop) readers and writers take: absolute local paths get the
    `file://` scheme, because a scheme-less path means the cluster's default filesystem (HDFS on YARN)."""
    if "://" in location:
        return location
    return "file://" + os.path.abspath(location)


def get_spark(app_name: str = "tidemark", cores: int | None = None) -> SparkSession:
    """Return the process's SparkSession, creating it on first use (thread-safe)."""
    with _LOCK:
        active = SparkSession.getActiveSession()
        if active is not None:
            ship_storage_env(active)
            return active
        # Executors' Python must be this interpreter (the venv), not whatever `python3` is on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if master_url().startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname-lookup warning, loopback only
        master = master_url() if cores is None else f"local[{cores}]"
        builder = (
            SparkSession.builder.master(master)
            .appName(app_name)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(env.whole("TIDEMARK_SHUFFLE_PARTITIONS", 8)))
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.memory", env.text("TIDEMARK_DRIVER_MEMORY", "4g"))
            .config("spark.python.worker.reuse", "true")
            # The JVM talks to its Python workers over Unix domain sockets instead of loopback TCP, whose small
            # writes met delayed ACKs: ~60 ms per task before a trivial Python task ran, ~20 ms with these.
            .config("spark.python.unix.domain.socket.enabled", "true")
            .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "1000000")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
        )
        for key, value in executor_pool_env().items():   # compaction's streaming returns freed pages
            builder = builder.config(f"spark.executorEnv.{key}", value)
        if env.text("TIDEMARK_EXECUTOR_MEMORY"):
            builder = builder.config("spark.executor.memory", env.text("TIDEMARK_EXECUTOR_MEMORY"))
        # Read by the launcher before the driver JVM starts, so CDS and logging apply.
        builder = builder.config("spark.driver.extraJavaOptions", _driver_java_options(master))
        with _jvm_stderr_filtered(), warnings.catch_warnings():
            # pylance warns at every fork once imported (a Lance base read before Spark starts); launching the
            # JVM forks only to exec java at once, with no Lance call in the child, so the warning says nothing.
            warnings.filterwarnings("ignore", message="lance is not fork-safe", category=UserWarning)
            spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        if not is_local(master):
            # Before any job: every task (and the data source's planner) imports engine from the zip.
            spark.sparkContext.addPyFile(str(engine_archive()))
        ship_storage_env(spark)
        return spark


# What a compaction task imports: the module a control-plane worker warms its Python workers with.
COMPACTION_TASK_MODULES = ("engine.compaction.file_group_task",)


def warm_python_workers(spark: SparkSession, modules: Sequence[str] = COMPACTION_TASK_MODULES) -> int:
    """Start the session's Python workers and import `modules` there (by name: this module depends on none of
    them), their heaps then frozen (engine.worker_gc), so the first task of a long-lived driver costs what later
    ones do: a small table's first compaction 1.8 s cold, 0.5-0.6 s after this warm-up (~1.4 s). Returns the
    number of tasks run, one per core."""
    n = spark.sparkContext.defaultParallelism
    names = tuple(modules)

    def warm(_: int) -> int:   # nested: shipped by value, so executors need only `engine` (shipped at start)
        import importlib

        from engine.worker_gc import task_finished

        for name in names:
            importlib.import_module(name)
        task_finished()
        return 1

    return int(sum(spark.sparkContext.parallelize(range(n), n).map(warm).collect()))


def engine_archive() -> Path:
    """The `engine` package as a zip for executors' PYTHONPATH, built once per distinct source tree.

    When engine itself is imported from an archive (a driver started from a shipped zip), that archive is
    the answer. The zip is written under a private name and renamed into place, so two drivers starting at
    once never read a half-written file.
    """
    package = Path(__file__).resolve().parent   # this module's package: engine itself, a folder or in a zip
    if not package.is_dir():
        return _enclosing_archive(package)
    sources = sorted(p for p in package.rglob("*") if p.is_file() and _shipped(p))
    digest = hashlib.sha1()
    for path in sources:
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    target = cache_dir() / "pyfiles" / f"tidemark-engine-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sources:
                archive.write(path, (Path("engine") / path.relative_to(package)).as_posix())
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return target


def _shipped(path: Path) -> bool:
    """Sources and package data; never bytecode (the executors' Python may be another minor version)."""
    return "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")


def _enclosing_archive(inside: Path) -> Path:
    for candidate in (inside, *inside.parents):
        if candidate.is_file() and zipfile.is_zipfile(candidate):
            return candidate
    raise RuntimeError(f"cannot ship the engine package to executors: {inside} is neither a folder nor in a zip")


# How executors reach object storage: the AWS chain's variables as the driver sees them now, so the Python
# workers' pyarrow.fs (and boto3) talk to the same store with the same credentials. Python workers are keyed by
# their environment, so a changed endpoint starts fresh workers.
STORAGE_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
               "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
               "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "TIDEMARK_S3_CONDITIONAL_PUT")


def ship_storage_env(spark: SparkSession) -> dict[str, str]:
    """Copy the storage variables into the environment every Python task of this session gets; returns
    them as shipped (engine.datasource registers its source again when they change: its planner workers
    take the environment its registration captured)."""
    env = spark.sparkContext.environment
    for key in STORAGE_ENV:
        value = os.environ.get(key)
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return {k: env[k] for k in STORAGE_ENV if k in env}


# Lines the JVM prints on every start that tell a user nothing: the launcher always adds an incubator module,
# and Spark announces a shell log level (pyspark counts as a shell) that our log4j2.properties overrides anyway.
_JVM_NOISE = (b"WARNING: Using incubator modules:", b'Setting default log level to "',
              b"To adjust logging level use sc.setLogLevel(newLevel).")


@contextlib.contextmanager
def _jvm_stderr_filtered() -> Iterator[None]:
    """Start the JVM with its stderr on a pipe that forwards every line but the start-up noise.

    The JVM (and the Python workers it forks) inherit fd 2 at launch, so fd 2 is the pipe only while the
    session starts; this process's own stderr is the real one again afterwards.
    """
    try:
        real = os.dup(2)
    except OSError:  # no stderr at all (a daemon): nothing to keep clean
        yield
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(real, 2)
        threading.Thread(target=_forward_lines, args=(read_end, real), name="jvm-stderr", daemon=True).start()


def _forward_lines(read_end: int, target: int) -> None:
    with os.fdopen(read_end, "rb") as source:
        for chunk in forwarded(iter(source.readline, b"")):
            os.write(target, chunk)


# A Python worker whose task failed may still be flushing when the JVM, already done with it, closes the
# socket: pyspark's daemon then prints the worker's BrokenPipeError (or ConnectionResetError) trace. The task's
# real error reaches the caller on its own; this trace is only the echo of the JVM hanging up.
_HANG_UP = (b"BrokenPipeError:", b"ConnectionResetError:")
_DAEMON_FRAME = re.compile(rb'^  File ".*pyspark[/\\]daemon\.py", line \d+, in \w+$|^    \S|^ {4,}[\^~]+$')


def forwarded(lines: Iterator[bytes]) -> Iterator[bytes]:
    """The JVM's stderr lines a user should see: without start-up noise and the daemon's hang-up traces.

    A trace is held back until its last line shows what it is, and forwarded whole unless every frame is
    pyspark's daemon and it ends in a hang-up; any other trace, and everything outside traces, passes as is.
    """
    held: list[bytes] = []
    for line in lines:
        if held:
            held.append(line)
            if _DAEMON_FRAME.match(line.rstrip(b"\n")):
                continue
            if not line.startswith(_HANG_UP):
                yield b"".join(held)
            held = []
        elif line.startswith(b"Traceback (most recent call last):"):
            held = [line]
        elif not line.startswith(_JVM_NOISE):
            yield line
    if held:
        yield b"".join(held)


_TRACE_START = re.compile(r"(An exception was thrown from the Python worker:\s*)?Traceback \(most recent call last\):")
_EXCEPTION_LINE = re.compile(r"^(?:Caused by: |: )?[A-Za-z_][\w.$]*: ")   # unindented `pkg.SomeError: message`
_JAVA_FRAME = re.compile(r"^\s+at |^\s*\.\.\. \d+ more")


def error_line(text: str) -> str:
    """One line for an error whose text may carry a Python worker traceback or a JVM stack (Spark, Py4J).

    Keeps what precedes the trace and the innermost exception's message (the trace's last unindented
    `pkg.SomeError: message` line, which may go on with the wrapper's own words) and drops every frame.
    """
    trace = _TRACE_START.search(text)
    if trace is None and not any(_JAVA_FRAME.match(ln) for ln in text.splitlines()):
        return _printable(" ".join(text.split()))  # a plain message: only its line breaks go
    prefix = text[:trace.start()] if trace else ""
    rest = text[trace.end():] if trace else text
    lines = [ln for ln in rest.splitlines() if ln.strip() and not _JAVA_FRAME.match(ln)]
    exceptions = [ln for ln in lines if _EXCEPTION_LINE.match(ln)]
    if exceptions:
        message = prefix + _EXCEPTION_LINE.sub("", exceptions[-1])
    else:
        message = prefix + " ".join(lines)
    return _printable(" ".join(message.split()) or " ".join(text.split()))


def _printable(line: str) -> str:
    """Decoder errors can quote raw bytes; a terminal gets them escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in line)


def stop_spark() -> None:
    with _LOCK:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()


def session_alive() -> bool:
    """Whether this process's Spark driver JVM still answers (True when no session was started yet).

    A JVM killed under a live Python process (OOM killer, kill -9) leaves pyspark's globals pointing at a
    dead gateway: every later call fails with a Py4J connection error. One cheap round trip tells.
    """
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        return True
    try:
        return not sc._jsc.sc().isStopped()
    except Exception:  # Py4JError / ConnectionError: nobody answers on the gateway's port
        return False


def discard_session() -> None:
    """Forget a dead (or dying) session so the next `get_spark` starts a fresh JVM.

    `stop()` itself would talk to the dead JVM, so pyspark's process-wide state is reset by hand and the
    gateway's launcher process, if any is left, is killed.
    """
    from pyspark import SparkContext

    with _LOCK:
        sc = SparkContext._active_spark_context
        gateway = SparkContext._gateway
        with contextlib.suppress(Exception):
            if gateway is not None:
                gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait(timeout=10)
        with SparkContext._lock:
            SparkContext._active_spark_context = None
            SparkContext._gateway = None
            SparkContext._jvm = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
        del sc
