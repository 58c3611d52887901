"""Inputs as the compiled kernels take them: C-contiguous and read-only.

numba compiles one machine-code version per argument type, and a read-only array is a
different type from a writable one (broadcast views are read-only, fresh arrays are not).
Passing every input as a read-only C-contiguous view keeps one version per dtype, which
matters because each costs seconds to compile on the first run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["frozen"]


def frozen(a: Any, dtype: Any = None) -> npt.NDArray[Any]:
    """``a`` as a C-contiguous read-only array (a view where no copy is needed)."""
    view = np.ascontiguousarray(a, dtype=dtype).view()
    view.flags.writeable = False
    return view
