"""``%%cuda_graph NAME``: capture a cell's kernel calls and copies into a CUDA
graph bound to ``NAME`` (the cell-level form of ``with wb.graph() as NAME:``)."""
from __future__ import annotations

from IPython.core import magic_arguments
from IPython.core.magic import Magics, cell_magic, magics_class

from ..core.graphs import graph
from ..errors import WorkbenchError


@magics_class
class GraphMagics(Magics):
    """``%%cuda_graph NAME [--launch]``."""

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("name", help="the variable the captured wb.Graph is bound to")
    @magic_arguments.argument("--launch", action="store_true",
                              help="launch the graph once after capturing it (and wait for it)")
    @cell_magic
    def cuda_graph(self, line: str = "", cell: str = ""):
        """Run the cell under ``with wb.graph(NAME) as NAME:``: its kernel calls
        and copies are captured (not run); ``NAME.launch()`` replays them."""
        args = magic_arguments.parse_argstring(self.cuda_graph, line)
        if not args.name.isidentifier():
            raise WorkbenchError(f"%%cuda_graph NAME: {args.name!r} is not a Python name; give "
                                 "the variable to bind the graph to, e.g. %%cuda_graph g")
        g = graph(args.name)
        with g:  # an error in the cell propagates (the cell fails) and nothing is bound
            self.shell.ex(self.shell.transform_cell(cell))
        self.shell.user_ns[args.name] = g
        if args.launch:
            g.launch(sync=True)


def register(ipython) -> None:
    ipython.register_magics(GraphMagics)
