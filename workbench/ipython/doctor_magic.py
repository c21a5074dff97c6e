"""``%cuda_doctor``: ``wb.doctor()``'s table of this machine's checks."""
from __future__ import annotations

from IPython.core import magic_arguments
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from ..checkup import TIMEOUT_S, doctor


@magics_class
class DoctorMagics(Magics):
    """``%cuda_doctor [--deep]``."""

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("--deep", action="store_true",
                              help="also build the C modules, compile and run a kernel and "
                                   "profile one launch (seconds to a minute)")
    @magic_arguments.argument("--timeout", type=float, default=TIMEOUT_S,
                              help="seconds each probe may take (default: %(default)s)")
    @line_magic
    def cuda_doctor(self, line: str = ""):
        """Check this machine for the workbench (the same as ``wb.doctor()``):
        GPU, driver, CuPy, NVRTC, toolkit, profilers, compilers, C modules,
        memory, optional packages; each row with its status and fix."""
        args = magic_arguments.parse_argstring(self.cuda_doctor, line)
        display(doctor(deep=args.deep, timeout_s=args.timeout))


def register(ipython) -> None:
    ipython.register_magics(DoctorMagics)
