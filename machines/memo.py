"""Values computed once per IR: a frozen :class:`~interlock.machines.ir.MachineIR` (one per
spec text, :func:`~interlock.machines.checked.ir_of`) gives the same lint findings and the
same compiled class every time, and every session opened on a spec asks for them again
(each Ralph subagent call opens two)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from interlock.machines.ir import MachineIR

T = TypeVar("T")


class PerIR(Generic[T]):
    """``make(ir)``, computed once for each of the last ``kept`` IR objects."""

    def __init__(self, make: Callable[[MachineIR], T], kept: int = 64) -> None:
        self._make = make
        self._kept = kept
        self._values: dict[int, tuple[MachineIR, T]] = {}

    def __call__(self, ir: MachineIR) -> T:
        known = self._values.get(id(ir))
        if known is not None and known[0] is ir:
            return known[1]
        value = self._make(ir)
        if len(self._values) >= self._kept:
            self._values.pop(next(iter(self._values)), None)
        self._values[id(ir)] = (ir, value)  # the IR is kept alive with it: its id is not reused
        return value
