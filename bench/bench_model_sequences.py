"""Soak the stateful model test: thousands of random operation sequences against the model and hudi 0.5.0.

    python -m bench.bench_model_sequences [--scale 1.0] [--sequences 2000] [--steps 20] [--text-writes 1]
    make model-soak            # TIDEMARK_MODEL_EXAMPLES=... overrides the number of sequences

Runs tests/integration/test_model_stateful.py under the hypothesis `soak` profile (tests/conftest.py: fresh random
sequences, no example database) in one pytest process. `--sequences` (or TIDEMARK_MODEL_EXAMPLES) sets
max_examples, scaled by `--scale`; `--steps` the most steps per sequence; `--text-writes` how many CSV/JSONL
writes (each a Spark job) a sequence may make. Prints one JSON line: sequences, seconds, passed; a failure
prints hypothesis' minimal sequence on stderr (and a `@reproduce_failure` blob to replay it).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.common import emit, log

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--sequences", type=int, default=int(os.environ.get("TIDEMARK_MODEL_EXAMPLES", "2000")))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--text-writes", type=int, default=1)
    args = parser.parse_args()
    sequences = max(1, round(args.sequences * args.scale))
    env = {**os.environ, "HYPOTHESIS_PROFILE": "soak", "TIDEMARK_MODEL_EXAMPLES": str(sequences),
           "TIDEMARK_MODEL_STEPS": str(args.steps), "TIDEMARK_MODEL_TEXT_WRITES": str(args.text_writes)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:xdist", "-p", "no:cacheprovider",
           "tests/integration/test_model_stateful.py"]
    log(f"{sequences} sequences of up to {args.steps} steps: {' '.join(cmd)}")
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    sys.stderr.write(done.stdout[-20000:] + done.stderr[-5000:])
    emit("model_sequences", {"sequences": sequences, "max_steps": args.steps, "seconds": round(seconds, 1),
                             "passed": done.returncode == 0})
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
