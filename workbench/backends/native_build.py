"""C extension modules of the backends, built once per machine with the
system's C compiler and Python's headers, and kept in the disk cache
(``DiskCache("native")``): the words module both backends use
(``native/words.c``, :mod:`.native_words`) and the GPU backend's own
(``gpu/native/*.c``). It sits beside both backends for that reason.

A build is keyed by the source, the Python version and the compiler, so a
change to any of them builds again. Where no compiler or no ``Python.h`` is
found, where the compiler fails or the built file does not load, or where the
module's switch variable is ``0``, :func:`build` gives None and says why: each
caller then has a Python path that does the same work.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from .. import subprocesses
from ..cache import DiskCache

#: The C sources shared by both backends (the GPU backend's are in ``gpu/native``).
NATIVE_DIR = Path(__file__).resolve().parent / "native"
CACHE = DiskCache("native")


#: Words of a compiler error that says nothing lasting about the source.
_PASSING = ("No space left", "cannot write", "Cannot write", "Killed", "Resource temporarily",
            "cannot open output", "internal compiler error")
#: How long a refusal is believed (a compiler or header fixed in place then counts).
REFUSAL_DAYS = 1


class Refused(str):
    """The compiler's complaint about the source (not a failure to run it):
    the same source, flags and compiler will be refused again."""


def compiler() -> list[str] | None:
    """The C compiler's command: ``$CC`` (which may carry words, as in
    ``ccache gcc``), else ``cc``; None where it is not found."""
    words = shlex.split(os.environ.get("CC", "").strip() or "cc")
    found = shutil.which(words[0]) if words else None
    return [found, *words[1:]] if found else None


def compile_source(cc: list[str], source: Path, target: Path, libs: tuple[str, ...] = (),
                   flags: tuple[str, ...] = ()) -> str | None:
    """Compile ``source`` to the shared object ``target`` (``flags`` before
    the source, ``libs`` after); the compiler's complaint, or None when it worked."""
    include = sysconfig.get_paths().get("include") or ""
    if not Path(include, "Python.h").exists():
        return f"Python's headers are not installed (no Python.h in {include})"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # built in the cache's own folder: the final rename stays on one filesystem
        tmp = tempfile.mkdtemp(dir=target.parent, prefix=".build-")
    except OSError as exc:
        return f"the disk cache cannot keep it ({exc})"
    try:
        out = Path(tmp) / target.name
        try:
            done = subprocesses.run([*cc, "-O2", "-shared", "-fPIC", f"-I{include}", *flags, str(source),
                                     "-o", str(out), *libs], timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{cc[0]} failed to run ({exc})"
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines()
            complaint = f"{cc[0]} could not build it: {(lines[-1:] or ['?'])[0]}"
            # only an error in the code is the compiler's lasting word (not a full disk,
            # a kill for memory, a licence or cache server that was away)
            errors = [line for line in lines if "error:" in line]
            if done.returncode > 0 and errors and not any(
                    word in line for line in errors for word in _PASSING):
                return Refused(f"{cc[0]} could not build it: {errors[0]}")
            return complaint
        try:
            os.replace(out, target)   # atomic: a concurrent build leaves one whole file
        except OSError as exc:
            return f"the disk cache cannot keep it ({exc})"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return None


def _target(source: Path, name: str, switch: str, flags: tuple[str, ...] = (),
            depends: tuple[Path, ...] = ()):
    """``(the built file's path in the cache, its refusal marker, None)``, or
    ``(None, None, why)`` where no build can be made here."""
    if os.environ.get(switch, "").strip() == "0":
        return None, None, f"{switch}=0"
    cc = compiler()
    if cc is None:
        return None, None, "no C compiler (set $CC)"
    try:  # (the compiler by what it is: a gcc upgraded in place is another compiler)
        st = os.stat(os.path.realpath(cc[0]))
        identity = f"{os.path.realpath(cc[0])}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        identity = cc[0]
    digest = hashlib.sha256(sys.version.encode() + " ".join(cc).encode() + identity.encode()
                            + " ".join(flags).encode())
    for path in (source, *depends):
        try:
            digest.update(path.read_bytes())
        except OSError as exc:  # (a broken install: the Python path does the work)
            return None, None, f"cannot read {path} ({exc})"
    key = digest.hexdigest()[:16]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    try:
        path = CACHE.path(f"{name}-{key}{suffix}")
    except OSError as exc:  # a cache folder that cannot be made: only costs speed
        return None, None, f"the disk cache cannot keep it ({exc})"
    return path, path.with_name(path.name + ".refused"), None


def state(source: Path, name: str, switch: str, flags: tuple[str, ...] = (),
          depends: tuple[Path, ...] = ()) -> tuple[str, str]:
    """What :func:`build` would give now, found without building: ``("built",
    path)``, ``("not built", "")`` (the next use builds it), ``("refused",
    the compiler's complaint)`` or ``("unavailable", why)`` (switched off, no
    compiler...)."""
    path, refused, why = _target(source, name, switch, flags, depends)
    if path is None:
        return "unavailable", why
    if path.exists():
        return "built", str(path)
    complaint = _refusal(refused)
    return ("refused", complaint) if complaint is not None else ("not built", "")


def _refusal(marker: Path) -> str | None:
    """The compiler's complaint when it refused this build lately, else None:
    a refused build is not tried again by every process (its key holds all
    that could change the compiler's mind: source, flags, headers, compiler)."""
    try:
        if time.time() - marker.stat().st_mtime < REFUSAL_DAYS * 86400:
            return marker.read_text()
    except OSError:
        pass
    return None


def build(source: Path, name: str, switch: str, libs: tuple[str, ...] = (),
          flags: tuple[str, ...] = (), depends: tuple[Path, ...] = ()):
    """``(module, None)``: the extension ``name`` built from ``source`` (once
    per machine) and loaded; or ``(None, why)`` where it cannot be (the
    environment variable ``switch`` set to ``0`` turns it off). ``flags`` (for
    example ``-I`` folders) and the contents of ``depends`` (headers outside
    Python's) are part of the build's key."""
    path, refused, why = _target(source, name, switch, flags, depends)
    if path is None:
        return None, why
    cc = compiler()
    complaint = _refusal(refused)
    if complaint is not None:
        return None, complaint
    for attempt in range(2):
        if not path.exists():
            complaint = compile_source(cc, source, path, libs, flags)
            if complaint is not None:
                if isinstance(complaint, Refused):
                    try:  # (whole or not at all: a reader never sees half of it)
                        partial = refused.with_name(f"{refused.name}.{os.getpid()}")
                        partial.write_text(complaint)
                        os.replace(partial, refused)
                    except OSError:
                        pass
                return None, complaint
        try:
            loader = importlib.machinery.ExtensionFileLoader(name, str(path))
            spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
            built = importlib.util.module_from_spec(spec)
            loader.exec_module(built)
        except Exception as exc:  # noqa: BLE001 -- a broken cache entry: built once more
            if attempt == 0:
                try:
                    path.unlink()
                    continue
                except OSError:
                    pass
            return None, f"the built module did not load ({exc})"
        return built, None
    return None, "the built module did not load"
