"""A tiny helper the benchmark scripts share: print rows as an aligned table."""
from __future__ import annotations


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in header]] + [[f"{c:.3g}" if isinstance(c, float) else str(c) for c in r]
                                          for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for k, r in enumerate(cells):
        print("  ".join(c.rjust(w) if k else c.ljust(w) for c, w in zip(r, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
