"""Counted launches: a module's kernels run from an instrumented build whose
every memory access and basic block calls the worker (``native/access.h``),
which groups them into warp-level instructions and counts what Nsight Compute
counts where addresses decide it (``native/access_counts.cpp``).

The instrumented library is built from the same generated source and flags as
the module's own (:func:`.build.build_inputs`), with
:data:`.build.INSTRUMENT_FLAGS`, shared variables 16-byte aligned and an
anchor variable whose address gives the place of the static ``__shared__``
variables (thread-locals of the library) in each OS thread. ``readelf`` lists
those variables, ``addr2line`` turns the sites into the source's lines and
``objdump`` gives each basic block's instruction and floating-point operation
counts and the loops (:mod:`.machine_code`; binutils come with g++).
"""
from __future__ import annotations

import contextlib
import math
import re
import struct
import threading
from dataclasses import dataclass, field

from ...errors import KernelArgumentError, WorkbenchError
from ..contract import CompileFailed
from ..counting import (SHARED_STATIC_BASE, STAND_IN_FUNCTION, AccessSample, LaunchCounts,
                        SharedVariable, SiteCount)
from . import build
from .faults import kernel_fault
from .launch import request_prefix, request_tail
from .machine_code import binutils, block_figures, loop_sites
from .protocol import Op, pack_str
from .source import SOURCE_NAME
from .worker import WorkerDied, WorkerError, WorkerGone

#: The anchor variable of an instrumented library (a thread-local).
ANCHOR = "__wbsim_tls_anchor"
#: Consumers of the worker's access events (a mask): bit 0, the counters.
COUNTERS = 1
#: An instrumented launch may run this many times longer than the time limit.
SLOWDOWN = 10

_KINDS = ("load", "store", "atomic", "block")
_SPACES = ("global", "shared", "")
_HEAD = struct.Struct("<5Q")
_REUSE = struct.Struct("<68Q")   # two histograms of 34 buckets (native/access_counts.cpp)
_SITES = struct.Struct("<II")
_SITE = struct.Struct("<IBBBB7Q")
_SAMPLE = struct.Struct("<QII32Q")
_ACCESSOR = re.compile(r'^extern "C" void\* (__wbsim_global_\d+)\(unsigned long long\* __wbsim_n\) '
                       r'\{ \*__wbsim_n = sizeof\(::(.+?)\); return', re.M)
_FILE_SCOPE_DYNAMIC = re.compile(r"static thread_local [^;=]*\* const (\w+) = reinterpret_cast<")


@dataclass
class InstrumentedLibrary:
    """The instrumented build of one module and what is known of it."""

    path: str
    anchor_offset: int                   # of the anchor, in the thread-local segment
    shared: tuple[tuple[str, int, int], ...]  # (name, offset in the segment, bytes)
    accessors: tuple[str, ...]           # of the __device__ variables
    lines: dict = field(default_factory=dict)  # address -> (line or None, function)
    blocks: dict | None = None           # basic-block site -> (instructions, flops32, flops64, addresses)
    loops: object = None                 # machine_code.Loops, once loop_sites has looked
    instructions: list | None = field(default=None, repr=False)  # objdump's, once
    loop_request: bytes | None = field(default=None, repr=False)  # the loops, as a request has them

    def shared_variables(self) -> tuple[SharedVariable, ...]:
        return tuple(SharedVariable(name, SHARED_STATIC_BASE + offset, size)
                     for name, offset, size in self.shared)


_LIBRARIES: dict[str, InstrumentedLibrary] = {}
_LOCK = threading.Lock()


#: ``#pragma unroll`` and what follows it on the line.
_UNROLL = re.compile(r"^([ \t]*)#[ \t]*pragma[ \t]+unroll\b([^\n]*)$", re.M)
#: The count for ``#pragma unroll`` without a number (or with an expression,
#: which g++'s pragma takes unexpanded): a constant trip count up to this is
#: unrolled completely, as nvcc would.
UNROLL_LIMIT = 64


#: What may stand between g++'s unroll pragma and its loop: blank space, comments.
_BEFORE_LOOP = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*(for|while|do)\b", re.S)


