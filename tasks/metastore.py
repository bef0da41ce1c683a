"""An embedded Hive Metastore for `make run` and the tests, from pyspark's own jars (nothing to download).

pyspark ships Hive 2.3's metastore, Derby and DataNucleus; `org.apache.hadoop.hive.metastore.HiveMetaStore`
serves the Thrift API from them with a `hive-site.xml` on Derby in a folder of its own (schema created on
first start). Up in ~6 s. `python -m tasks.metastore STATE_DIR [PORT]` runs one in the foreground.

It listens on the loopback only: the metastore's Thrift API takes no credentials, and Hive 2.3's own main class
binds every interface with no setting to change it (`hive.metastore.thrift.bind.host` is Hive 4's), so
`LoopbackMetastore.java`, compiled here against those jars on first use (the JDK's `javac`, ~2 s), starts the
same server on the address it is given.

Environment: `TIDEMARK_METASTORE_PORT` (supervisor; default 9083), `TIDEMARK_METASTORE_HOST` (default
127.0.0.1; another address is an explicit choice the supervisor warns about), `TIDEMARK_EMBEDDED_METASTORE=0` to
not start one (point `TIDEMARK_HIVE_METASTORE_URIS` at your own).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape

from engine import env

LAUNCHER = Path(__file__).with_name("LoopbackMetastore.java")
MAIN_CLASS = LAUNCHER.stem
LOOPBACK = "127.0.0.1"
HIVE_MAIN = "org.apache.hadoop.hive.metastore.HiveMetaStore"
WILDCARDS = ("0.0.0.0", "::", "[::]")
READY_TIMEOUT_S = 120.0


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_hive_site(folder: Path) -> Path:
    """hive-site.xml: Derby in `folder`, schema auto-created, no version check, synchronous logging."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.async.log.enabled": "false",
        "hive.metastore.warehouse.dir": (folder / "warehouse").as_uri(),
    }
    body = "".join(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
                   for k, v in settings.items())
    path = folder / "hive-site.xml"
    path.write_text(f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n', encoding="utf-8")
    return path


def host() -> str:
    """The address the embedded metastore listens on: the loopback unless `TIDEMARK_METASTORE_HOST` says otherwise."""
    return env.text("TIDEMARK_METASTORE_HOST", LOOPBACK)


def compiled_launcher(folder: Path) -> Path:
    """The folder holding `LoopbackMetastore.class`, compiled from its source when missing or older."""
    classes = folder / "launcher"
    target = classes / f"{MAIN_CLASS}.class"
    if target.exists() and target.stat().st_mtime >= LAUNCHER.stat().st_mtime:
        return classes
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("the embedded metastore needs the JDK's javac (Java 17) to build its loopback launcher; "
                           "install a JDK, or set TIDEMARK_EMBEDDED_METASTORE=0 and TIDEMARK_HIVE_METASTORE_URIS")
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", f"{pyspark_jars()}/*", str(LAUNCHER)],
                   check=True, capture_output=True)
    return classes


def command(folder: Path, port: int, bind: str | None = None) -> list[str]:
    """The metastore's command line. Every interface (0.0.0.0, as in a container that others reach by name) is
    Hive's own main class and needs only a JRE; one address is the launcher, which needs the JDK's javac once."""
    address = bind or host()
    java = ["java", "-Xmx384m", f"-Dderby.stream.error.file={folder / 'derby.log'}", "-cp"]
    # The folder first on the class path: the metastore finds hive-site.xml there.
    if address in WILDCARDS:
        return [*java, os.pathsep.join([str(folder), f"{pyspark_jars()}/*"]), HIVE_MAIN, "-p", str(port)]
    classpath = os.pathsep.join([str(folder), str(compiled_launcher(folder)), f"{pyspark_jars()}/*"])
    return [*java, classpath, MAIN_CLASS, address, str(port)]


class EmbeddedMetastore:
    """A metastore process on `bind`:`port` (the loopback unless told otherwise) with its Derby database in
    `folder`; it is reached at 127.0.0.1 either way."""

    def __init__(self, folder: Path, port: int | None = None, bind: str = LOOPBACK) -> None:
        self.folder = Path(folder)
        self.port = port or free_port()
        self.bind = bind
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> str:
        write_hive_site(self.folder)
        log = open(self.folder / "metastore.log", "ab")
        # Own process group, so stopping it never touches the caller's; its log stays out of the terminal.
        self.proc = subprocess.Popen(command(self.folder, self.port, self.bind), cwd=self.folder, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self._wait_ready(timeout_s)
        return self.uri

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the metastore exited with {self.proc.returncode}; see {self.folder / 'metastore.log'}")
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"the metastore did not listen on {self.port} within {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def main(argv: list[str]) -> int:
    folder = Path(argv[0] if argv else "state/metastore").resolve()
    metastore = EmbeddedMetastore(folder, int(argv[1]) if len(argv) > 1 else 9083, host())
    # a TERM (a supervisor, `kill`) ends the JVM too, even while it starts: it runs in a process group of its
    # own, which the default handler would leave listening on the port
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        print(f"metastore: {metastore.start()} (Derby in {folder})", flush=True)
        assert metastore.proc is not None
        return metastore.proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        metastore.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
