"""A reader of `.npy` files that never runs code from the file.

`np.load(path, allow_pickle=True)` unpickles object arrays, and a pickle can call any importable
function (`os.system`, `builtins.open`, ...) while it is read. Some data folders hold exactly such
a file for good reasons: the original's NYU extraction saves its intrinsics dict with
`np.save(path, {"fx": ..., ...})`, a 0-d object array. `load_npy` reads plain arrays with
`allow_pickle=False` and object arrays with a restricted unpickler that resolves only the numpy
names an array, its dtype and its scalars need; anything else is refused, naming the file.

The standard library's pickle has no safe mode, and numpy offers none either, so this small
`find_class` allow-list is written here (the pattern the pickle documentation itself gives under
"Restricting Globals").
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

# (module, name) pairs an np.save of an object array (and its numpy scalars) needs; numpy 2
# pickles `numpy._core`, numpy 1 `numpy.core`
_ALLOWED = frozenset(
    {
        (m, n)
        for m in ("numpy.core.multiarray", "numpy._core.multiarray")
        for n in ("_reconstruct", "scalar")
    }
    | {("numpy", "ndarray"), ("numpy", "dtype")}
)


class PickledNpyError(ValueError):
    """An .npy file that cannot be read safely: the message names the file and the problem."""


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the numpy reconstruction names in _ALLOWED."""

    def __init__(self, file: io.BufferedIOBase, path: Path) -> None:
        super().__init__(file)
        self.path = path

    def find_class(self, module: str, name: str) -> object:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise PickledNpyError(
            f"{self.path}: refused to unpickle {module}.{name} (only numpy arrays and plain "
            "values are read from a pickled .npy; nothing in a data file is executed)"
        )

    def persistent_load(self, pid: object) -> object:
        raise PickledNpyError(f"{self.path}: refused a persistent id in a pickled .npy")


def load_npy(path: str | os.PathLike) -> np.ndarray:
    """The array in the .npy file `path`; an object array is unpickled with numpy names only.

    Raises PickledNpyError (a ValueError) naming the file for a refused or broken pickle, and
    OSError / ValueError from numpy for a file that is not an .npy.
    """
    p = Path(path)
    with open(p, "rb") as fp:
        try:
            version = npy_format.read_magic(fp)
            if version == (1, 0):
                _, _, dtype = npy_format.read_array_header_1_0(fp)
            elif version == (2, 0):
                _, _, dtype = npy_format.read_array_header_2_0(fp)
            else:  # 3.0 only changes the header's text encoding; np.load reads it without pickle
                dtype = None
        except ValueError as exc:
            raise PickledNpyError(f"{p}: not an .npy file ({exc})") from None
        if dtype is None or not dtype.hasobject:
            return np.load(p, allow_pickle=False)
        try:
            value = _NumpyOnlyUnpickler(fp, p).load()
        except PickledNpyError:
            raise
        except Exception as exc:  # a broken pickle raises many types (EOFError, KeyError, ...)
            raise PickledNpyError(
                f"{p}: unreadable pickled .npy ({type(exc).__name__}: {exc})"
            ) from None
    if not isinstance(value, np.ndarray):
        raise PickledNpyError(f"{p}: pickled .npy holds {type(value).__name__}, not an array")
    return value