def _gxx_unroll(match: re.Match) -> str:
    """g++'s pragma for nvcc's; none (an empty line) where no loop follows,
    which nvcc only warns of and g++ refuses."""
    if not _BEFORE_LOOP.match(match.string, match.end()):
        return ""
    count = re.sub(r"//.*|/\*.*?\*/", "", match[2]).strip().strip("()").strip()
    return f"{match[1]}#pragma GCC unroll {min(int(count), 65534) if count.isdigit() else UNROLL_LIMIT}"


def instrumented_source(generated: str) -> str:
    """``generated`` (a module's C++) for the instrumented build: shared
    variables 16-byte aligned (as a GPU places them, so banks come out the
    same), ``#pragma unroll`` as g++'s (a loop unrolled as nvcc unrolls it:
    each copy of an access is a site of its own, as on a GPU an instruction
    of its own) and the anchor variable at the end."""
    marker = f'#line 1 "{SOURCE_NAME}"'
    head, sep, body = generated.partition(marker)
    if not sep:
        raise WorkbenchError("the module's generated source has no cell marker")
    body = _UNROLL.sub(_gxx_unroll, body)
    aligned = "#undef __shared__\n#define __shared__ thread_local __attribute__((aligned(16)))\n"
    return (head + aligned + sep + body.rstrip("\n")
            + f'\n#line 1 "wbsim_anchor"\nextern "C" {{ __thread char {ANCHOR}; }}\n')


def instrumented_library(module) -> InstrumentedLibrary:
    """The instrumented build of ``module`` (a :class:`.module.SimModule`),
    made once per process (and cached on disk like every build)."""
    with _LOCK:
        lib = _LIBRARIES.get(module.path)
        if lib is not None:
            return lib
    inputs = build.build_inputs(module.path)
    if inputs is None:
        raise WorkbenchError("this module was compiled before the workbench was imported again; "
                             "run its cell (or wb.compile) again to count its accesses")
    generated, flags = inputs
    try:
        built = build.build_library(instrumented_source(generated), list(flags), checked=False,
                                    warnings=False, instrumented=True)
    except CompileFailed as exc:  # the module itself compiled: this is the simulator's failure
        first = "\n".join(exc.log.strip().splitlines()[:6])
        raise WorkbenchError(f"the simulator could not build this module for counting (g++ "
                             f"with ThreadSanitizer's instrumentation):\n{first}") from None
    path = str(built.path)
    anchor, shared = _thread_locals(path, set(_FILE_SCOPE_DYNAMIC.findall(generated)))
    device = _device_variables(generated)
    accessors = tuple(symbol for symbol, name in _ACCESSOR.findall(generated) if name in device)
    lib = InstrumentedLibrary(path, anchor, shared, accessors)
    with _LOCK:
        if len(_LIBRARIES) > 64:
            _LIBRARIES.pop(next(iter(_LIBRARIES)))
        return _LIBRARIES.setdefault(module.path, lib)


def _thread_locals(path: str, skip: set[str]) -> tuple[int, tuple[tuple[str, int, int], ...]]:
    """The anchor's offset and the static ``__shared__`` variables (name,
    offset, bytes) among the library's thread-locals: all of them but the
    anchor, guard variables and the pointers to dynamic shared memory."""
    anchor, shared = None, []
    for line in binutils("readelf", ["-sW", "-C", path]).splitlines():
        parts = line.split(None, 7)
        if len(parts) < 8 or parts[3] != "TLS" or parts[6] == "UND":
            continue
        offset, size, name = int(parts[1], 16), int(parts[2], 0), parts[7]
        if name == ANCHOR:
            anchor = offset
        elif size and name not in skip and not name.startswith(("guard variable", "__tls_guard")):
            shared.append((name, offset, size))
    if anchor is None:
        raise WorkbenchError(f"the instrumented library {path} has no {ANCHOR}")
    return anchor, tuple(sorted(set(shared), key=lambda v: v[1]))


def _device_variables(generated: str) -> set[str]:
    """Qualified names of the ``__device__`` (not ``__constant__``) module
    variables of the generated source's cell: global memory on a GPU."""
    from ... import cxx  # (the foundation's scanner; cheap once loaded)
    body = generated.partition(f'#line 1 "{SOURCE_NAME}"')[2].partition('#line 1 "wbsim_launchers"')[0]
    return {v.qualified_name for v in cxx.find_globals(body, None) if v.space == "device"}


