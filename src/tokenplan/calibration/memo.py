"""Exact reuse of row predictions across the fit's evaluations.

The optimiser evaluates every fit row once per finite-difference column group of each Jacobian
(~40 groups for the three ground-truth files), yet most perturbations do not touch a given row:
a factor may be overridden at the row's engine or engine × architecture level, or the row's
evaluation never reads it (``lowprec_fraction`` for a BF16 model, ``moe_kernel_factor`` for a
dense one, the draft's factors without speculative decoding). :class:`PredictionMemo` records,
for each row, which factors its evaluation *read* (an :class:`~tokenplan.perf.efficiency.Efficiency`
subclass that notes every field access) and the values they had. A later evaluation whose
factors agree on every field that was read takes the same branches and does the same arithmetic,
so it returns the same :class:`~tokenplan.calibration.validate.Predicted` bit for bit: the stored
one is returned without evaluating. Nothing is approximated; a field the evaluation might read on
another branch is only skipped while the branch that was taken does not depend on it.

This holds because ``predict_case`` is a pure function of the case and the factors (no cache in
``perf`` or ``job`` is keyed on an ``Efficiency``), and a copy of the factors (``replace``,
``asdict``, hashing) reads every field, which then counts as read.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import fields
from typing import Any

from tokenplan.calibration.validate import Case, Predicted, predict_case
from tokenplan.perf.efficiency import Efficiency

_FIELDS = frozenset(f.name for f in fields(Efficiency))
# A case's slot: the case (kept alive) and, per set of factor names read, values → prediction.
_Slot = tuple[Case, dict[tuple[str, ...], "OrderedDict[tuple[float, ...], Predicted]"]]


class _Traced(Efficiency):
    """Efficiency that adds the name of every factor read to ``_reads``."""

    __slots__ = ("_reads",)

    def __getattribute__(self, name: str) -> Any:
        if name in _FIELDS:
            object.__getattribute__(self, "_reads").add(name)
        return object.__getattribute__(self, name)


def traced(eff: Efficiency) -> tuple[Efficiency, set[str]]:
    """A copy of ``eff`` that records the factors read from it, and the set they go into."""
    reads: set[str] = set()
    copy = _Traced(**{name: getattr(eff, name) for name in _FIELDS})
    object.__setattr__(copy, "_reads", reads)
    return copy, reads


class PredictionMemo:
    """``predict_case`` with exact reuse (see the module docstring), shared by every fit of one
    calibration: the cross-validation refits start where the full fit ended, so the predictions
    of their first Jacobian were made by the full fit's last one.

    Per case (held by identity, and kept alive here), the evaluations made: for each set of
    factors an evaluation read, a map from their values to the prediction, the ``per_row`` most
    recent kept (64: the ~15 perturbations of one Jacobian that move a row, for a few points of
    the optimiser). ``hits`` and ``misses`` count reused and computed predictions.
    """

    def __init__(self, per_row: int = 64):
        self.per_row = per_row
        self._rows: dict[int, _Slot] = {}
        self.hits = 0
        self.misses = 0
        self.journal: list[tuple[int, tuple[str, ...], tuple[float, ...], Predicted]] | None = None

    def predict(self, case: Case, eff: Efficiency) -> Predicted:
        """The prediction of ``case`` with ``eff``: stored where an earlier evaluation read only
        factors whose values ``eff`` shares, else computed (and stored)."""
        slot = self._rows.get(id(case))
        if slot is None or slot[0] is not case:
            slot = self._rows[id(case)] = (case, {})
        by_reads = slot[1]
        for names, store in by_reads.items():
            key = tuple(getattr(eff, name) for name in names)
            stored = store.get(key)
            if stored is not None:
                store.move_to_end(key)
                self.hits += 1
                return stored
        copy, reads = traced(eff)
        predicted = predict_case(case, copy)
        names = tuple(sorted(reads))
        values = tuple(getattr(eff, name) for name in names)
        self._store(slot, names, values, predicted)
        if self.journal is not None:
            self.journal.append((id(case), names, values, predicted))
        self.misses += 1
        return predicted

    def _store(self, slot: _Slot, names: tuple[str, ...], values: tuple[float, ...], predicted: Predicted) -> None:
        store = slot[1].setdefault(names, OrderedDict())
        store[values] = predicted
        store.move_to_end(values)
        if len(store) > self.per_row:
            store.popitem(last=False)

    def merge(self, journal: list[tuple[int, tuple[str, ...], tuple[float, ...], Predicted]]) -> None:
        """Store the predictions another process made (its ``journal``): that process was forked
        from this one, so a case's ``id`` there is its ``id`` here. Entries of cases this memo
        has not seen are dropped."""
        for key, names, values, predicted in journal:
            slot = self._rows.get(key)
            if slot is not None:
                self._store(slot, names, values, predicted)
