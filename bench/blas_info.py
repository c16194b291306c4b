"""What BLAS numpy runs on and with how many threads (asked of the library numpy
loaded), for benchmark headers: bench_matmul.py, bench_interleaved.py."""
import ctypes
import os

import numpy as np


def openblas_threads():
    """Threads OpenBLAS will use, asked of the library numpy loaded (None when
    that is not a recognisable OpenBLAS)."""
    import glob
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in glob.glob(os.path.join(libs, "*openblas*")):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                    "openblas_get_num_threads64_", "openblas_get_num_threads"):
            fn = getattr(lib, sym, None)
            if fn is not None:
                return int(fn())
    return None


def blas_info():
    info = ""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info = "%s %s" % (blas.get("name"), blas.get("version"))
    except Exception:
        pass
    n = openblas_threads()
    if n is not None:
        info += " | OpenBLAS threads=%d" % n
    try:
        import threadpoolctl
        info += " | " + "; ".join(
            "%s threads=%s arch=%s" % (d.get("internal_api"),
                                       d.get("num_threads"),
                                       d.get("architecture"))
            for d in threadpoolctl.threadpool_info())
    except ImportError:
        pass
    return info
