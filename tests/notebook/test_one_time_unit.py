"""One rule for the unit of a column of times: the readable table, the
benchmark panel's table and the sweep plot's axis of the same times say the
same unit (the one of their median)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from workbench.benchmarking.plots import plot_sweep  # noqa: E402
from workbench.present.frames import readable  # noqa: E402
from workbench.widgets.bench_panel import table_html  # noqa: E402


def test_table_panel_and_plot_of_the_same_times_say_the_same_unit():
    rng = np.random.default_rng(5)
    # mostly microseconds, one slow outlier in milliseconds
    median = np.concatenate([rng.uniform(2e-6, 9e-6, 4), [4.2e-3]])
    table = pd.DataFrame({"name": ["k"] * 5, "size": [2 ** i for i in range(10, 15)],
                          "median_s": median, "iqr_s": median / 10})
    view, _ = readable(table)._wb_view()
    assert "median (µs)" in view.columns
    panel = table_html(["name", "median_s", "iqr_s"],
                       [["k", m, m / 10] for m in median])
    assert "median (µs)" in panel and "IQR (µs)" in panel
    assert f"{median[0] * 1e6:.3g}" in panel and f"{median[-1] * 1e6:.3g}" in panel
    ax = plot_sweep(table, x="size", spread=False).axes[0]
    assert ax.get_ylabel() == "median time (µs)"
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), median * 1e6)
