"""The destination class of the hostile corpus (issue 51 item 1, sim/run/destination.py): every
output flag of the CLI (`WRITERS`, checked against the CLI by tests/test_malformed_corpus.py) x
every dangerous destination (`.`, the home folder, `/`, an input, the user's files, dot-files, a
symlink into another folder, a FIFO, the run's own outputs). Each is refused with one line naming
the flag, exit 2, and nothing changed. tests/hostile_corpus.py adds `DESTINATION_CASES` to ALL_CASES.
"""

# ruff: noqa: E501 (one case per line, however long)
from __future__ import annotations

import os

import typer

from tests.malformed_corpus import TRACE, Case, vrow

# what each command reads; a refused destination stops it before it reads them
TRACE_30 = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.5},100,10\n" for i in range(30))
DAY = "workload: {kind: day, duration_s: 20}\n"
PLAN = "plan -w {d}/t.csv --slo ttft_p99=1s -H h100-sxm --tp 1 -p chunked"

class Symlink:
    """A case file that is a symlink to `target` (relative to the link's folder)."""

    def __init__(self, target: str):
        self.target = target

    def make_at(self, path) -> None:
        path.symlink_to(self.target)


class Fifo:
    """A case file that is a FIFO (a reader or writer that opens it blocks until the other end does)."""

    def make_at(self, path) -> None:
        os.mkfifo(path)


POOL = "hardware: h100-sxm\nmodels: []\n"
MEASUREMENTS = "op,m,n,k,time_s\n"
AIC_GEMM = "gemm_dtype,m,n,k,latency\nbfloat16,1,8,8,0.01\nbfloat16,2,8,8,0.01\n"  # an AIConfigurator GEMM table
PER_REQUEST = '{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 5}\n'
# every output flag of the CLI: (command, flag) -> (argv before the destination, folder or file suffix, the input
# file that argv reads (a file destination is pointed at it), the files the command reads)
WRITERS = {
    ("simulate", "--out"): ("simulate -t {d}/t.csv --max-requests 3", "/", "t.csv", {"t.csv": TRACE}),
    ("simulate", "--csv"): ("simulate -t {d}/t.csv --max-requests 3", ".csv", "t.csv", {"t.csv": TRACE}),
    ("plan", "--out"): (f"{PLAN} --target-qps 1", "/", "t.csv", {"t.csv": TRACE_30}),
    ("sweep", "--out"): ("sweep -g max_num_seqs=8 -t {d}/t.csv --no-plots", "/", "t.csv", {"t.csv": TRACE}),
    ("day run", "--out"): ("day run {d}/day.yaml --no-plot", "/", "day.yaml", {"day.yaml": DAY}),
    ("day plan", "--out"): ("day plan {d}/day.yaml", "/", "day.yaml", {"day.yaml": DAY}),
    ("pool plan", "--out"): ("pool plan {d}/pool.yaml", "/", "pool.yaml", {"pool.yaml": POOL}),
    ("workload sample", "--out"): ("workload sample {d}/s.jsonl", ".jsonl", "s.jsonl", {"s.jsonl": PER_REQUEST}),
    ("calibrate run", "--out"): ("calibrate run --device cpu --quick --base {d}/b.yaml", ".yaml", "b.yaml",
                                 {"b.yaml": "name: mine\n"}),
    ("calibrate fit", "--out"): ("calibrate fit {d}/m.csv --base {d}/b.yaml", ".yaml", "b.yaml",
                                 {"m.csv": MEASUREMENTS, "b.yaml": "name: mine\n"}),
    ("calibrate report", "--plot"): ("calibrate report {d}/p.png {d}/m.csv", ".png", "p.png",
                                     {"m.csv": MEASUREMENTS, "p.png": "a profile named .png\n"}),
    ("calibrate engine", "--out"): ("calibrate engine {d}/v.csv --engine {d}/b.yaml", ".yaml", "b.yaml",
                                    {"v.csv": vrow(), "b.yaml": "name: mine\n"}),
    ("calibrate import-tables", "--out"): ("calibrate import-tables --source {d}/g.csv", ".npz", "g.csv",
                                           {"g.csv": AIC_GEMM}),
    ("validate", "--per-request-out"): ("validate {d}/r.jsonl", ".csv", "r.jsonl", {"r.jsonl": PER_REQUEST}),
}
OUTPUT_FLAGS = ("--out", "--csv", "--plot", "--per-request-out", "--emit")  # options that name where to write


def output_flags_of_cli() -> set[tuple[str, str]]:
    """(command, flag) of every option of the CLI that names an output path (`--emit` writes into --out)."""
    from sim.cli import app

    found = set()

    def walk(command, path: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())
        for param in getattr(command, "params", []):
            flag = next((o for o in param.opts if o in OUTPUT_FLAGS), None)
            if flag is not None and flag != "--emit" and "path" in str(param.bare_type()).lower():
                found.add((path, flag))

    walk(typer.main.get_command(app), "")
    return found


def destination_cases() -> list[Case]:
    """Every writer (WRITERS, checked against the CLI by tests/test_malformed_corpus.py) x every
    dangerous destination: refused with one line naming the flag, exit 2, nothing changed."""
    import pathlib

    home = str(pathlib.Path.home())
    user = {"mine/plan.json": '{"mine": true}\n', "mine/results.parquet": "the user's own\n", "dots/.env": "TOKEN=1\n",
            "other/target/kept.txt": "kept\n", "link": Symlink("other/target")}
    cases = []
    for (command, flag), (base, kind, input_name, files) in WRITERS.items():
        label = f"dest-{command.replace(' ', '-')}{flag}"
        if kind == "/":
            places = {".": ".", "home": home, "root": "/", "input": f"{{d}}/{input_name}", "users-files": "{d}/mine",
                      "dot-files": "{d}/dots", "symlink-elsewhere": "{d}/link"}
            extra = {}
        else:
            places = {".": ".", "home": home, "root": "/", "input": f"{{d}}/{input_name}", "folder": f"{{d}}/dir{kind}",
                      "symlink-elsewhere": f"{{d}}/link{kind}", "fifo": f"{{d}}/fifo{kind}"}
            extra = {f"dir{kind}/kept.txt": "kept\n", f"other/target{kind}": "kept\n",
                     f"link{kind}": Symlink(f"other/target{kind}"), f"fifo{kind}": Fifo()}
        for place, destination in places.items():
            cases.append(Case(f"{label}={place}", [*base.split(), flag, destination], f"{flag}:",
                              {**files, **user, **extra}))
    run = {"run/summary.json": "{}\n", "run/requests.parquet": "earlier\n", "t.csv": TRACE}
    for own in ("summary.json", "requests.parquet"):
        cases.append(Case(f"dest-simulate--csv=runs-own-{own}", [*["simulate", "-t", "{d}/t.csv", "--max-requests", "3", "-o", "{d}/run", "--csv"],
                                                                f"{{d}}/run/{own}"], "--csv:", dict(run)))
    cases.append(Case("dest-simulate--out=holds-its-input", ["simulate", "-t", "{d}/run/requests.parquet", "-o", "{d}/run"],
                      "--out:", dict(run)))
    return cases


DESTINATION_CASES = destination_cases()
