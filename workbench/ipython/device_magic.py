"""``%cuda_device``: list the devices or choose the one later cells use."""
from __future__ import annotations

from IPython.core import magic_arguments
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from ..hardware.properties import device_info, devices
from ..runtime.devices import device


@magics_class
class DeviceMagics(Magics):
    """``%cuda_device [INDEX]``."""

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("index", nargs="?", type=int, default=None,
                              help="make device INDEX current for later cells "
                                   "(allocations, compiles and launches); without it, list the devices")
    @magic_arguments.argument("--quiet", "-q", action="store_true",
                              help="choose the device without printing anything")
    @line_magic
    def cuda_device(self, line: str = ""):
        """List the devices (``%cuda_device``) or make device INDEX current
        (``%cuda_device 1``), the same as ``wb.device(1)``."""
        args = magic_arguments.parse_argstring(self.cuda_device, line)
        if args.index is None:
            display(devices())
            return None
        device(args.index)
        info = device_info(args.index)
        if not args.quiet:
            print(f"Using device {info.index}: {info.name} (compute capability "
                  f"{info.compute_capability})")
        return None


def register(ipython) -> None:
    ipython.register_magics(DeviceMagics)
