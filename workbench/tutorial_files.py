"""The tutorials (the notebooks of the repository's ``notebooks/``) and the
documents (``docs/``), copied where a user wants them.

A wheel carries them inside the package, in ``workbench/shipped/`` (see
``[tool.hatch.build.targets.wheel.force-include]`` in ``pyproject.toml``); a
checkout (an editable install) has them in ``notebooks/`` and ``docs/``
beside the package. ``wb.tutorials(DIR)`` and ``python -m workbench
tutorials DIR`` copy both into ``DIR``, the documents into ``DIR/docs`` (the
notebooks name them as ``docs/NAME.md``), and never overwrite a file the user
may have changed.
"""
from __future__ import annotations

import html
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .errors import WorkbenchError
from .present.tables import pandas

PACKAGE_DIR = Path(__file__).resolve().parent
#: Where a wheel puts the notebooks and the documents.
SHIPPED_DIR = PACKAGE_DIR / "shipped"
#: Where the copy goes when no folder is named.
DEFAULT_DIR = "cuda-workbench-tutorials"


def folders() -> tuple[Path, Path]:
    """``(the notebooks' folder, the documents' folder)`` of this installation."""
    for notebooks, docs in ((SHIPPED_DIR / "notebooks", SHIPPED_DIR / "docs"),
                            (PACKAGE_DIR.parent / "notebooks", PACKAGE_DIR.parent / "docs")):
        if any(notebooks.glob("*.ipynb")):
            return notebooks, docs
    raise WorkbenchError(
        f"The tutorials are not installed with this copy of cuda-workbench (neither "
        f"{SHIPPED_DIR / 'notebooks'} nor a checkout's notebooks/ holds any): reinstall it from "
        f"a wheel (pip install --force-reinstall cuda-workbench).")


def notebooks() -> list[Path]:
    """The tutorial notebooks, in reading order (their names start with a number)."""
    return sorted(folders()[0].glob("*.ipynb"))


def documents() -> list[Path]:
    """The documents (Markdown): the simulator, streams, programs, profiling, rings, tuning..."""
    return sorted(folders()[1].glob("*.md"))


@dataclass
class TutorialsCopy:
    """What :func:`tutorials` did: the folder, the files it copied and those
    it left as they were (already there)."""

    folder: Path
    copied: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)

    def summary(self) -> str:
        kept = (f"; {len(self.kept)} already there, kept as they were (overwrite=True or "
                f"--overwrite replaces them)" if self.kept else "")
        return (f"{len(self.copied)} files copied to {self.folder}{kept}. Open them with: "
                f"jupyter lab {self.folder}")

    def __repr__(self) -> str:
        names = [p.relative_to(self.folder).as_posix() for p in self.copied + self.kept]
        return self.summary() + "".join(f"\n  {n}" for n in names)

    def _repr_html_(self) -> str:
        items = "".join(f"<li><code>{html.escape(p.relative_to(self.folder).as_posix())}</code></li>"
                        for p in self.copied + self.kept)
        return f"<div><p>{html.escape(self.summary())}</p><ul>{items}</ul></div>"

    def to_pandas(self):
        """One row per file: ``path``, ``copied`` (False: it was there and kept)."""
        rows = [{"path": str(p), "copied": True} for p in self.copied]
        rows += [{"path": str(p), "copied": False} for p in self.kept]
        return pandas().DataFrame(rows, columns=["path", "copied"])


def tutorials(directory: str | Path = DEFAULT_DIR, *, overwrite: bool = False) -> TutorialsCopy:
    """Copy the tutorial notebooks into ``directory`` (made if needed) and the
    documents into ``directory/docs``; then ``jupyter lab DIRECTORY`` opens
    them. A file already there is kept (it may hold your changes) unless
    ``overwrite=True``.

    From a shell: ``python -m workbench tutorials DIRECTORY``.
    """
    folder = Path(directory).expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise WorkbenchError(f"{folder} is a file, not a folder: name a folder for the tutorials.")
    result = TutorialsCopy(folder)
    for sources, target in ((notebooks(), folder), (documents(), folder / "docs")):
        target.mkdir(parents=True, exist_ok=True)
        for source in sources:
            destination = target / source.name
            if destination.exists() and not overwrite:
                result.kept.append(destination)
                continue
            shutil.copyfile(source, destination)
            result.copied.append(destination)
    return result
