"""Run every `bench/bench_*.py` present, one fresh process each, and print their JSON lines.

    python -m bench.run_all [--scale 1.0] [--only write,snapshot_read] [--timeout 3600]

Benches that accept `--scale` get it; the others run at their own defaults (a note line says so).
Each bench prints exactly one JSON line on stdout; progress and Spark noise go to stderr.
"""
from __future__ import annotations

import argparse
import json
import pkgutil
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent


def bench_modules(only: list[str] | None = None) -> list[str]:
    names = sorted(m.name for m in pkgutil.iter_modules([str(BENCH_DIR)]) if m.name.startswith("bench_"))
    if only:
        names = [n for n in names if n.removeprefix("bench_") in only or n in only]
    return names


def accepts_scale(module: str) -> bool:
    return "--scale" in (BENCH_DIR / f"{module}.py").read_text(encoding="utf-8")


def run_bench(module: str, scale: float, timeout: int) -> list[dict]:
    cmd = [sys.executable, "-m", f"bench.{module}"]
    notes: list[dict] = []
    if accepts_scale(module):
        cmd += ["--scale", str(scale)]
    elif scale != 1.0:
        notes.append({"bench": module, "note": "no --scale option; ran at its default size"})
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return notes + [{"bench": module, "error": f"timed out after {timeout}s"}]
    lines = [ln for ln in proc.stdout.splitlines() if ln.lstrip().startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()[-5:]
        return notes + [{"bench": module, "error": f"exit {proc.returncode}", "stderr_tail": tail}]
    out = [json.loads(ln) for ln in lines]
    for line in out:
        line.setdefault("bench", module)
        line["run_all_wall_s"] = round(time.perf_counter() - start, 1)
    return notes + out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", help="comma-separated bench names (with or without the bench_ prefix)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per bench")
    args = ap.parse_args()
    only = [s.strip() for s in args.only.split(",")] if args.only else None
    failed = False
    for module in bench_modules(only):
        print(f"run_all: {module} ...", file=sys.stderr, flush=True)
        for line in run_bench(module, args.scale, args.timeout):
            failed |= "error" in line
            print(json.dumps(line, default=str), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