# -- sites to lines ------------------------------------------------------------------
_FRAME = re.compile(r"^(?:0x[0-9a-f]+: )?(?: \(inlined by\) )?(?P<function>.*?) at (?P<file>.*?):(?P<line>\d+|\?)")


def address_lines(lib: InstrumentedLibrary, addresses) -> dict:
    """``address -> (line of the source or None, function)`` for ``addresses``
    in the library, through addr2line's inline frames: the innermost frame in
    the source itself (the launcher's and the prelude's are not)."""
    missing = sorted({a for a in addresses if a not in lib.lines})
    if missing:
        out = binutils("addr2line", ["-a", "-i", "-p", "-f", "-C", "-e", lib.path],
                        "".join(f"{a:#x}\n" for a in missing))
        found: dict[int, tuple] = {}
        current = None
        for text in out.splitlines():
            if text.startswith("0x"):
                current = int(text.split(":", 1)[0], 16)
                found[current] = (None, "")
            if current is None:
                continue
            m = _FRAME.match(text)
            if m and m["function"].startswith(STAND_IN_FUNCTION + "("):
                found[current] = (None, STAND_IN_FUNCTION)
            elif (m and found[current][0] is None and m["line"] != "?"
                    and m["file"].rsplit("/", 1)[-1] == SOURCE_NAME):
                function = m["function"]
                found[current] = (int(m["line"]), "" if "__wbsim" in function else function.replace(".localalias", ""))
        lib.lines.update(found)
        for a in missing:
            lib.lines.setdefault(a, (None, ""))
    return lib.lines


def site_lines(lib: InstrumentedLibrary, sites, blocks: dict) -> dict:
    """``(site, kind) -> (line, function)``: an access's line is its hook
    call's (the instruction before the return address ``site``); a basic
    block's is that of its first instruction in the source (its coverage call
    has the launcher's)."""
    wanted = {}
    for site, kind in sites:
        if kind == 3:
            wanted[site, kind] = [site, *blocks.get(site, (0, 0, 0, ()))[3]]
        else:
            wanted[site, kind] = [site - 1]
    lines = address_lines(lib, [a for candidates in wanted.values() for a in candidates])
    out = {}
    for key, candidates in wanted.items():
        out[key] = next((lines[a] for a in candidates if lines[a][0] is not None
                         or lines[a][1] == STAND_IN_FUNCTION), (None, ""))
    return out


# -- the launch ------------------------------------------------------------------------
def instrumentation_part(lib: InstrumentedLibrary, consumers: int, stride: int,
                         data: bytes = b"") -> bytes:
    """The part of an instrumented launch request after the launch's own
    (``native/worker.cpp``): consumers, block stride, the anchor and the
    static shared variables, the ``__device__`` variables' accessors, the
    loops (:func:`loop_sites`, for the counters), what the consumers are
    given (``data``)."""
    parts = [struct.pack("<IIQI", consumers, stride, lib.anchor_offset, len(lib.shared))]
    parts += [struct.pack("<qQ", offset - lib.anchor_offset, size) for _, offset, size in lib.shared]
    parts.append(struct.pack("<I", len(lib.accessors)))
    parts += [pack_str(a) for a in lib.accessors]
    parts.append(_loop_request(lib) if consumers & COUNTERS else struct.pack("<3I", 0, 0, 0))
    parts += [struct.pack("<I", len(data)), data]
    return b"".join(parts)


def _loop_request(lib: InstrumentedLibrary) -> bytes:
    """The loops' part of a request (:func:`.machine_code.loop_sites`), made once."""
    if lib.loop_request is None:
        loops = loop_sites(lib)
        pairs = sorted(loops.sites.items())
        lib.loop_request = b"".join([
            struct.pack("<I", len(loops.markers)),
            *(struct.pack("<II", site, loop) for site, loop in loops.markers),
            struct.pack(f"<I{len(loops.parents)}i", len(loops.parents), *loops.parents),
            struct.pack("<I", len(pairs)), *(struct.pack("<II", s, loop) for s, loop in pairs)])
    return lib.loop_request


