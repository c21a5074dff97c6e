"""One sentence per source line on what to change, from what its warp-level
instructions did and one sample instruction's addresses (:mod:`.counters`)."""
from __future__ import annotations

from statistics import median

#: Active lanes below this (of 32) make a line divergent.
DIVERGENT_LANES = 28.0
#: A line whose instructions come from runs of a loop nvcc unrolls, with trip counts
#: uneven across the warp's lanes, more often than this gets the caution below.
UNEVEN_SHARE = 0.02


def lane_stride(sample) -> int | None:
    """The typical distance in bytes between the addresses of neighbouring
    active lanes of ``sample`` (None: fewer than two lanes)."""
    if sample is None:
        return None
    active = [a for a in sample.addresses if a is not None]
    if len(active) < 2:
        return None
    return int(median(b - a for a, b in zip(active, active[1:])))


def _scattered(sample) -> bool:
    """True when the lanes' addresses follow no common stride."""
    active = [a for a in sample.addresses if a is not None] if sample is not None else []
    steps = [b - a for a, b in zip(active, active[1:])]
    if len(steps) < 4:
        return False
    common = max(steps.count(s) for s in set(steps))
    return common < len(steps) / 2


def _lane_indexed(sample) -> bool:
    """True when each active lane of ``sample`` addresses its own element of one
    array in lane order (lane l at the first lane's address + (l - first) x size)
    and idle lanes leave holes between them: a coalesced access that some lanes
    sit out."""
    if sample is None or not sample.size:
        return False
    lanes = [(l, a) for l, a in enumerate(sample.addresses) if a is not None]
    if len(lanes) < 2:
        return False
    first, base = lanes[0]
    return (lanes[-1][0] - first + 1 > len(lanes)
            and all(a == base + (l - first) * sample.size for l, a in lanes))


def advise(row) -> str:
    """What to change on ``row``'s line (a :class:`.counters.LineRow`), or ""
    where nothing is wasted; with a caution where a GPU may count more."""
    advice = _advice(row)
    if row.uneven > UNEVEN_SHARE:
        caution = (f"the count may be low: lanes of a warp ran this loop unevenly in "
                   f"{row.uneven:.0%} of its instructions here, and nvcc unrolls such a loop by 4, so "
                   f"a GPU issues the lanes in the unrolled part and those in the remainder apart "
                   f"(`#pragma unroll 1` before the loop gives the counted figure on a GPU too, "
                   f"for a comparison with ncu; it usually runs slower)")
        return f"{advice}. Also, {caution}" if advice else caution[0].upper() + caution[1:]
    return advice


def _advice(row) -> str:
    lanes = row.lanes
    if row.what == "branch":
        return (f"only {lanes:.1f} of 32 lanes run this line: threads of a warp take different "
                "branches; branch on values the whole warp shares (e.g. threadIdx.x / 32), or "
                "give each warp uniform work")
    if row.what.endswith("atomic"):
        sample = row.sample
        active = [a for a in sample.addresses if a is not None] if sample is not None else []
        if len(active) > 1 and len(set(active)) == 1:
            return (f"all {len(active)} active lanes update one address: add within the warp first "
                    "(__shfl_down_sync or __reduce_add_sync) and let one lane do the atomic")
        return ""
    per, ideal = row.units_per_request, row.ideal_per_request
    stride = lane_stride(row.sample)
    if row.what.startswith("global") and per > ideal + 0.5:
        verb = "loads" if row.what.endswith("load") else "stores"
        if _scattered(row.sample):
            return (f"each warp's {verb} touch {per:.1f} sectors of 32 bytes where {ideal:.1f} would "
                    f"hold the bytes: the lanes' addresses are scattered; sort or regroup the "
                    f"indices, or gather through shared memory")
        if lanes < DIVERGENT_LANES and _lane_indexed(row.sample):
            return (f"only {lanes:.1f} of 32 lanes take part, and the idle lanes' elements lie "
                    f"between theirs: their {verb} touch {per:.1f} sectors where their bytes fill "
                    f"{ideal:.1f}; keep the threads of a warp on the same path, or hand the work "
                    f"to neighbouring threads")
        if per <= ideal * 1.3 + 1.01 and stride is not None and stride <= (row.sample.size or 4):
            return (f"each warp's {verb} touch {per:.1f} sectors where {ideal:.1f} would do: the "
                    f"warp's first address is not on a 32-byte boundary; start each warp's range "
                    f"at a multiple of 32 bytes (align the array or the index)")
        where = f"consecutive threads are {stride} bytes apart" if stride else "lanes are far apart"
        return (f"each warp's {verb} touch {per:.1f} sectors of 32 bytes where {ideal:.1f} would "
                f"hold the bytes: {where}; make threadIdx.x index consecutive elements "
                f"(or stage the data through shared memory)")
    if row.what.startswith("shared") and per > ideal + 0.01:
        ways = per / ideal if ideal else per
        detail = f" (neighbouring lanes {stride} bytes apart)" if stride else ""
        return (f"{ways:.1f}-way bank conflict: lanes of a warp reach different 4-byte words in the "
                f"same bank{detail}, so the access takes {per:.1f} wavefronts instead of "
                f"{ideal:.1f}; pad each row of the array by one element (e.g. [32][33]) or swizzle "
                f"the index")
    if lanes < DIVERGENT_LANES:
        return (f"only {lanes:.1f} of 32 lanes take part: the warp is divergent here; keep the "
                f"threads of a warp on the same path")
    return ""
