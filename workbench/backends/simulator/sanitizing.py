"""Sanitized launches on the simulator, and schedules explored.

racecheck, synccheck and initcheck run a launch from the module's
instrumented build (:mod:`.instrumented`, the profiler's, built once) with
their consumer of the worker's access events (``native/sanitize_races.cpp``,
``sanitize_sync.cpp``, ``sanitize_init.cpp``); memcheck runs it from the
module's AddressSanitizer build (the checked build of ``%%cuda --check``), in
the checked worker, and turns the fault that ends it into a finding. Each
launch gives :class:`~workbench.backends.sanitizing.LaunchFindings`.

initcheck reads and updates the backend's
:class:`~workbench.backends.initialisation.InitTracker`: the request carries
each tracked allocation's bitmap of written bytes, the reply the bitmaps
after the kernel's stores.
"""
from __future__ import annotations

import contextlib
import re
import struct

import numpy as np

from ... import cxx
from ...errors import ArgumentValueError, KernelArgumentError, KernelFault, WorkbenchError
from ..contract import CompileFailed
from ..sanitizing import TOOLS, LaunchFindings, RawFinding, SiteAccess
from . import build, instrumented
from .faults import kernel_fault
from .launch import request_prefix, request_tail
from .protocol import Op, pack_str
from .source import SOURCE_NAME
from .worker import WorkerDied, WorkerError, WorkerGone

#: The worker's consumer (a bit of the request's mask) of each tool.
CONSUMERS = {"racecheck": 1 << 1, "initcheck": 1 << 2, "synccheck": 1 << 3}

_FINDING = struct.Struct("<BBBBIIQQIIQII")
_ACCESS = ("read", "write", "atomic")
_RACES = ("RAW", "WAR", "WAW")
#: Warp operations by their code (``wbsim_abi.h``: enum wbsim_warp_opcode).
WARP_OPERATIONS = {1: "__shfl_sync", 2: "__shfl_up_sync", 3: "__shfl_down_sync",
                   4: "__shfl_xor_sync", 5: "__ballot_sync", 6: "__any_sync", 7: "__all_sync",
                   8: "__syncwarp", 9: "__match_any_sync", 10: "__match_all_sync"}


