"""The gallery of the kernel library: ``wb.kernels.catalog()`` (a table of
every kernel) and ``wb.kernels.source(name)`` (its CUDA source, highlighted)."""
from __future__ import annotations

import html

from ..errors import ArgumentValueError
from ..present.tables import html_table, pandas
from .library import KernelSpec, families, last_variant, source_text, specs, variant_sources

_COLUMNS = ("name", "family", "dtypes", "bytes/element", "FLOPs/element", "FLOPs/byte",
            "library equivalent", "description", "variant", "roofline", "source")


def _variant(spec: KernelSpec) -> str:
    """The variant the kernel's last call ran, else the ones it chooses from."""
    ran = last_variant(spec.name)
    if ran:
        return f"ran: {ran}"
    return " | ".join(spec.variants)


def _row(spec: KernelSpec) -> tuple:
    intensity = spec.flops_per_element / spec.bytes_per_element if spec.bytes_per_element else None
    files = [f"cu/{spec.family}.cu"] + [f"cu/{spec.family}.{v}.cu" for v in variant_sources(spec.family)]
    return (spec.name, spec.family, ", ".join(spec.dtypes), spec.bytes_per_element,
            spec.flops_per_element, intensity, "yes" if spec.library_equivalent else "no",
            spec.description, _variant(spec), spec.roofline or "copy bandwidth",
            ", ".join(files))


class Catalog:
    """The kernels of the library, one row each: name, family, dtypes, bytes
    and FLOPs per element (for ``dtypes[0]``) and their ratio, the arithmetic
    intensity that places the kernel on a roofline; the variant its last call
    ran (or the variants it chooses from) and the ceiling it is measured
    against."""

    def __init__(self, kernels: list[KernelSpec]):
        self.kernels = kernels

    def rows(self) -> list[dict]:
        """One dict per kernel, keyed by the column names."""
        return [dict(zip(_COLUMNS, _row(s))) for s in self.kernels]

    def to_pandas(self):
        """The catalog as a DataFrame."""
        return pandas().DataFrame(self.rows(), columns=list(_COLUMNS))

    def __len__(self) -> int:
        return len(self.kernels)

    def __iter__(self):
        return iter(self.kernels)

    def _title(self) -> str:
        return (f"wb.kernels: {len(self.kernels)} kernels in "
                f"{len({s.family for s in self.kernels})} families")

    def __repr__(self) -> str:
        rows = [_row(s) for s in self.kernels]
        shown = [(r[0], r[1], r[2], f"{r[3]:g}", f"{r[4]:g}", r[7]) for r in rows]
        header = ("name", "family", "dtypes", "B/elem", "FLOP/elem", "description")
        widths = [max(len(str(x)) for x in column) for column in zip(header, *shown)]
        lines = [self._title()]
        for r in (header, *shown):
            lines.append("  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return html_table([_row(s) for s in self.kernels], list(_COLUMNS), title=self._title(),
                          number_format=".3g",
                          notes=["bytes and FLOPs per output element for the first dtype; "
                                 "wb.kernels.source(name) shows a kernel's CUDA source"])


def catalog(family: str | None = None) -> Catalog:
    """Every kernel of the library (or of one ``family``), sorted by family
    then name, as a table (``to_pandas()`` for a DataFrame)."""
    found = [s for s in specs().values() if family is None or s.family == family]
    if family is not None and not found:
        raise ArgumentValueError(
            f"no kernel family {family!r}; the library has: {', '.join(families())}")
    return Catalog(sorted(found, key=lambda s: (s.family, s.name)))


class Source:
    """The CUDA C++ source of one family (or of one of its variants);
    ``str()`` is the text, a notebook shows it highlighted as CUDA (with
    pygments, when installed)."""

    def __init__(self, family: str, text: str, kernel: str | None = None,
                 variant: str | None = None):
        self.family = family
        self.text = text
        self.kernel = kernel
        self.variant = variant

    @property
    def path(self) -> str:
        stem = self.family + (f".{self.variant}" if self.variant else "")
        return f"workbench/kernels/cu/{stem}.cu"

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        what = f"{self.kernel} in " if self.kernel else ""
        return f"<wb.kernels.Source {what}{self.path}: {self.text.count(chr(10))} lines>"

    def _repr_pretty_(self, p, cycle):
        p.text(self.text)

    def _repr_html_(self) -> str:
        head = html.escape(self.path + (f" (kernel {self.kernel})" if self.kernel else ""))
        try:
            from pygments import highlight  # lazy: optional (comes with IPython)
            from pygments.formatters import HtmlFormatter  # lazy: as above
            from pygments.lexers import CudaLexer  # lazy: as above
        except ImportError:
            body = f"<pre>{html.escape(self.text)}</pre>"
        else:
            formatter = HtmlFormatter(noclasses=True, style="default")
            body = highlight(self.text, CudaLexer(), formatter)
        return f"<div><b>{head}</b>{body}</div>"


def source(name: str, variant: str | None = None) -> Source:
    """The CUDA source of kernel ``name`` (``"relu"``) or of a family
    (``"reductions"``): the whole ``.cu`` file it is compiled from; with
    ``variant``, the family's variant file (``source("hgemm", "sm90")``: the
    Hopper GEMM)."""
    kernels = specs()
    if name in kernels:
        family = kernels[name].family
        return Source(family, source_text(family, variant), kernel=name, variant=variant)
    if name in families():
        return Source(name, source_text(name, variant), variant=variant)
    raise ArgumentValueError(
        f"no kernel or family {name!r} in wb.kernels; wb.kernels.catalog() lists "
        f"the kernels, families are: {', '.join(families())}")
