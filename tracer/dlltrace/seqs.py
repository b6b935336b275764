"""A read-only sequence whose items are made on demand (`_get(i)`), indexed like a list (negative indexes,
slices): the trace's compact events (trace/reader.py Events), the replays with light records
(diagnosis/replay.py Replays), a process's replays picked out of them (diagnosis/verdict.py)."""

from __future__ import annotations

from typing import Sequence, TypeVar, Union, overload

T = TypeVar("T")


class MadeSequence(Sequence[T]):
    def _get(self, i: int) -> T:  # an index in range(len(self))
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: Union[int, slice]) -> Union[T, list[T]]:
        if isinstance(i, slice):
            return [self._get(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("index out of range")
        return self._get(i)
