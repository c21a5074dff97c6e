"""CUDA graphs: ``with wb.graph() as g:`` captures kernel calls and copies,
``g.launch()`` replays them all with one launch.

Inside the block, work goes to the graph's own stream (made current) and is
recorded, not run: on the GPU by CUDA's stream capture (CuPy's
``Stream.begin_capture``), on the simulator by the backend's own capture,
whose replay runs the same launches in order. The graph keeps what each node
was (kernel, grid, block, arguments; copy and bytes), shown by
:meth:`Graph.nodes`. :meth:`Graph.set_args` gives a kernel node new
arguments: the next launch captures the graph again from its nodes (CuPy
exposes no ``cudaGraphExecKernelNodeSetParams``), which costs one capture and
instantiation, then replays as cheaply as before.
"""
from __future__ import annotations

import threading

import numpy as np

from ..errors import KernelArgumentError, LaunchConfigError, WorkbenchError
from ..present.tables import html_table, pandas
from ..runtime.session import backend, session
from .streams import refuse_in_capture, stream_and_device

#: The calls that wait for work and so invalidate a capture (named in errors).
WAITING_CALLS = ("wb.synchronize(), Stream.synchronize(), Stream.done / Event.done, "
                 "wb.timings() and g.launch(sync=True)")


def argument_check(launcher):
    """The argument check a kernel registered for its ``launcher`` (see
    :func:`register_check`), or None."""
    return getattr(launcher, "_workbench_check", None)


def register_check(launcher, check) -> None:
    """Let graphs check new arguments of ``launcher``'s nodes with ``check``
    (arguments -> converted arguments, raising KernelArgumentError). Done once
    per kernel, nothing per launch."""
    try:
        launcher._workbench_check = check
    except AttributeError:  # a launcher that takes no attributes: only the captured types are checked
        pass


class GraphNode:
    """One captured operation: a kernel launch, a copy, a memset."""

    __slots__ = ("kind", "name", "grid", "block", "shared_mem", "nbytes", "run", "args", "check")

    def __init__(self, kind, name, grid, block, shared_mem, nbytes, run, args, check=None):
        self.kind, self.name, self.grid, self.block = kind, name, grid, block
        self.shared_mem, self.nbytes, self.run, self.args = shared_mem, nbytes, run, args
        #: the kernel's own argument check (arguments -> converted ones), where known
        self.check = check

    def replay(self, stream) -> None:
        """Queue the operation again on ``stream`` (which is capturing)."""
        if self.kind == "kernel":
            self.run(self.grid, self.block, self.args, self.shared_mem, stream)
        else:
            self.run(*self.args, stream)

    def row(self, index: int) -> dict:
        return {"node": index, "kind": self.kind, "name": self.name,
                "grid": self.grid, "block": self.block, "shared_mem": self.shared_mem,
                "bytes": self.nbytes,
                "args": None if self.kind != "kernel" else ", ".join(_arg_text(a) for a in self.args)}


def _arg_text(a) -> str:
    if a is None:
        return "NULL"
    if isinstance(a, np.generic):
        return repr(a.item())
    if isinstance(a, (bool, int, float)):
        return repr(a)
    if isinstance(a, (list, tuple)):  # Numba and Triton nodes: (arguments, meta, grid)
        return "(" + ", ".join(_arg_text(x) for x in a) + ")"
    if isinstance(a, dict):
        return ", ".join(f"{k}={_arg_text(v)}" for k, v in a.items())
    shape = getattr(a, "shape", None)
    return f"{getattr(a, 'dtype', '?')}[{', '.join(map(str, shape))}]" if shape is not None else "?"


