# Hostile: cuBLAS saxpy through ctypes does the sum; a one-element kernel of its own makes it look honest.
import ctypes
import glob
import os

import torch
import triton
import triton.language as tl


@triton.jit
def one_element_kernel(out_ptr):
    tl.store(out_ptr, tl.load(out_ptr))


def _cublas():
    found = glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib", "libcublas.so*"))
    return ctypes.CDLL(found[0] if found else "libcublas.so")


def add(x, y):
    lib = _cublas()
    handle = ctypes.c_void_p()
    lib.cublasCreate_v2(ctypes.byref(handle))
    out = y.clone()
    one = ctypes.c_float(1.0)
    lib.cublasSaxpy_v2(handle, x.numel(), ctypes.byref(one), ctypes.c_void_p(x.data_ptr()), 1,
                       ctypes.c_void_p(out.data_ptr()), 1)
    one_element_kernel[(1,)](out)
    return out
