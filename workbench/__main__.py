"""``python -m workbench``: the workbench from a terminal.

    python -m workbench tutorials [DIR]   copy the tutorial notebooks (and the documents) to DIR
    python -m workbench doctor [--deep]   check this machine: GPU, driver, CuPy, compilers, tools
"""
from __future__ import annotations

import argparse
import sys

from .checkup import doctor
from .errors import WorkbenchError
from .tutorial_files import DEFAULT_DIR, tutorials


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    copy = commands.add_parser("tutorials", help="copy the tutorial notebooks and the documents")
    copy.add_argument("directory", nargs="?", default=DEFAULT_DIR,
                      help="where to put them (default: ./%(default)s)")
    copy.add_argument("--overwrite", action="store_true",
                      help="replace files already there (default: keep them)")
    check = commands.add_parser("doctor", help="check this machine for the workbench")
    check.add_argument("--deep", action="store_true",
                       help="also build the C modules, compile and run a kernel, profile one launch")
    args = parser.parse_args(argv)
    try:
        if args.command == "tutorials":
            print(tutorials(args.directory, overwrite=args.overwrite).summary())
            return 0
        result = doctor(deep=args.deep)
    except WorkbenchError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(repr(result))
    return 1 if result.counts()["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
