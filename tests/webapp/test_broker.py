"""webapp.broker: the filesystem broker's exchange files exist whole before anything binds, and an empty one a
killed process left behind is repaired — kombu itself fails on it for every later publish and worker start."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from webapp import broker

_PUBLISH_AND_GET = """
import json, sys
from kombu import Connection, Exchange, Queue
root, name = sys.argv[1], sys.argv[2]
options = {"data_folder_in": root + "/queue", "data_folder_out": root + "/queue", "control_folder": root + "/control"}
queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
with Connection("filesystem://", transport_options=options) as conn:
    conn.Producer().publish({"run": 1}, exchange=queue.exchange, routing_key=name, declare=[queue])
    message = conn.SimpleQueue(queue).get(timeout=10)
    message.ack()
    print(json.dumps(message.payload))
"""


def _publish_and_get(root: Path, name: str) -> subprocess.CompletedProcess:
    """A fresh process (kombu keeps what it declared per process) publishing one message and getting it back."""
    (root / "queue").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", _PUBLISH_AND_GET, str(root), name], capture_output=True, text=True,
                          timeout=60)


def test_an_empty_exchange_file_breaks_kombu_and_is_repaired(tmp_path):
    control = tmp_path / "control"
    control.mkdir()
    (control / "runs.exchange").write_bytes(b"")   # a binder killed between kombu's open("wb") and its write
    broken = _publish_and_get(tmp_path, "runs")
    assert broken.returncode != 0 and "JSONDecodeError" in broken.stderr
    broker.seed_exchanges(control, [])
    assert json.loads((control / "runs.exchange").read_text()) == []
    again = _publish_and_get(tmp_path, "runs")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"run": 1}


def test_missing_exchange_files_are_created_whole_and_bindings_are_kept(tmp_path):
    control = tmp_path / "control"
    broker.seed_exchanges(control, ["runs", *broker.CONTROL_EXCHANGES])
    for name in ("runs", *broker.CONTROL_EXCHANGES):
        assert json.loads((control / f"{name}.exchange").read_text()) == []
    done = _publish_and_get(tmp_path, "runs")
    assert done.returncode == 0, done.stderr
    bound = (control / "runs.exchange").read_text()
    assert json.loads(bound) == [["runs", "", "runs"]]
    broker.seed_exchanges(control, ["runs"])      # a later process start changes nothing that is bound
    assert (control / "runs.exchange").read_text() == bound
    assert not [p for p in control.iterdir() if p.name.startswith(".")], "a file written aside was left"


def test_processes_seeding_at_once_all_see_a_whole_file(tmp_path):
    control = tmp_path / "control"
    errors: list[BaseException] = []

    def seed() -> None:
        try:
            for _ in range(50):
                broker.seed_exchanges(control, ["runs"])
                json.loads((control / "runs.exchange").read_text())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=seed) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
