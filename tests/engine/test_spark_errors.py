"""`engine.spark.error_line`: Spark worker tracebacks and JVM stacks become one line naming the cause."""
from __future__ import annotations

from engine.spark import error_line, forwarded

WORKER = """compaction 1 failed (An exception was thrown from the Python worker: Traceback (most recent call last):
  File "/venv/pyspark/worker.py", line 4327, in invoke_udf
    run_process()
  File "/repo/engine/read/slice_reader.py", line 109, in iter_base
    raise TidemarkError(f"base file {path} is unreadable") from None
engine.errors.TidemarkError: base file /t/a.parquet is unreadable: bad footer.); it is still inflight"""

JVM = """An error occurred while calling o52.parquet.
: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows.
\tat org.apache.spark.sql.execution.X.run(X.scala:1)
Caused by: java.io.IOException: No space left on device
\tat java.io.FileOutputStream.writeBytes(Native Method)
\t... 5 more"""


def test_worker_traceback_keeps_the_wrapper_and_the_cause():
    assert error_line(WORKER) == ("compaction 1 failed (base file /t/a.parquet is unreadable: bad footer.); "
                                  "it is still inflight")


def test_jvm_stack_keeps_the_innermost_cause():
    assert error_line(JVM) == "No space left on device"


def test_a_cause_whose_class_is_not_named_error():
    text = ("write 1 failed and was rolled back: An exception was thrown from the Python worker:\n"
            "Traceback (most recent call last):\n  File \"x\", line 1, in f\n"
            "pyarrow.lib.ArrowInvalid: Failed to parse string: 'x'\n")
    assert error_line(text) == "write 1 failed and was rolled back: Failed to parse string: 'x'"


def test_plain_messages_stay_as_they_are_on_one_line():
    assert error_line("table t has no rows") == "table t has no rows"
    assert error_line("first\nsecond") == "first second"


def test_raw_bytes_in_a_message_are_escaped():
    assert error_line("Couldn't deserialize thrift: don't know what type: \x0f") == \
        "Couldn't deserialize thrift: don't know what type: \\x0f"


def test_a_plain_message_starting_with_a_file_name_keeps_it():
    assert error_line("in.jsonl: column(s) id appear more than once") == "in.jsonl: column(s) id appear more than once"


HANG_UP = [b"Traceback (most recent call last):\n",
           b'  File "/v/pyspark/python/lib/pyspark.zip/pyspark/daemon.py", line 264, in manager\n',
           b'  File "/v/pyspark/python/lib/pyspark.zip/pyspark/daemon.py", line 95, in worker\n',
           b"BrokenPipeError: [Errno 32] Broken pipe\n"]


def test_the_daemon_s_hang_up_trace_is_dropped_and_the_rest_forwarded():
    lines = [b"WARNING: Using incubator modules: jdk.incubator.vector\n", b"before\n", *HANG_UP, b"after\n"]
    assert list(forwarded(iter(lines))) == [b"before\n", b"after\n"]


def test_any_other_trace_is_forwarded_whole():
    other = [b"Traceback (most recent call last):\n", b'  File "/repo/engine/x.py", line 3, in f\n',
             b"    g()\n", b"ValueError: bad\n"]
    daemon_but_not_hang_up = [*HANG_UP[:3], b"MemoryError\n"]
    assert b"".join(forwarded(iter(other))) == b"".join(other)
    assert b"".join(forwarded(iter(daemon_but_not_hang_up))) == b"".join(daemon_but_not_hang_up)
    assert b"".join(forwarded(iter(HANG_UP[:2]))) == b"".join(HANG_UP[:2])   # cut short: nothing is lost


def test_a_hang_up_trace_with_source_lines_and_carets_is_dropped_too():
    """pyspark run from source (not its zip) prints each frame's line and Python 3.11's carets under it."""
    trace = [b"Traceback (most recent call last):\n",
             b'  File "/v/site-packages/pyspark/daemon.py", line 264, in manager\n',
             b"    code = worker(sock, authenticated)\n",
             b"           ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n",
             b"BrokenPipeError: [Errno 32] Broken pipe\n"]
    assert list(forwarded(iter([*trace, b"next\n"]))) == [b"next\n"]
