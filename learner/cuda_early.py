"""The CUDA context, opened on a thread of its own while the learner imports torch.

A cold learner on the H200 spent 4.1-4.6 s between entering Learner.__init__ and a ready device
(README, "Training starts before the compile ends"): torch's import, then the CUDA driver's
initialisation and the device's primary context. The import is Python and dynamic loading,
which hold the GIL. The driver's calls, made here through ctypes, release it. So the driver
initialises beside the import. torch's runtime then finds the primary context open and uses it:
one context per device per process, whoever opened it first.

Nothing here is needed for correctness. Without libcuda, or on any error code, it does nothing,
and torch opens the context itself as before.
"""

from __future__ import annotations

import ctypes
import threading

LIB = "libcuda.so.1"


def ordinal(device: str) -> int:
    """The CUDA device index a learner with `device` ('auto', 'cuda', 'cuda:N') will use."""
    _, _, index = device.partition(":")
    return int(index) if index.isdigit() else 0


def open_context(index: int, lib_name: str = LIB) -> bool:
    """cuInit and retain device `index`'s primary context (held for the process's life);
    False where the driver is missing or says no."""
    try:
        lib = ctypes.CDLL(lib_name)
    except OSError:
        return False
    dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
    return (lib.cuInit(0) == 0 and lib.cuDeviceGet(ctypes.byref(dev), index) == 0
            and lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0)


def open_context_early(device: str) -> threading.Thread:
    """open_context on a daemon thread, started now; join it for the answer's side effects."""
    t = threading.Thread(target=open_context, args=(ordinal(device),), name="herd-cuda-init",
                         daemon=True)
    t.start()
    return t
