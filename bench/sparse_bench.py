#!/usr/bin/python3
"""The SciPy side of bench/sparse_bench.cpp: loads the CSR matrix and right-hand side that the
C++ program wrote (raw little-endian arrays), then times SpMV (median of `reps`) and CG / Jacobi
PCG to the same relative tolerance. Prints one JSON object. Run by sparse_bench, not by hand."""
import json, sys, time
import numpy as np
import scipy
import scipy.sparse as sp
import scipy.sparse.linalg as spla

d, n, nnz, reps, rtol = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
row_ptr = np.fromfile(f"{d}/row_ptr.i32", dtype=np.int32, count=n + 1)
col = np.fromfile(f"{d}/col.i32", dtype=np.int32, count=nnz)
val = np.fromfile(f"{d}/val.f64", dtype=np.float64, count=nnz)
b = np.fromfile(f"{d}/b.f64", dtype=np.float64, count=n)
A = sp.csr_matrix((val, col, row_ptr), shape=(n, n))
x = np.ones(n)
y = A @ x
times = []
for _ in range(reps):
    t0 = time.perf_counter()
    y = A @ x
    times.append(time.perf_counter() - t0)
out = {"scipy": scipy.__version__, "spmv_s": sorted(times)[len(times) // 2], "spmv_check": float(y.sum())}
if len(sys.argv) > 6 and sys.argv[6] == "spmv":  # SpMV only (rlx_bench_sparse GRID REPS spmv)
    print(json.dumps(out))
    sys.exit(0)
for name, M in (("cg", None), ("pcg_jacobi", sp.diags(1.0 / A.diagonal()))):
    its = [0]
    def cb(_):
        its[0] += 1
    t0 = time.perf_counter()
    xs, info = spla.cg(A, b, tol=rtol, atol=0.0, maxiter=100000, M=M, callback=cb)
    t = time.perf_counter() - t0
    out[name] = {"s": t, "iterations": its[0], "info": info,
                 "relative_residual": float(np.linalg.norm(b - A @ xs) / np.linalg.norm(b))}
print(json.dumps(out))
