"""nvcc builds of a student's .cu: cached libraries, compile errors with file and line."""

from __future__ import annotations

import ctypes

import pytest

from grader.kernels import cuda_build

pytestmark = [
    pytest.mark.student,
    pytest.mark.skipif(cuda_build.nvcc() is None, reason="nvcc is not installed on this machine"),
]

SOURCE = """#include <cuda_runtime.h>
__global__ void fill(float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 1.0f;
}
extern "C" int fill_ones(float* y, long long n) {
    fill<<<(unsigned)((n + 255) / 256), 256>>>(y, n);
    return (int)cudaGetLastError();
}
extern "C" int not_yet(float* y, long long n) { return -1; }  // not implemented
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda_build, "CACHE", tmp_path / "cache")
    return tmp_path / "cache"


def test_builds_a_loadable_library_and_caches_it(tmp_path, cache):
    source = tmp_path / "ones.cu"
    source.write_text(SOURCE)
    first = cuda_build.build(source)
    assert first.reason == "ok" and first.library.parent == cache
    library = ctypes.CDLL(str(first.library))
    assert library.not_yet(None, ctypes.c_longlong(3)) == -1
    stamp = first.library.stat().st_mtime_ns
    assert cuda_build.build(source).library == first.library
    assert first.library.stat().st_mtime_ns == stamp, "an unchanged source is not rebuilt"
    source.write_text(SOURCE + "\n// changed\n")
    assert cuda_build.build(source).library != first.library


def test_compile_error_names_file_and_line(tmp_path, cache):
    source = tmp_path / "broken.cu"
    source.write_text(SOURCE.replace("y[i] = 1.0f;", "y[i] = 1.0f"))
    result = cuda_build.build(source)
    assert result.reason == "compile_error" and result.library is None
    assert "broken.cu, line 5" in result.message  # where nvcc notices the missing ";"
    assert str(tmp_path) not in result.message, "the report shows the student's file name, not our paths"


def test_missing_source(tmp_path, cache):
    assert cuda_build.build(tmp_path / "absent.cu").reason == "missing_file"
