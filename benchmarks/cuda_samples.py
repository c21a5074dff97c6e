"""NVIDIA's CUDA samples, unchanged, on the simulator and on a GPU through ``wb.program``.

    python benchmarks/cuda_samples.py SAMPLES_DIR                      # the simulator
    python benchmarks/cuda_samples.py SAMPLES_DIR --backend both       # and nvcc on the GPU
    python benchmarks/cuda_samples.py SAMPLES_DIR --save sim.json                # keep the outputs
    python benchmarks/cuda_samples.py SAMPLES_DIR --backend gpu --simulator-results sim.json
    python benchmarks/cuda_samples.py SAMPLES_DIR --only vectorAdd simpleAssert
    python benchmarks/cuda_samples.py SAMPLES_DIR --export .samples    # copy what it needs

SAMPLES_DIR is a checkout of https://github.com/NVIDIA/cuda-samples at COMMIT (its
``Samples/`` and ``Common/``). The programs are the runtime-API programs of
``Samples/0_Introduction`` and the single-file ones of ``2_Concepts_and_Techniques`` and
``6_Performance`` (SAMPLES below; the ones left out, and why, in LEFT_OUT). Each is built
as its CMakeLists.txt builds it: its own folder's sources (and the ``Common/`` sources it
lists), ``-I Common -I <its folder> -std=c++17 --extended-lambda``, and run in its folder
(where it finds its data files), unchanged.

For each program the table gives the simulator's result and the GPU's (``ok``: exit 0,
``waived``: exit 2, the samples' "cannot run here", ``exit N``, ``build failed``, ``fault``,
``timeout``), whether the two printed the same result lines, and the simulator's build
times: the build (a define no program reads makes it a new one, never the cache's) and
the same build again (the cache's). ``N of M`` counts the programs whose simulator run
printed the GPU's result lines with the GPU's exit code, out of those that ran on the GPU
(with ``--backend simulator``: the programs that exited 0 or 2 on the simulator).

"Same result lines" compares stdout line by line after masking what differs between two
runs of the same program on the same machine, or between two devices, and nothing else
(MASKS, then each program's own ``varying`` with its reason): timings and rates (a number
followed by a unit of time, of throughput, or of clock cycles), the device's name (both
sides' names, the simulator's "... (simulated)" included), the executable's path
(``argv[0]``), hexadecimal addresses, and trailing spaces and carriage returns. stderr
is not compared (the simulator writes notes there, ``wbsim: ...``).

The table goes to stdout and, when $OUT is set, to $OUT/cuda_samples.txt, with every
run's output in $OUT/cuda_samples.json (``--simulator-results`` reads such a file back, to
compare a GPU run with simulator runs made elsewhere).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import workbench as wb

REPOSITORY = "https://github.com/NVIDIA/cuda-samples"
COMMIT = "c94ff366aed18c797b8a85dfaac7817b0228b420"  # 2025-09-05, "Merge pull request #379"
OPTIONS = "-std=c++17 --extended-lambda"
SOURCE_SUFFIXES = (".cu", ".cpp", ".c")
TEXT_SUFFIXES = SOURCE_SUFFIXES + (".cuh", ".h", ".hpp", ".hxx", ".inl")


@dataclass(frozen=True)
class Sample:
    """A program of the samples: its folder under ``Samples/``, the ``Common/`` sources
    its CMakeLists.txt compiles in, options beyond OPTIONS, and the parts of its output
    that vary from run to run on any device (regex whose groups are masked, why)."""

    path: str
    common: tuple[str, ...] = ()
    options: str = ""
    varying: tuple[tuple[str, str], ...] = ()
    unordered: str = ""  # why the order of its lines is not the program's (compared as sorted)
    timeout: float | None = None  # seconds; None: the --timeout given

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


SAMPLES = (
    Sample("0_Introduction/asyncAPI",
           varying=((r"CPU executed (\d+) iterations", "host iterations while the GPU works"),
                    (r"time spent (?:executing by the GPU|by CPU in CUDA calls): ([\d.]+)", "milliseconds"))),
    Sample("0_Introduction/clock", varying=((r"Average clocks/block = ([\d.]+)", "clock cycles"),)),
    Sample("0_Introduction/cudaOpenMP", options="-Xcompiler -fopenmp -lgomp"),
    Sample("0_Introduction/fp16ScalarProduct",
           varying=((r"Result \w+ operators?\s*: ([-\d.e+]+)", "inputs from rand() seeded by time()"),
                    (r"Result intrinsics\s*: ([-\d.e+]+)", "inputs from rand() seeded by time()"))),
    Sample("0_Introduction/matrixMul"),
    Sample("0_Introduction/mergeSort"),
    Sample("0_Introduction/simpleAWBarrier"),
    Sample("0_Introduction/simpleAssert",
           varying=((r"OS_System_Type.release = (.*)", "the host's kernel release"),
                    (r"OS Info: <(.*)>", "the host's kernel version"))),
    Sample("0_Introduction/simpleAtomicIntrinsics"),
    Sample("0_Introduction/simpleAttributes"),
    Sample("0_Introduction/simpleCallback"),
    Sample("0_Introduction/simpleCooperativeGroups"),
    Sample("0_Introduction/simpleCubemapTexture"),
    Sample("0_Introduction/simpleHyperQ"),
    Sample("0_Introduction/simpleIPC", common=("helper_multiprocess.cpp",),
           varying=((r"lshmName = simpleIPCshm(\d+)", "a process id"),)),
    Sample("0_Introduction/simpleLayeredTexture"),
    Sample("0_Introduction/simpleMultiCopy"),
    Sample("0_Introduction/simpleMultiGPU"),
    Sample("0_Introduction/simpleOccupancy"),
    Sample("0_Introduction/simpleP2P"),
    Sample("0_Introduction/simplePitchLinearTexture",
           varying=((r"\((?:GB|Mpix)/s\) for pitch linear: (\S+); for array: (\S+)", "rates"),)),
    Sample("0_Introduction/simplePrintf", unordered="device printf of blocks that run at once"),
    Sample("0_Introduction/simpleStreams",
           varying=((r"^(?:memcopy|kernel|non-streamed|\d+ streams):\s*([\d.]+)", "milliseconds"),)),
    Sample("0_Introduction/simpleSurfaceWrite"),
    Sample("0_Introduction/simpleTemplates"),
    Sample("0_Introduction/simpleTexture"),
    Sample("0_Introduction/simpleVoteIntrinsics"),
    Sample("0_Introduction/simpleZeroCopy"),
    Sample("0_Introduction/systemWideAtomics"),
    Sample("0_Introduction/template"),
    Sample("0_Introduction/vectorAdd"),
    Sample("2_Concepts_and_Techniques/inlinePTX"),
    Sample("2_Concepts_and_Techniques/interval"),
    Sample("2_Concepts_and_Techniques/reductionMultiBlockCG"),
    Sample("2_Concepts_and_Techniques/shfl_scan"),
    Sample("2_Concepts_and_Techniques/streamOrderedAllocation"),
    Sample("2_Concepts_and_Techniques/streamOrderedAllocationP2P"),
    Sample("2_Concepts_and_Techniques/threadFenceReduction"),
    Sample("6_Performance/LargeKernelParameter"),
    Sample("6_Performance/alignedTypes"),
    Sample("6_Performance/cudaGraphsPerfScaling",
           varying=((r"^\d+, \d+, \d+, ((?:[-\d.]+, )+)", "every figure after the shape is a measurement: "
                     "times, and whether a wait timed out"),)),
    Sample("6_Performance/transpose"),
)

#: The programs of those folders left out, and why.
LEFT_OUT = {
    "another CUDA library": "0_Introduction/UnifiedMemoryStreams (cuBLAS), 2_Concepts_and_Techniques/"
                            "MC_EstimatePiInlineQ, MC_EstimatePiP, MC_EstimatePiQ (cuRAND), radixSortThrust, "
                            "segmentationTreeThrust (Thrust)",
    "the driver API or NVRTC": "0_Introduction/clock_nvrtc, matrixMulDrv, matrixMulDynlinkJIT, matrixMul_nvrtc, "
                               "simpleAssert_nvrtc, simpleAtomicIntrinsics_nvrtc, simpleDrvRuntime, "
                               "simpleTextureDrv, vectorAddDrv, vectorAddMMAP, vectorAdd_nvrtc; "
                               "2_Concepts_and_Techniques/inlinePTX_nvrtc, streamOrderedAllocationIPC, "
                               "threadMigration",
    "graphics interop or MPI": "0_Introduction/simpleCUDA2GL, simpleTexture3D, simpleMPI; "
                               "2_Concepts_and_Techniques/EGLStream_CUDA_CrossGPU, EGLStream_CUDA_Interop, "
                               "FunctionPointers, boxFilter, imageDenoising, particles",
    "several source files (2_ and 6_ only)": "2_Concepts_and_Techniques/MC_SingleAsianOptionP, MC_EstimatePiInlineP, "
                                             "convolutionSeparable, convolutionTexture, dct8x8, eigenvalues, "
                                             "histogram, reduction, scalarProd, scan, sortingNetworks; "
                                             "6_Performance/UnifiedMemoryPerf",
}

#: What differs between runs or devices, masked in every program's output (see the docstring).
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_TIME_UNIT = r"(?:ms|msec|msecs|milliseconds?|s|sec|secs|seconds?|us|usec|µs|microseconds?|ns|nanoseconds?)"
_UNIT = (rf"(?:{_TIME_UNIT}|[A-Za-z]*/s(?:ec)?|[KMGTP]?[Ff]lops|clocks?|cycles?|[KMG]?Hz)\b")
MASKS = (
    # a number and its unit: 1.23 ms, 0.5s, 45 GB/s, 11.48 Mpixels/sec, 3 GFlops, (ms) after it
    (re.compile(rf"(?<![\w.]){_NUMBER}(?=\s*\(?\s*{_UNIT})"), "<measured>"),
    # a unit, then the number: "time (us):11.34", "Time (ms): 15.68"
    (re.compile(rf"(\(\s*{_TIME_UNIT}\s*\)\s*[=:]\s*){_NUMBER}"), r"\1<measured>"),
    # what a program calls a time, a throughput, a bandwidth or a performance
    (re.compile(rf"((?:[Tt]ime|[Tt]hroughput|[Bb]andwidth|[Pp]erformance)\s*[=:]\s*){_NUMBER}"),
     r"\1<measured>"),
    (re.compile(r"0x[0-9a-fA-F]{6,}"), "<address>"),
)


def mask(text: str, sample: Sample, names: dict[str, str]) -> list[str]:
    """``text``'s lines with the varying parts replaced (see MASKS, Sample.varying);
    ``names``: literal strings (device names, the executable) and what replaces them."""
    lines = []
    for line in text.replace("\r", "").splitlines():
        for literal, replacement in sorted(names.items(), key=lambda kv: -len(kv[0])):
            if literal:
                line = line.replace(literal, replacement)
        for pattern, why in sample.varying:
            m = re.search(pattern, line)
            if m:
                for g in range(m.lastindex or 0, 0, -1):  # from the last group: offsets stay right
                    line = line[:m.start(g)] + f"<varies: {why}>" + line[m.end(g):]
        for pattern, replacement in MASKS:
            line = pattern.sub(replacement, line)
        lines.append(line.rstrip())
    return lines


# -- running --------------------------------------------------------------------------------
@dataclass
class Outcome:
    status: str                 # ok, waived, exit N, build failed, fault, timeout
    detail: str = ""
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    executable: str = ""
    build_s: float | None = None
    cached_build_s: float | None = None
    run_s: float | None = None
    device: str = ""

    @property
    def ran(self) -> bool:
        return self.returncode is not None


def _files(folder: Path, common: Path, sample: Sample) -> dict[str, str]:
    files = {p.name: p.read_text(errors="replace") for p in sorted(folder.iterdir())
             if p.is_file() and p.name.endswith(TEXT_SUFFIXES)}
    for name in sample.common:
        files[name] = (common / name).read_text(errors="replace")
    return files


def _status(returncode: int) -> str:
    return {0: "ok", 2: "waived"}.get(returncode, f"exit {returncode}")


def run_sample(root: Path, sample: Sample, backend: str, time_builds: bool, timeout: float) -> Outcome:
    folder = root / "Samples" / sample.path
    common = root / "Common"
    files = _files(folder, common, sample)
    options = f"-I {common} -I {folder} {OPTIONS} {sample.options}".strip()
    nonce = f" -D__WB_SAMPLES_BUILD_{uuid.uuid4().hex[:12]}" if time_builds else ""
    here = os.getcwd()
    os.chdir(folder)  # where the program finds its data files, as when run from its folder
    try:
        try:
            run = wb.program(files=files, options=options + nonce, backend=backend, echo=False,
                             check=False, timeout=sample.timeout or timeout)
        except wb.CompileError as exc:
            first = next((d.message for d in exc.errors), str(exc)).splitlines()[0]
            return Outcome("build failed", first[:160])
        except wb.ProgramError as exc:
            status = "timeout" if exc.timed_out else "fault"
            detail = (exc.fault or str(exc)).strip().splitlines()[0][:160]
            return Outcome(status, detail, exc.returncode, exc.stdout, exc.stderr)
        except wb.WorkbenchError as exc:
            return Outcome("build failed", str(exc).splitlines()[0][:160])
        outcome = Outcome(_status(run.returncode), "", run.returncode, run.stdout, run.stderr,
                          str(run.command[0]), run.build.seconds, None, run.seconds, active_device_name())
        if time_builds:
            again = wb.programs.build_program(files=files, options=options + nonce, backend=backend)
            outcome.cached_build_s = again.seconds
        if run.returncode not in (0, 2):
            tail = [line for line in run.stderr.splitlines() if line.strip()]
            outcome.detail = (tail[-1] if tail else "")[:160]
        return outcome
    finally:
        os.chdir(here)


def active_device_name() -> str:
    """The active device's name as a program prints it (without the simulator's note)."""
    try:
        return wb.compat.device_name().replace(" (simulated)", "")
    except wb.WorkbenchError:
        return ""


def compare(sample: Sample, sim: Outcome | None, gpu: Outcome | None, names: dict[str, str]) -> str:
    if sim is None or gpu is None:
        return ""
    if not (sim.ran and gpu.ran):
        return "no"
    if sim.returncode != gpu.returncode:
        return "no (exit codes differ)"
    local = dict(names)
    for o in (sim, gpu):
        if o.executable:
            local[o.executable] = "<program>"
    a, b = mask(sim.stdout, sample, local), mask(gpu.stdout, sample, local)
    if sample.unordered:
        a, b = sorted(a), sorted(b)
    if a == b:
        return "yes"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"no (line {i + 1}: {x[:50]!r} vs {y[:50]!r})"
    return f"no ({len(a)} lines vs {len(b)})"


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Columns aligned left, one line a row."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _outcome_json(o: Outcome | None) -> dict | None:
    return None if o is None else o.__dict__


def _load_outcomes(path: Path) -> dict[str, Outcome]:
    data = json.loads(path.read_text())
    return {name: Outcome(**entry["simulator"]) for name, entry in data["programs"].items()
            if entry.get("simulator")}


def export(root: Path, dest: Path) -> None:
    """Copy the listed programs' folders and ``Common/`` (what the runs need) to ``dest``."""
    for sample in SAMPLES:
        shutil.copytree(root / "Samples" / sample.path, dest / "Samples" / sample.path, dirs_exist_ok=True)
    shutil.copytree(root / "Common", dest / "Common", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("lib", "data", "GL", "UtilNPP"))
    (dest / "COMMIT").write_text(COMMIT + "\n")
    print(f"copied {len(SAMPLES)} programs and Common/ to {dest}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("samples_dir", type=Path, help="a checkout of NVIDIA/cuda-samples at COMMIT")
    parser.add_argument("--backend", choices=("simulator", "gpu", "both"), default="simulator")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these programs only (folder names)")
    parser.add_argument("--simulator-results", type=Path, metavar="JSON",
                        help="simulator results of an earlier run (its cuda_samples.json) to compare with")
    parser.add_argument("--no-build-times", action="store_true",
                        help="let the simulator's builds come from the cache (faster; no build times)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a program may run (default 300)")
    parser.add_argument("--save", type=Path, metavar="JSON", help="write every run's output to JSON too "
                        "(besides $OUT/cuda_samples.json), for --simulator-results")
    parser.add_argument("--export", type=Path, metavar="DEST", help="copy what the runs need to DEST and stop")
    args = parser.parse_args(argv)
    root = args.samples_dir.resolve()
    if not (root / "Common" / "helper_cuda.h").exists():
        parser.error(f"{root} has no Common/helper_cuda.h: give a checkout of {REPOSITORY}")
    if args.export:
        export(root, args.export.resolve())
        return 0
    samples = [s for s in SAMPLES if not args.only or s.name in args.only]
    backends = ["simulator", "gpu"] if args.backend == "both" else [args.backend]
    if args.simulator_results and "simulator" in backends:
        parser.error("--simulator-results replaces the simulator's runs: use --backend gpu")
    recorded = _load_outcomes(args.simulator_results) if args.simulator_results else {}
    names: dict[str, str] = {}
    results: dict[str, dict[str, Outcome]] = {}
    for sample in samples:
        results[sample.name] = {}
        for backend in backends:
            start = time.perf_counter()
            outcome = run_sample(root, sample, backend, time_builds=backend == "simulator"
                                 and not args.no_build_times, timeout=args.timeout)
            results[sample.name][backend] = outcome
            print(f"{sample.name:28s} {backend:9s} {outcome.status:12s} {time.perf_counter() - start:7.1f} s "
                  f"{outcome.detail[:80]}", flush=True)
        if sample.name in recorded:
            results[sample.name]["simulator"] = recorded[sample.name]
    for r in results.values():  # every device the runs saw, by the name a program prints
        for o in r.values():
            if o.device:
                names[o.device + " (simulated)"] = names[o.device] = "<device>"

    rows, matched, counted = [], 0, 0
    have_gpu = "gpu" in backends
    for sample in samples:
        r = results[sample.name]
        sim, gpu = r.get("simulator"), r.get("gpu")
        same = compare(sample, sim, gpu, names) if have_gpu else ""
        if have_gpu:
            if gpu is not None and gpu.ran:
                counted += 1
                matched += same == "yes"
        elif sim is not None:
            counted += 1
            matched += sim.status in ("ok", "waived")

        def cell(o):
            return "" if o is None else o.status + (f": {o.detail[:60]}" if o.detail else "")
        rows.append([sample.name, cell(sim), cell(gpu) if have_gpu else "-", same or "-",
                     f"{sim.build_s:.2f}" if sim and sim.build_s is not None else "-",
                     f"{sim.cached_build_s:.3f}" if sim and sim.cached_build_s is not None else "-",
                     f"{sim.run_s:.2f}" if sim and sim.run_s is not None else "-",
                     f"{gpu.run_s:.2f}" if gpu and gpu.run_s is not None else "-"])
    title = f"CUDA samples ({REPOSITORY} at {COMMIT[:12]}) through wb.program"
    header = ["program", "simulator", "GPU", "same result lines", "sim build s", "cached s", "sim run s",
              "GPU run s"]
    table = format_table(header, rows)
    print(f"\n{title}\n{table}")
    what = "printed the GPU's result lines" if have_gpu else "ran on the simulator (exit 0 or waived)"
    of = "of those that ran on the GPU" if have_gpu else "listed"
    summary = [f"\n{matched} of {counted} programs {what} ({of})"]
    builds = [o.build_s for r in results.values() for b, o in r.items()
              if b == "simulator" and o.build_s is not None and not args.no_build_times]
    cached = [o.cached_build_s for r in results.values() for o in r.values() if o.cached_build_s is not None]
    if builds:
        summary.append(f"simulator builds: median {statistics.median(builds):.2f} s, max {max(builds):.2f} s "
                       f"(target < 5 s); cached rebuilds: max {max(cached):.3f} s (target < 0.5 s)")
    summary.append("masked before comparing: timings and rates, device names, the executable's path, "
                   "hex addresses; per program: " + "; ".join(
                       f"{s.name} ({', '.join(dict.fromkeys([why for _, why in s.varying] + ([f'line order: {s.unordered}'] if s.unordered else [])))})"
                       for s in samples if s.varying or s.unordered))
    summary.append("left out: " + "; ".join(f"{why}: {which}" for why, which in LEFT_OUT.items()))
    print("\n".join(summary))
    payload = json.dumps({"repository": REPOSITORY, "commit": COMMIT, "programs": {
        name: {b: _outcome_json(o) for b, o in r.items()} for name, r in results.items()}}, indent=1)
    if args.save:
        args.save.write_text(payload)
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "cuda_samples.txt").write_text(f"{title}\n{table}\n" + "\n".join(summary) + "\n")
        (Path(out) / "cuda_samples.json").write_text(payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