def _index(linear: int, dims) -> tuple[int, int, int]:
    x, y = dims[0], dims[1]
    return (linear % x, linear // x % y, linear // (x * y))


def launch(backend, function, grid, block, shared_mem: int, arguments: bytes,
           cooperative: bool, tool: str) -> LaunchFindings:
    """One launch of ``function`` under ``tool``; the kernel really runs."""
    if tool == "memcheck":
        return checked_launch(backend, function, grid, block, shared_mem, arguments, cooperative)
    regions = []
    data = b""
    if tool == "initcheck":
        backend.verify_initialisation()
        regions = backend.initialisation().regions()
        data = b"".join([struct.pack("<I", len(regions)),
                         *(struct.pack("<QQ", r.start, r.nbytes) for r in regions),
                         *(r.packed() for r in regions)])
    reply = instrumented.run_instrumented(backend, function, grid, block, shared_mem, arguments,
                                          cooperative, CONSUMERS[tool], 1, data)
    seconds, parts = instrumented.reply_parts(reply)
    part = parts[0] if parts else b"\0\0\0\0"
    lib = instrumented.instrumented_library(function.module)
    raw, pos = _read_findings(part)
    if tool == "initcheck":
        _update_initialisation(backend, regions, part, pos)
    lines = instrumented.site_lines(lib, {(s, 0) for r in raw for s in (r[4], r[5]) if s}, {})
    findings = [_finding(tool, r, lines, grid, block) for r in raw]
    findings.sort(key=lambda f: (f.severity != "error", -f.count))
    return LaunchFindings(function.name, tool, tuple(grid), tuple(block), int(shared_mem),
                          findings, seconds, lib.shared_variables())


def _read_findings(part: bytes) -> tuple[list, int]:
    (n,) = struct.unpack_from("<I", part)
    pos, out = 4, []
    for _ in range(n):
        out.append(_FINDING.unpack_from(part, pos))
        pos += _FINDING.size
    return out, pos


def _update_initialisation(backend, regions, part: bytes, pos: int) -> None:
    (n,) = struct.unpack_from("<I", part, pos)
    pos += 4
    tracker = backend.initialisation()
    for region in regions[:n]:
        size = (region.nbytes + 7) // 8
        tracker.update(region, np.frombuffer(part, np.uint8, size, pos))
        pos += size


def _finding(tool: str, raw, lines: dict, grid, block) -> RawFinding:
    kind, severity, k1, k2, site1, site2, count, block_linear, tid1, tid2, address, size1, size2 = raw
    line1, function1 = lines.get((site1, 0), (None, "")) if site1 else (None, "")
    line2, function2 = lines.get((site2, 0), (None, "")) if site2 else (None, "")
    where = _index(block_linear, grid)
    if tool == "racecheck":
        first = SiteAccess(_ACCESS[k1] if k1 < 3 else "", line1, function1, _index(tid1, block), size1)
        second = SiteAccess(_ACCESS[k2] if k2 < 3 else "", line2, function2, _index(tid2, block), size2)
        return RawFinding(tool, _RACES[kind], "warning" if severity else "error", count, where,
                          second, first, "shared", address)
    if tool == "initcheck":
        second = SiteAccess(_ACCESS[k2] if k2 < 3 else "read", line2, function2,
                            _index(tid2, block), size2)
        return RawFinding(tool, "uninitialized read", "error", count, where, second, None,
                          "global", address)
    op = WARP_OPERATIONS.get(k2, "a warp operation")
    second = SiteAccess(op, line2, function2, _index(tid2, block))
    return RawFinding(tool, "invalid arguments", "error", count, where, second, None, "",
                      None, f"mask {size1:#010x} leaves the calling thread (lane {tid2 % 32}) out")


# -- memcheck: the AddressSanitizer build ------------------------------------------------------
#: Bytes of each redzone the memcheck build puts after a static __shared__ declaration.
REDZONE = 64
_REDZONE_NAME = "__wbsim_rz_"
_SHARED = re.compile(r"\b__shared__\b")


def redzoned_source(generated: str) -> str:
    """``generated`` for memcheck's build: after each static ``__shared__``
    declaration a thread-local redzone that the checked worker poisons (the
    block's shared variables are thread-locals, which AddressSanitizer gives
    no redzones: without one, a write past a shared array lands in the next
    variable unseen), and the anchor that locates them in each OS thread."""
    marker = f'#line 1 "{SOURCE_NAME}"'
    head, sep, rest = generated.partition(marker)
    body, sep2, tail = rest.partition('#line 1 "wbsim_launchers"')
    visible = cxx.scan(body, None).visible
    pieces, last = [], 0
    for k, m in enumerate(_SHARED.finditer(visible)):
        end = visible.find(";", m.end())
        if end < 0 or "{" in visible[m.end():end] or "}" in visible[m.end():end]:
            continue
        pieces += [body[last:end + 1], f" static thread_local char {_REDZONE_NAME}{k}[{REDZONE}] "
                                       f"__attribute__((used));"]
        last = end + 1
    pieces.append(body[last:])
    return (head + sep + "".join(pieces) + sep2 + tail.rstrip("\n")
            + f'\n#line 1 "wbsim_anchor"\nextern "C" {{ __thread char {instrumented.ANCHOR}; }}\n')


#: module path -> (checked library path, the redzones: (offset from the anchor, bytes)).
_CHECKED: dict[str, tuple[str, tuple]] = {}


def checked_library(module) -> tuple[str, tuple]:
    """``module``'s AddressSanitizer build with redzones (made once, cached on
    disk) and where its redzones lie, from the anchor variable."""
    found = _CHECKED.get(module.path)
    if found is not None:
        return found
    inputs = build.build_inputs(module.path)
    if inputs is None:
        raise WorkbenchError("this module was compiled before the workbench was imported "
                             "again; run its cell (or wb.compile) again to check it")
    generated, flags = inputs
    try:
        path = str(build.build_library(redzoned_source(generated), list(flags), checked=True,
                                       warnings=False).path)
    except CompileFailed as exc:
        first = "\n".join(exc.log.strip().splitlines()[:6])
        raise WorkbenchError(f"the simulator could not build this module with "
                             f"AddressSanitizer (memcheck):\n{first}") from None
    anchor, variables = instrumented._thread_locals(path, set())
    zones = tuple((offset - anchor, size) for name, offset, size in variables
                  if _REDZONE_NAME in name)
    found = _CHECKED[module.path] = (path, zones)
    return found


def checked_launch(backend, function, grid, block, shared_mem: int, arguments: bytes,
                   cooperative: bool) -> LaunchFindings:
    """One launch from the AddressSanitizer build; a fault is the finding."""
    module = function.module
    path, zones = checked_library(module)
    timeout = backend.timeout_s * instrumented.SLOWDOWN
    found = []
    with backend.lock:
        worker = backend.worker_for(True)
        for attempt in (1, 2):
            try:
                fresh = path not in worker.libraries
                handle = worker.load(path)
                if fresh:
                    for name, value in module._globals.items():
                        worker.request(Op.SYMBOL_WRITE, struct.pack("<I", handle)
                                       + pack_str(module._symbol(name))
                                       + struct.pack("<QQ", 0, len(value)) + value)
                payload = (request_prefix(handle, function.symbol, grid, block, shared_mem, timeout)
                           + arguments + request_tail(backend.arena, True, cooperative,
                                                      redzones=zones))
                reply = worker.request(Op.LAUNCH, payload, timeout=timeout)
                seconds = struct.unpack_from("<Q", reply)[0] / 1e9
                break
            except WorkerDied as died:
                if isinstance(died, WorkerGone) and attempt == 1:
                    continue
                backend._print_device_output()
                backend.arena.clear_fault()
                fault = kernel_fault(function.name, True, died, timeout, backend.arena)
                found.append(fault_finding(fault, died.log or "", backend.arena))
                seconds = 0.0
                break
            except WorkerError as exc:
                raise KernelArgumentError(str(exc)) from None
        backend._print_device_output()
    return LaunchFindings(function.name, "memcheck", tuple(grid), tuple(block), int(shared_mem),
                          found, seconds)


_ACCESS_LINE = re.compile(r"^(READ|WRITE) of size (\d+) at (0x[0-9a-f]+)", re.M)
_ASAN_KIND = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")
_MISALIGNED = re.compile(r"(?:\S*/)?" + re.escape(SOURCE_NAME) + r":(\d+):\d+: runtime error: "
                         r"(load of|store to|member access within) misaligned address (0x[0-9a-f]+) "
                         r"for type '([^']*)', which requires (\d+) byte alignment")


def fault_finding(fault: KernelFault, log: str, arena) -> RawFinding:
    """A memcheck finding from the fault that ended a checked launch."""
    block = fault.block
    thread = fault.thread
    misaligned = _MISALIGNED.search(log)
    if misaligned:
        line, op, address, ctype, align = misaligned.groups()
        kind = "read" if op == "load of" else "write"
        space = _space(int(address, 16), arena)
        return RawFinding("memcheck", "misaligned", "error", 1, block,
                          SiteAccess(kind, int(line), "", thread, int(align)), None,
                          space, int(address, 16) if space == "global" else None,
                          f"misaligned address {address} for type '{ctype}', which requires "
                          f"{align} byte alignment")
    access = _ACCESS_LINE.search(log)
    asan = _ASAN_KIND.search(log)
    if access or (asan and asan.group(1) != "SEGV"):
        op, size, address = access.groups() if access else ("", "0", None)
        addr = int(address, 16) if address else None
        kind = op.lower() or "access"
        space = "local" if asan and asan.group(1).startswith("stack") else _space(addr, arena)
        detail = f"AddressSanitizer: {asan.group(1)}" if asan else ""
        if space != "global" and addr is not None:  # (not a device address: the worker's own)
            detail, addr = f"{detail} at {addr:#x}", None
        return RawFinding("memcheck", "out of bounds", "error", 1, block,
                          SiteAccess(kind, fault.line, "", thread, int(size)), None, space, addr,
                          detail)
    what = fault.signal or "fault"
    message = re.sub(r"(?: in block \(.*)?\. The simulator.*$", "", str(fault), flags=re.S)
    return RawFinding("memcheck", "out of bounds" if what in ("SIGSEGV", "SIGBUS") else what,
                      "error", 1, block, SiteAccess("access", fault.line, "", thread), None,
                      "global" if what in ("SIGSEGV", "SIGBUS") else "", None,
                      message.split(" faulted: ", 1)[-1])


def _space(address, arena) -> str:
    if address is None:
        return ""
    if arena.base <= address < arena.base + arena.size:
        return "global"
    return "shared"


# -- sanitizing the launches of a block of code ---------------------------------------------
class Sanitizing(instrumented.SelectedLaunches):
    """The backend's launch observer while :func:`sanitize_launches` is
    active: the launches it selects run under ``tool``, their findings go to
    ``launches``."""

    def __init__(self, backend, tool: str, kernel, skip: int, count):
        super().__init__(backend, kernel, skip, count)
        self.tool = tool

    def take(self, function, grid, block, shared_mem, arguments, cooperative) -> LaunchFindings:
        return launch(self.backend, function, grid, block, shared_mem, arguments, cooperative,
                      self.tool)


@contextlib.contextmanager
def sanitize_launches(backend, tool: str, kernel=None, skip: int = 0, count=None):
    """See :meth:`workbench.backends.contract.Instrumentation.sanitize_launches`."""
    if tool not in TOOLS:
        raise ArgumentValueError(f"tool must be one of {', '.join(TOOLS)}; got {tool!r}")
    if backend.checked and tool != "memcheck":
        raise WorkbenchError(f"{tool} needs the plain simulator, not the checked one: "
                             "wb.backend('simulator', checked=False)")
    observer = Sanitizing(backend, tool, kernel, skip, count)
    previous, backend.launch_observer = backend.launch_observer, observer
    try:
        yield observer.launches
    finally:
        backend.launch_observer = previous


class _Explore:
    """The launch observer while :func:`explore_schedules` is active: each
    launch runs in the order drawn from the seed."""

    def __init__(self, backend, seed: int):
        self.backend = backend
        self.seed = int(seed)

    def __call__(self, function, grid, block, shared_mem, arguments, cooperative) -> bool:
        if cooperative:
            raise WorkbenchError("schedules cannot be explored for a cooperative launch (every "
                                 "block runs at once there)")
        self.backend.run_explored(function, grid, block, shared_mem, arguments, self.seed)
        return True


@contextlib.contextmanager
def explore_schedules(backend, seed: int):
    """See :meth:`workbench.backends.contract.Instrumentation.explore_schedules`."""
    observer = _Explore(backend, seed)
    previous, backend.launch_observer = backend.launch_observer, observer
    try:
        yield
    finally:
        backend.launch_observer = previous

