"""A numpy buffer for cheap appends during a run (the recorder's samples and step columns)."""

from __future__ import annotations

import numpy as np


class Growable:
    """A numpy buffer that doubles when full."""

    def __init__(self, dtype=np.float64, capacity: int = 1024):
        self._data = np.empty(capacity, dtype=dtype)
        self.size = 0

    @classmethod
    def holding(cls, values: np.ndarray) -> Growable:
        """A buffer holding exactly `values` (no spare room until the next extend)."""
        out = cls(values.dtype, 0)
        out._data, out.size = values, values.shape[0]
        return out

    def extend(self, values) -> None:
        if not isinstance(values, np.ndarray):
            values = np.atleast_1d(values)
        end = self._room(values.shape[0])
        self._data[self.size : end] = values
        self.size = end

    def claim(self, n: int) -> np.ndarray:
        """Append n slots and return them (a writable view) for the caller to fill."""
        start = self.size
        self.size = self._room(n)
        return self._data[start : self.size]

    def _room(self, n: int) -> int:
        """Make room for n more values; returns the new size."""
        end = self.size + n
        if end > self._data.shape[0]:
            grown = np.empty(max(end, 2 * self._data.shape[0]), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        return end

    def array(self) -> np.ndarray:
        return self._data[: self.size]
