"""The program build cache: a cached binary is used only while what it was
built from is unchanged, headers from -I folders and -L libraries included
(the cache key itself holds the program's own files and options)."""
import os

import pytest

import workbench as wb
from workbench.cache import library_files, read_depfile, relative_folders
from workbench.programs import find_nvcc

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")

SOURCE = r"""
#include <cstdio>
#include "answer.h"
__global__ void k(int* out) { *out = ANSWER; }
int main() {
    int* d; int h = 0;
    cudaMalloc(&d, sizeof(int));
    k<<<1, 1>>>(d);
    cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
    printf("%d\n", h);
    return 0;
}
"""


def _header(folder, value):
    (folder / "answer.h").write_text(f"#define ANSWER {value}\n")


def test_changing_a_header_in_an_include_folder_rebuilds(tmp_path):
    include = tmp_path / "include"
    include.mkdir()
    _header(include, 41)
    options = f"-I {include}"
    source = SOURCE + f"// {tmp_path.name}\n"  # a fresh key for this test
    first = wb.program(source, backend="simulator", options=options, echo=False)
    assert first.stdout == "41\n" and not first.build.cache_hit
    again = wb.program(source, backend="simulator", options=options, echo=False)
    assert again.stdout == "41\n" and again.build.cache_hit
    _header(include, 42)
    changed = wb.program(source, backend="simulator", options=options, echo=False)
    assert changed.stdout == "42\n" and not changed.build.cache_hit


def test_a_relative_include_folder_is_found_from_the_current_folder(tmp_path, monkeypatch):
    source = SOURCE + f"// {tmp_path.name} relative\n"
    for name, value in (("a", 1), ("b", 2)):
        (tmp_path / name / "include").mkdir(parents=True)
        _header(tmp_path / name / "include", value)
    monkeypatch.chdir(tmp_path / "a")
    assert wb.program(source, backend="simulator", options="-Iinclude", echo=False).stdout == "1\n"
    monkeypatch.chdir(tmp_path / "b")
    assert wb.program(source, backend="simulator", options="-Iinclude", echo=False).stdout == "2\n"


@needs_nvcc
def test_nvcc_rebuilds_when_a_header_in_an_include_folder_changes(tmp_path):
    include = tmp_path / "include"
    include.mkdir()
    _header(include, 41)
    options = f"-arch=sm_90 -I {include}"
    source = SOURCE + f"// {tmp_path.name} nvcc\n"
    first = wb.programs.build_program(source, backend="gpu", options=options)
    assert wb.programs.build_program(source, backend="gpu", options=options).cache_hit
    _header(include, 42)
    changed = wb.programs.build_program(source, backend="gpu", options=options)
    assert not changed.cache_hit and changed.executable == first.executable


def test_dependency_files_and_libraries_are_read(tmp_path):
    depfile = tmp_path / "p.d"
    depfile.write_text("prog : a.cu /opt/my\\ dir/h.h \\\n    /usr/include/stdio.h\n")
    assert read_depfile(depfile) == ["a.cu", "/opt/my dir/h.h", "/usr/include/stdio.h"]
    (tmp_path / "libfoo.a").write_bytes(b"!<arch>\n")
    assert library_files(["-L", str(tmp_path), "-lfoo", "-lm"]) == [os.path.join(tmp_path, "libfoo.a")]
    assert relative_folders(["-Iinclude"]) and not relative_folders(["-I", "/abs", "-O2"])
