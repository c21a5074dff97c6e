"""``wb.compare``: A/B timing of two implementations of the same thing."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentValueError
from ..core.adapters import as_launchable
from ..present.tables import html_table, pandas
from ..runtime.session import backend as active_backend
from . import history
from .checks import compare_arrays, select_output, to_numpy
from .engine import Plan, default_name, input_sets, new_result, repeat_call, time_calls
from .result import SIMULATED_TIMES, BenchResult, format_seconds


@dataclass(eq=False)
class CompareResult:
    """Two implementations timed in alternation.

    ``ratios[i]`` is ``a``'s time over ``b``'s in round ``i`` (the two calls
    of a round run back to back, in alternating order), so drifts in clock
    or temperature hit both. :attr:`speedup` (their median) above 1 means
    ``b`` is faster.
    """

    a: BenchResult
    b: BenchResult
    ratios: np.ndarray

    @property
    def speedup(self) -> float:
        """Median over rounds of time(a) / time(b): how many times faster b is."""
        return float(np.median(self.ratios))

    @property
    def spread(self) -> tuple[float, float]:
        """First and third quartiles of the per-round ratios."""
        q1, q3 = np.percentile(self.ratios, [25, 75])
        return float(q1), float(q3)

    @property
    def simulated(self) -> bool:
        return self.a.simulated

    def _verdict(self) -> str:
        s = self.speedup
        if s >= 1:
            return f"{self.b.name} is {s:.3g}x faster than {self.a.name}"
        return f"{self.b.name} is {1 / s:.3g}x slower than {self.a.name}"

    def __str__(self) -> str:
        q1, q3 = self.spread
        text = (f"{self._verdict()} (time ratio {self.a.name}/{self.b.name}: median {self.speedup:.4g}, "
                f"IQR {q1:.4g} to {q3:.4g} over {self.ratios.size} rounds; medians "
                f"{self.a.name} {format_seconds(self.a.median)}, {self.b.name} "
                f"{format_seconds(self.b.median)})")
        if self.simulated:
            text += f"  [{SIMULATED_TIMES}]"
        return text

    def __repr__(self) -> str:
        return f"<CompareResult {self}>"

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))

    def _repr_html_(self) -> str:
        q1, q3 = self.spread
        rows = [(r.name, format_seconds(r.median), format_seconds(r.iqr)) for r in (self.a, self.b)]
        return html_table(rows, ["variant", "median", "IQR"], title=self._verdict(),
                          caption=f"ratio IQR {q1:.4g} to {q3:.4g}, {self.ratios.size} rounds",
                          notes=[SIMULATED_TIMES] if self.simulated else ())

    def to_pandas(self):
        """One row per round: the two times in seconds and their ratio."""
        return pandas().DataFrame({"round": np.arange(self.ratios.size),
                             f"{self.a.name}_s": self.a.times, f"{self.b.name}_s": self.b.times,
                             "ratio": self.ratios})

    def to_dict(self) -> dict:
        q1, q3 = self.spread
        return {"a": self.a.to_dict(), "b": self.b.to_dict(), "speedup": self.speedup,
                "ratio_q1": q1, "ratio_q3": q3, "ratios": self.ratios.tolist()}


def compare(a, b, *args, names: tuple[str, str] | None = None, check: bool = True,
            output=None, rtol: float | None = None, atol: float | None = None,
            repeat: int | None = None, max_time: float = 0.5, min_repeat: int = 10,
            max_repeat: int = 10_000, warmup: int = 1, warmup_time: float = 0.025,
            flush_l2: bool = False, record: bool = True, **kwargs) -> CompareResult:
    """Check that ``a(*args, **kwargs)`` and ``b(*args, **kwargs)`` compute
    the same result, then time them in alternation and report the ratio.

    ``check``: compare the two results first (within ``rtol``/``atol``, by
    default set by the dtype) and raise
    :class:`~workbench.benchmarking.checks.ResultMismatch` if they differ; their
    results are their return values, or the argument ``output`` names (an
    index) when they write into an argument. ``repeat`` is a number of rounds
    (one call of each), else rounds run for ``max_time`` seconds. The other
    options are those of :func:`workbench.bench`.
    """
    plan = Plan(repeat=repeat, max_time=max_time, min_repeat=min_repeat, max_repeat=max_repeat,
                warmup=warmup, warmup_time=warmup_time, flush_l2=flush_l2)
    a, b = as_launchable(a), as_launchable(b)  # Numba / Triton kernels: the workbench's wrappers
    name_a, name_b = names or (default_name(a), default_name(b))
    if name_a == name_b:
        name_a, name_b = f"{name_a} (a)", f"{name_b} (b)"
    inputs = input_sets(args, None)
    bk = active_backend()
    stream = kwargs.get("stream")

    bk.synchronize()
    out_a = a(*inputs[0], **kwargs)
    reference = None
    if check:
        produced = select_output(out_a, inputs[0], output)
        if produced is None:
            raise ArgumentValueError(
                f"{name_a} returned None, so there is nothing to compare; pass "
                "output=<index of the argument both write> or check=False")
        bk.synchronize()
        reference = to_numpy(produced).copy()  # b may overwrite the same output array
    out_b = b(*inputs[0], **kwargs)
    if check:
        bk.synchronize()
        compare_arrays(select_output(out_b, inputs[0], output), reference, rtol=rtol, atol=atol,
                       what=f"{name_b} (checked against {name_a})")
    del out_a, out_b

    calls = [repeat_call(bk, a, inputs, kwargs), repeat_call(bk, b, inputs, kwargs)]
    (warm_a, times_a), (warm_b, times_b) = time_calls(bk, calls, stream, plan)
    ra = new_result(bk, name=name_a, times=times_a, warmup=warm_a, plan=plan,
                    params={"compared_with": name_b})
    rb = new_result(bk, name=name_b, times=times_b, warmup=warm_b, plan=plan,
                    params={"compared_with": name_a})
    if record:
        history.record_result(ra)
        history.record_result(rb)
    return CompareResult(ra, rb, times_a / times_b)
