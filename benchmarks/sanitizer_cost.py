"""What the sanitizer costs on the simulator: a launch under each tool against a
plain one, for kernels of a million threads (``simulator_profile.py``'s);
prints a table.

    python benchmarks/sanitizer_cost.py             # a few minutes on 2 cores
    python benchmarks/sanitizer_cost.py --tools racecheck

Target: racecheck at most 30x the plain launch. Times are the worker's own
(the launch without the round trip), the best of a few runs: the machine may
be shared. The first launch under a tool also builds its library (the
instrumented one for racecheck, synccheck and initcheck, the
AddressSanitizer one for memcheck; cached on disk): not timed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import workbench as wb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import print_table  # noqa: E402
from simulator_profile import KERNELS, launches  # noqa: E402

TARGET_RATIO = 30.0
TOOLS = ("racecheck", "synccheck", "initcheck", "memcheck")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=0, help="OS threads running blocks (0: all)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each; the best counts")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated tools")
    args = parser.parse_args(argv)
    tools = [t for t in args.tools.split(",") if t]
    b = wb.backend("simulator", threads=args.threads)
    cases = launches(wb.compile(KERNELS, name="sanitizer_cost"))
    rows = []
    for name, kernel, kargs, launch in cases:
        def plain():
            kernel(*kargs, **launch)
            return b.last_launch_ns / 1e9

        def checked(tool):
            with b.sanitize_launches(tool) as launches:
                kernel(*kargs, **launch)
            assert not launches[0].findings, launches[0].findings
            return launches[0].cpu_seconds

        plain()
        t_plain = min(plain() for _ in range(args.runs * 3))
        row = [name, int(np.prod(launch["grid"]) * np.prod(launch["block"])), t_plain * 1e3]
        for tool in tools:
            checked(tool)  # build, load, warm up
            t = min(checked(tool) for _ in range(args.runs))
            row.append(t / t_plain)
        if "racecheck" in tools:
            row.append("PASS" if row[3 + tools.index("racecheck")] <= TARGET_RATIO else "above")
        rows.append(row)
    header = ["kernel", "threads", "plain ms", *(f"{t} x" for t in tools)]
    if "racecheck" in tools:
        header.append("racecheck <= 30x")
    print_table(f"the sanitizer on the simulator ({b.describe()})", header, rows)
    print("\nplain: the worker's time of the launch; each tool: its launch's time over the plain "
          "one (best of the runs).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
