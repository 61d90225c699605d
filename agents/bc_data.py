"""Compact storage of behaviour-cloning datasets: the expert's states as the env produced them, in less memory.

A BC dataset of the contended default holds about 110,000 states; stored densely each is 24.5 KB (the
window's W = 64 task and affinity rows, of which a median of 11 are present; the rest are padding zeros), so
the dataset alone took 2.7 GB and its copies while it grew dominated a training run's memory. Two lossless
encodings, each giving back exactly the arrays it was given:

- :class:`TrimmedRows` for per-state arrays of two or more dimensions: each state's trailing all-zero rows
  are dropped and restored as zeros when a batch is read;
- :class:`PackedBits` for per-state 0/1 vectors (the action masks): eight entries per byte.

Arrays of other shapes stay plain numpy arrays. :class:`StateBuffer` keeps each state compactly as it comes.
Every store is read the same way: ``dense(store, idx)`` gives the numpy array of the states ``idx``,
``subset(store, keep)`` a smaller store, ``concat(stores)`` one store.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np


class TrimmedRows:
    """States of shape ``row_shape`` (rows first) with each state's trailing all-zero rows left out."""

    def __init__(self, rows: np.ndarray, counts: np.ndarray, row_shape: tuple[int, ...], dtype: np.dtype):
        self.rows, self.counts = rows, counts.astype(np.int64)
        self.starts = np.concatenate(([0], np.cumsum(self.counts)[:-1])).astype(np.int64)
        self.row_shape, self.dtype = tuple(row_shape), np.dtype(dtype)

    @staticmethod
    def part(state: np.ndarray) -> np.ndarray:
        """One state as it is kept: a copy of its rows up to the last one with a non-zero entry."""
        nonzero = np.flatnonzero(state.reshape(len(state), -1).any(axis=1))
        return state[:int(nonzero[-1]) + 1 if len(nonzero) else 0].copy()

    @classmethod
    def from_parts(cls, parts: Sequence[np.ndarray], row_shape: tuple[int, ...], dtype: np.dtype) -> "TrimmedRows":
        """The store of states kept by :meth:`part` (``row_shape``, ``dtype``: of one whole state)."""
        counts = np.array([len(p) for p in parts], dtype=np.int64)
        rows = np.concatenate(parts) if len(parts) else np.zeros((0, *row_shape[1:]), dtype)
        return cls(rows, counts, row_shape, dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.counts), *self.row_shape)

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.counts.nbytes + self.starts.nbytes)

    def __len__(self) -> int:
        return len(self.counts)

    def dense(self, idx: np.ndarray) -> np.ndarray:
        """The states ``idx`` (integer indices) as one array (len(idx), *row_shape), padding rows zero."""
        idx = np.asarray(idx, dtype=np.int64)
        state, row, src = self._kept(idx)
        out = np.zeros((len(idx), *self.row_shape), self.dtype)
        out[state, row] = self.rows[src]
        return out

    def subset(self, keep: np.ndarray) -> "TrimmedRows":
        """The states ``keep`` (a boolean mask or integer indices), in that order."""
        idx = np.flatnonzero(keep) if np.asarray(keep).dtype == bool else np.asarray(keep, dtype=np.int64)
        return TrimmedRows(self.rows[self._kept(idx)[2]], self.counts[idx], self.row_shape, self.dtype)

    def _kept(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For every kept row of the states ``idx``, in order: its position in ``idx``, its row in the state
        and its index in ``self.rows``."""
        counts = self.counts[idx]
        state = np.repeat(np.arange(len(idx)), counts)
        row = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        return state, row, np.repeat(self.starts[idx], counts) + row

    @staticmethod
    def concat(stores: Sequence["TrimmedRows"]) -> "TrimmedRows":
        s0 = stores[0]
        return TrimmedRows(np.concatenate([s.rows for s in stores]), np.concatenate([s.counts for s in stores]),
                           s0.row_shape, s0.dtype)


class PackedBits:
    """0/1 vectors of length ``width`` and dtype ``dtype`` (bool or an integer type), eight entries per byte."""

    def __init__(self, bits: np.ndarray, width: int, dtype: np.dtype):
        self.bits, self.width, self.dtype = bits, int(width), np.dtype(dtype)

    @staticmethod
    def part(state: np.ndarray) -> np.ndarray:
        """One 0/1 vector as it is kept (ValueError for other values: they would not come back)."""
        if state.ndim != 1 or not np.isin(state, (0, 1)).all():
            raise ValueError(f"PackedBits stores 0/1 vectors; got shape {state.shape} with other values")
        return np.packbits(state.astype(bool))

    @classmethod
    def from_parts(cls, parts: Sequence[np.ndarray], width: int, dtype: np.dtype) -> "PackedBits":
        bits = np.stack(parts) if len(parts) else np.zeros((0, (width + 7) // 8), np.uint8)
        return cls(bits, width, dtype)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.bits), self.width)

    @property
    def nbytes(self) -> int:
        return int(self.bits.nbytes)

    def __len__(self) -> int:
        return len(self.bits)

    def dense(self, idx: np.ndarray) -> np.ndarray:
        return np.unpackbits(self.bits[np.asarray(idx, dtype=np.int64)], axis=1,
                             count=self.width).astype(self.dtype)

    def subset(self, keep: np.ndarray) -> "PackedBits":
        return PackedBits(self.bits[keep], self.width, self.dtype)

    @staticmethod
    def concat(stores: Sequence["PackedBits"]) -> "PackedBits":
        return PackedBits(np.concatenate([s.bits for s in stores]), stores[0].width, stores[0].dtype)


Store = Any  # np.ndarray | TrimmedRows | PackedBits


class StateBuffer:
    """Collects per-state arrays of one kind as they come (each kept compactly at once, so the dense states
    are never all held) and builds their store: :class:`PackedBits` for 0/1 vectors (``binary``),
    :class:`TrimmedRows` for arrays with rows, else one stacked array."""

    def __init__(self, binary: bool = False):
        self.binary = binary
        self.parts: list[np.ndarray] = []
        self.shape: tuple[int, ...] | None = None
        self.dtype: np.dtype | None = None

    def append(self, state: np.ndarray) -> None:
        state = np.asarray(state)
        if self.shape is None:
            self.shape, self.dtype = state.shape, state.dtype
        elif state.shape != self.shape:
            raise ValueError(f"state of shape {state.shape} among states of shape {self.shape}")
        if self.binary:
            self.parts.append(PackedBits.part(state))
        elif state.ndim >= 2:
            self.parts.append(TrimmedRows.part(state))
        else:
            self.parts.append(state.copy())

    def build(self) -> Store:
        if self.shape is None:
            raise ValueError("no states collected")
        if self.binary:
            return PackedBits.from_parts(self.parts, self.shape[0], self.dtype)
        if len(self.shape) >= 2:
            return TrimmedRows.from_parts(self.parts, self.shape, self.dtype)
        return np.stack(self.parts)


def dense(store: Store, idx: np.ndarray) -> np.ndarray:
    """The states ``idx`` of ``store`` as a numpy array."""
    return store[idx] if isinstance(store, np.ndarray) else store.dense(idx)


def subset(store: Store, keep: np.ndarray) -> Store:
    return store[keep] if isinstance(store, np.ndarray) else store.subset(keep)


def concat(stores: Sequence[Store]) -> Store:
    s0 = stores[0]
    return np.concatenate(stores) if isinstance(s0, np.ndarray) else type(s0).concat(stores)


def nbytes(data: dict[str, Any]) -> int:
    """Memory of a dataset's arrays (observations, masks, actions, returns)."""
    stores = [*data["obs"].values(), data["masks"], data["actions"], data["returns"]]
    return sum(int(s.nbytes) for s in stores)
