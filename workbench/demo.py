"""``python -m workbench.demo``: run a demo notebook headless on the best
available backend (GPU, else the simulator) and write an HTML report."""
from __future__ import annotations

import argparse
import pathlib
import sys

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from .backends import gpu_unavailable_reason
from .tutorial_files import folders


def _first_notebook() -> str:
    """The first tutorial, where this installation keeps it (a checkout's or the wheel's)."""
    return str(folders()[0] / "01-first-kernel.ipynb")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("notebook", nargs="?", default=None,
                        help="notebook to run (default: the first tutorial, 01-first-kernel)")
    parser.add_argument("--output", "-o", default="build/demo-report.html", help="HTML report to write")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = parser.parse_args(argv)

    path = pathlib.Path(args.notebook or _first_notebook())
    nb = nbformat.read(path, as_version=4)
    reason = gpu_unavailable_reason()
    print(f"running {path.name} on the {'GPU' if reason is None else 'simulator (' + reason + ')'}")
    client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    errors = [c for c in nb.cells if c.cell_type == "code"
              and any(o.get("output_type") == "error" for o in c.get("outputs", []))
              and "raises-exception" not in c.get("metadata", {}).get("tags", [])]
    html, _ = HTMLExporter().from_notebook_node(nb)
    out = pathlib.Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    print(f"wrote {out} ({len(nb.cells)} cells, {len(errors)} unexpected errors)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