def launch(backend, function, grid, block, shared_mem: int, arguments: bytes,
           cooperative: bool, max_blocks: int | None = None) -> LaunchCounts:
    """Run one launch of ``function`` from its module's instrumented build and
    return what it counted. The kernel really runs (its results are written)."""
    lib = instrumented_library(function.module)
    blocks = grid[0] * grid[1] * grid[2]
    stride = sample_stride(grid, max_blocks)
    reply = run_instrumented(backend, function, grid, block, shared_mem, arguments, cooperative,
                             COUNTERS, stride)
    counts = parse_reply(reply, lib, function.name, grid, block, shared_mem)
    counts.module_path = str(function.module.path)
    return counts


def sample_stride(grid, max_blocks: int | None) -> int:
    """Every how many blocks (in launch order) a sampled launch counts: at most
    ``max_blocks`` of them; in a grid of several rows, a stride prime to the
    row's length (``grid[0]``), so that the sampled blocks do not all sit at
    one x (a 2-D grid whose last column of blocks is partly idle would be
    counted as if every block were full)."""
    blocks = grid[0] * grid[1] * grid[2]
    if not max_blocks or blocks <= max_blocks:
        return 1
    stride = -(-blocks // int(max_blocks))
    while blocks > grid[0] and math.gcd(stride, grid[0]) != 1:
        stride += 1
    return stride


def run_instrumented(backend, function, grid, block, shared_mem: int, arguments: bytes,
                     cooperative: bool, consumers: int, stride: int = 1, data: bytes = b"") -> bytes:
    """Run one launch of ``function`` from its module's instrumented build
    for the worker's ``consumers`` (a mask of kinds: ``native/access.h``)
    and return the worker's reply: the kernel's nanoseconds, then each
    consumer's results (:func:`reply_parts`)."""
    module = function.module
    lib = instrumented_library(module)
    timeout = backend.timeout_s * SLOWDOWN
    extra = instrumentation_part(lib, consumers, stride, data)
    with backend.lock:
        worker = backend.worker_for(False)
        for attempt in (1, 2):
            try:
                fresh = lib.path not in worker.libraries
                handle = worker.load(lib.path)
                if fresh:  # the values set with set_global, in this library's variables too
                    for name, value in module._globals.items():
                        worker.request(Op.SYMBOL_WRITE, struct.pack("<I", handle)
                                       + pack_str(module._symbol(name))
                                       + struct.pack("<QQ", 0, len(value)) + value)
                payload = (request_prefix(handle, function.symbol, grid, block, shared_mem, timeout)
                           + arguments + request_tail(backend.arena, False, cooperative) + extra)
                reply = worker.request(Op.INSTRUMENTED_LAUNCH, payload, timeout=timeout)
                break
            except WorkerDied as died:
                if isinstance(died, WorkerGone) and attempt == 1:
                    continue
                backend._print_device_output()
                backend.arena.clear_fault()
                raise kernel_fault(function.name, False, died, timeout, backend.arena) from None
            except WorkerError as exc:
                raise KernelArgumentError(str(exc)) from None
        backend._print_device_output()
    return reply


def reply_parts(reply: bytes) -> tuple[float, list[bytes]]:
    """``(seconds the kernel ran, [each consumer's results])`` of an
    instrumented launch's reply."""
    elapsed_ns, nparts = struct.unpack_from("<QI", reply)
    pos, parts = 12, []
    for _ in range(nparts):
        (n,) = struct.unpack_from("<I", reply, pos)
        parts.append(reply[pos + 4:pos + 4 + n])
        pos += 4 + n
    return elapsed_ns / 1e9, parts


def parse_reply(reply: bytes, lib: InstrumentedLibrary, kernel: str, grid, block,
                shared_mem: int) -> LaunchCounts:
    """The worker's reply to an instrumented launch as :class:`LaunchCounts`."""
    seconds, parts = reply_parts(reply)
    counter = parts[0] if parts else b""
    recorded, total, fp_read, fp_write, fp_any = _HEAD.unpack_from(counter)
    reuse = _REUSE.unpack_from(counter, _HEAD.size)
    nsites, cut = _SITES.unpack_from(counter, _HEAD.size + _REUSE.size)
    pos = _HEAD.size + _REUSE.size + _SITES.size
    raw = []
    for _ in range(nsites):
        site, kind, space, piece, size, *figures = _SITE.unpack_from(counter, pos)
        pos += _SITE.size
        sample = None
        if kind != 3:
            block_linear, warp, mask, *addresses = _SAMPLE.unpack_from(counter, pos)
            pos += _SAMPLE.size
            if mask:
                gx, gy = grid[0], grid[1]
                index = (block_linear % gx, block_linear // gx % gy, block_linear // (gx * gy))
                sample = AccessSample(index, warp, size, tuple(
                    a if mask >> lane & 1 else None for lane, a in enumerate(addresses)))
        raw.append((site, kind, space, piece, figures, sample))
    blocks = block_figures(lib) if any(r[1] == 3 for r in raw) else {}
    lines = site_lines(lib, {(r[0], r[1]) for r in raw}, blocks)
    sites = []
    for site, kind, space, piece, (execs, lanes, nbytes, units, ideal, worst, uneven), sample in raw:
        line, function = lines.get((site, kind), (None, ""))
        instructions, f32, f64 = blocks.get(site, (1, 0, 0))[:3] if kind == 3 else (1, 0, 0)
        sites.append(SiteCount(_KINDS[kind], _SPACES[space], line, function, site, piece, execs,
                               lanes, nbytes, units, ideal, worst, sample, instructions, f32, f64,
                               uneven))
    sites.sort(key=lambda s: (s.line is None, s.line or 0, s.site, s.piece, s.kind))
    return LaunchCounts(kernel, tuple(grid), tuple(block), int(shared_mem), sites, total,
                        recorded, fp_read, fp_write, fp_any, cut, seconds,
                        lib.shared_variables(), reuse_loads=reuse[:34], reuse_stores=reuse[34:])


# -- counting the launches of a block of code ---------------------------------------
class SelectedLaunches:
    """A launch observer that takes the launches of kernels whose name matches
    ``kernel``, after ``skip`` of them and up to ``count``: each is run by
    :meth:`take` (a subclass's) and its result goes to ``launches``."""

    def __init__(self, backend, kernel: str | None, skip: int, count: int | None):
        self.backend = backend
        self.match = _name_matcher(kernel)
        self.skip = int(skip)
        self.count = count
        self.launches: list = []

    def take(self, function, grid, block, shared_mem, arguments, cooperative):
        raise NotImplementedError

    def __call__(self, function, grid, block, shared_mem, arguments, cooperative) -> bool:
        if not self.match(function.name):
            return False
        if self.skip > 0:
            self.skip -= 1
            return False
        if self.count is not None and len(self.launches) >= self.count:
            return False
        self.launches.append(self.take(function, grid, block, shared_mem, arguments, cooperative))
        return True


class Counting(SelectedLaunches):
    """The backend's launch observer while :func:`count_launches` is active: the
    launches it selects run instrumented and their counts go to ``launches``."""

    def __init__(self, backend, kernel: str | None, skip: int, count: int | None,
                 max_blocks: int | None):
        super().__init__(backend, kernel, skip, count)
        self.max_blocks = max_blocks

    def take(self, function, grid, block, shared_mem, arguments, cooperative) -> LaunchCounts:
        return launch(self.backend, function, grid, block, shared_mem, arguments, cooperative,
                      self.max_blocks)


def _name_matcher(kernel: str | None):
    if kernel is None:
        return lambda name: True
    if kernel.startswith("regex:"):
        pattern = re.compile(kernel[6:])
        return lambda name: pattern.search(name) is not None
    base = kernel.split("<", 1)[0].split("::")[-1].strip()
    return lambda name: name.split("<", 1)[0].split("::")[-1].strip() == base


@contextlib.contextmanager
def count_launches(backend, kernel: str | None = None, skip: int = 0, count: int | None = None,
                   max_blocks: int | None = None):
    """See :meth:`workbench.backends.contract.Instrumentation.count_launches`."""
    if backend.checked:
        raise WorkbenchError("counting accesses needs the plain simulator, not the checked one: "
                             "wb.backend('simulator', checked=False)")
    observer = Counting(backend, kernel, skip, count, max_blocks)
    previous, backend.launch_observer = backend.launch_observer, observer
    try:
        yield observer.launches
    finally:
        backend.launch_observer = previous