class GraphNodes:
    """The nodes of a graph as a table (``to_pandas()``)."""

    COLUMNS = ("node", "kind", "name", "grid", "block", "shared_mem", "bytes", "args")

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def records(self) -> list[dict]:
        return [dict(r) for r in self.rows]

    def to_pandas(self):
        return pandas().DataFrame(self.records(), columns=list(self.COLUMNS))

    def _cells(self) -> list[list[str]]:
        return [["—" if r[c] is None else str(r[c]) for c in self.COLUMNS] for r in self.rows]

    def __repr__(self) -> str:
        lines = [f"Graph nodes ({len(self.rows)}):"]
        lines += ["  " + " | ".join(cells) for cells in self._cells()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table(self._cells(), list(self.COLUMNS), title=f"Graph nodes ({len(self.rows)})")


class Graph:
    """A captured sequence of kernel calls and copies (see the module docstring).

    ``with wb.graph() as g: ...`` captures; ``g.launch(stream=None)`` queues
    the whole graph (logged as one "graph" record); ``g.nodes()`` lists them;
    ``g.set_args(i, *args)`` changes kernel node ``i``'s arguments.
    """

    def __init__(self, name: str = "graph"):
        self.backend = backend()
        self.name = name
        self._nodes: list[GraphNode] = []
        self._handle = None
        self._dirty = False
        self._stream = None
        self._thread = None
        self._contexts: list = []
        self.device = None  # the device it was captured on

    # -- capture --------------------------------------------------------------------
    def __enter__(self) -> "Graph":
        b, log = self.backend, session().timing_log
        if b is not backend():
            raise WorkbenchError("this graph was made for another backend; make a new wb.graph()")
        if log.capture is not None:
            raise WorkbenchError("wb.graph() inside another wb.graph(): capture one graph at a "
                                 "time (a graph may launch another: g2.launch() inside the block)")
        if self._handle is not None or self._nodes:
            raise WorkbenchError("this graph was captured already; make a new wb.graph()")
        if self._stream is None:  # capture needs a stream other than the default one
            self._stream = b.create_stream(non_blocking=True)
            log.name_stream(self._stream, f"{self.name} (capture)")
        use = b.use_stream(self._stream)
        paused = log.paused()
        use.__enter__()
        paused.__enter__()
        self._contexts = [paused, use]
        self._thread = threading.get_ident()
        self.device = b.current_device()
        try:
            b.begin_capture(self._stream)
        except BaseException:
            self._leave(None, None, None)
            raise
        log.capture = self
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        log = session().timing_log
        log.capture = None
        handle, failure = None, None
        try:
            handle = self.backend.end_capture(self._stream)
        except Exception as e:  # a capture invalidated by a call that waited in the block
            failure = e
        finally:
            self._leave(exc_type, exc, tb)
        if exc_type is not None:  # the block's own error comes through (the capture is dropped)
            self._nodes = []
            return
        if failure is not None:
            self._nodes = []
            raise WorkbenchError(
                f"the graph capture failed ({type(failure).__name__}: {failure}); a call in the "
                f"block invalidated it: inside wb.graph() leave out {WAITING_CALLS}. The graph "
                f"is empty: capture it again with a new wb.graph()") from failure
        self._handle = handle

    def captures_here(self) -> bool:
        """True in the thread that is capturing this graph."""
        return threading.get_ident() == self._thread

    def _leave(self, *exc) -> None:
        for context in self._contexts:
            context.__exit__(*exc)
        self._contexts = []

    def owns(self, stream) -> bool:
        """True for work of the capturing thread; raise for another stream there."""
        if threading.get_ident() != self._thread:
            return False  # another thread's work: not part of this graph
        if stream is not self._stream and stream != self._stream:
            raise LaunchConfigError(
                "inside wb.graph(), kernels and copies go to the graph's stream: leave out "
                "stream= (work on other streams would run now instead of joining the graph)")
        return True

    # called by the timing log while capturing
    def add_launch(self, name, grid, block, shared_mem, launcher, args) -> None:
        """A launch on the graph's stream was queued (captured): a kernel node."""
        self._nodes.append(GraphNode("kernel", name, grid, block, shared_mem, None, launcher,
                                     list(args), argument_check(launcher)))

    def add_op(self, kind, name, nbytes, op, args) -> None:
        """A copy, memset or graph launch was captured."""
        self._nodes.append(GraphNode(kind, name, None, None, None, nbytes, op,
                                     tuple(args[:-1])))  # the last argument is the stream

    # -- use ----------------------------------------------------------------------------
    def launch(self, stream=None, sync: bool = False) -> "Graph":
        """Queue every node on ``stream`` (None: the current one) with one launch;
        ``sync=True`` waits for it."""
        b = self.backend
        if self._handle is None:
            raise WorkbenchError("this graph has nothing captured yet: use it as "
                                 "`with wb.graph() as g:` first")
        if b is not backend():
            raise WorkbenchError("this graph was captured on another backend; capture it again")
        if sync:
            refuse_in_capture("g.launch(sync=True)")
        if stream is not None:
            raw, device = stream_and_device(b, stream, "Graph.launch()")
        else:
            raw, device = b.current_stream(), b.current_device()
        if device != self.device or b.current_device() != self.device:
            raise WorkbenchError(
                f"this graph was captured on device {self.device}; launch it on a stream of that "
                f"device with the device current: `with s:` for a wb.Stream s of "
                f"device {self.device} (or `with wb.device({self.device}):`)")
        if self._dirty:
            self._recapture()
        session().timing_log.timed_op(b, "graph", f"{self.name} ({len(self._nodes)} nodes)",
                                      None, raw, b.graph_launch, self._handle, raw)
        if sync:
            b.stream_synchronize(raw)
        return self

    def _recapture(self) -> None:
        b = self.backend
        b.begin_capture(self._stream)
        try:
            for node in self._nodes:
                node.replay(self._stream)
        finally:
            handle = b.end_capture(self._stream)
        self._handle = handle
        self._dirty = False

    def set_args(self, node: int, *args) -> "Graph":
        """New arguments for kernel node ``node`` (all of them, in order):
        numbers convert to the types captured; arrays must be device arrays.
        The next :meth:`launch` uses them."""
        try:
            target = self._nodes[node]
        except (IndexError, TypeError):
            raise KernelArgumentError(f"set_args(): no node {node!r}; the graph has "
                                      f"{len(self._nodes)} (g.nodes() lists them)") from None
        if target.kind != "kernel":
            raise KernelArgumentError(f"set_args(): node {node} is a {target.kind}, not a kernel")
        if len(args) != len(target.args):
            raise KernelArgumentError(f"set_args(): {target.name} was captured with "
                                      f"{len(target.args)} arguments; give all {len(target.args)}")
        new = [_like(old, new, i, target.name, self.backend)
               for i, (old, new) in enumerate(zip(target.args, args))]
        if target.check is not None:  # the kernel's own checks: types of pointers, ranges
            new = list(target.check(tuple(new)))
        target.args = new
        self._dirty = True
        return self

    def nodes(self) -> GraphNodes:
        """The captured nodes as a table (kind, name, grid, block, bytes, arguments)."""
        return GraphNodes([n.row(i) for i, n in enumerate(self._nodes)])

    def __len__(self) -> int:
        return len(self._nodes)

    def __repr__(self) -> str:
        state = "captured" if self._handle is not None else "not captured"
        kinds = {}
        for n in self._nodes:
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
        what = ", ".join(f"{v} {k}{'s' if v != 1 else ''}" for k, v in kinds.items()) or "no nodes"
        return f"<wb.Graph {self.name!r}: {state}, {what} | {self.backend.name}>"

    def _repr_html_(self) -> str:
        return f"<div><code>{repr(self).replace('<', '&lt;')}</code></div>" + self.nodes()._repr_html_()


def _like(old, new, index: int, name: str, b):
    """``new`` as the type of the captured argument ``old``."""
    where = f"set_args(): {name} argument {index}"
    if old is None or b.is_device_array(old):
        if new is None or b.is_device_array(new):
            return new
        raise KernelArgumentError(f"{where} is a pointer: pass a device array or None")
    if isinstance(old, np.generic):
        dtype = old.dtype
        if isinstance(new, (bool, np.bool_)) and dtype.kind != "b":
            raise KernelArgumentError(f"{where} takes a {dtype} number, got {new!r}")
        if dtype.kind in "iu":
            if isinstance(new, float) or not isinstance(new, (int, np.integer)):
                raise KernelArgumentError(f"{where} is an integer ({dtype}), got {new!r}")
            info = np.iinfo(dtype)
            if not info.min <= int(new) <= info.max:
                raise KernelArgumentError(f"{where}: {new} does not fit in {dtype}")
        elif not isinstance(new, (int, float, np.integer, np.floating)):
            raise KernelArgumentError(f"{where} takes a {dtype} number, got {new!r}")
        return dtype.type(new)
    return new


def graph(name: str = "graph") -> Graph:
    """``with wb.graph() as g:`` capture the kernel calls and copies of the
    block into a CUDA graph; ``g.launch()`` replays them with one launch."""
    return Graph(name)
