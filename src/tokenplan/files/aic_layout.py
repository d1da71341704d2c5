"""The replica of a serving row as its engine was launched, where aiconfigurator's export squared it.

Rows of NVIDIA aiconfigurator's ``silicon_sample.csv`` (the source of ``serving-dev.csv``)
describe one replica as ``tp × attention_dp_size`` GPUs, with ``moe_tp_size × moe_ep_size``
equal to that. For part of the launches of ``--tp N --ep N`` the export wrote the engine's two
flags into the MoE columns and the replica as their product:

- SGLang and TensorRT-LLM rows: ``moe_tp_size = moe_ep_size = N`` and
  ``tp × attention_dp_size = N²`` (``…_c16_tp8_ep8_1036``: tp 64, moe_tp 8, moe_ep 8; with
  attention DP, ``…_c64_tp8_ep8_937``: tp 1, attention_dp_size 64);
- vLLM rows (expert parallelism spans TP × DP there): ``tp = attention_dp_size = N`` and
  ``moe_ep_size = N²`` (``…_c64_tp4_ep4_1392``: tp 4, attention_dp_size 4, moe_ep 16).

Read as written, such a row is a 16- or 64-GPU replica across two or eight nodes. What says it
is N GPUs, in the file itself (``serving-dev.csv`` as the team copied it, 2,534 rows):

- the row's own id names the launch, ``_tpN_epN_<row>``, and no id in the file names a tp of 16
  or 64 with ep > 1;
- 101 of the 260 rows this rule re-reads have an exact twin (the same GPU, lengths, concurrency,
  TTFT and TPOT to every printed digit), 45 of them in the regular form
  (``…_c128_tp4_0_ep4_0_351`` with tp 4, moe_tp 1, moe_ep 4 twins ``…_c128_cfg615`` with tp 16,
  moe_tp 4, moe_ep 4), and every family of ``config_id`` rows that has a twin twins N-GPU
  launches.

Rule: an id ending in ``_tpN_epM_<row>`` is the launch (N GPUs, expert parallel M). Without one,
the squared form with N ≥ 4 is read as N GPUs: 16 or 64 GPUs for one attention group has no
id in the file. With N = 2 and no id the form is ambiguous (``--tp 4 --ep 2`` exports the same
numbers as a squared ``--tp 2 --ep 2``) and the row is read as written.

Where the export lost the launch's EP or attention DP instead (the 2025-11-02 TensorRT-LLM rows),
our copy states the launch in a ``launch_layout`` column (:func:`launch_column`), read before the
layout columns.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from tokenplan.files.measurement_fields import RowError

_LAUNCH_ID = re.compile(r"_tp(\d+)_ep(\d+)_\d+$")
SMALLEST_UNAMBIGUOUS = 4  # N below which the squared form is read as written without an id


class ReplicaLayout(NamedTuple):
    """One replica: ``gpus`` (tp × attention DP), expert-parallel degree ``ep``, whether attention
    runs data-parallel, and ``note`` (why the columns were not read as written; None = as written)."""

    gpus: int
    ep: int
    attention_dp: bool
    note: str | None


def replica_layout(
    row_id: str, engine: str, tp: int, attention_dp_size: int, moe_tp: int, moe_ep: int
) -> ReplicaLayout:
    """The replica of one serving row (module docstring). ``tp``, ``attention_dp_size``, ``moe_tp``
    and ``moe_ep`` are the row's columns (blank = 1); the result's ``gpus`` excludes pipeline
    stages."""
    written = ReplicaLayout(tp * attention_dp_size, moe_ep, attention_dp_size > 1, None)
    n = _squared_n(engine, tp, attention_dp_size, moe_tp, moe_ep)
    if n is None:
        return written
    launch = _LAUNCH_ID.search(row_id)
    if launch is not None:
        if int(launch[1]) != n or int(launch[2]) != n:
            return written
        why = f"its id names the launch tp {n}, ep {n}"
    elif n >= SMALLEST_UNAMBIGUOUS:
        why = f"the squared export of --tp {n} --ep {n} (no id in the file names a {n * n}-GPU launch)"
    else:
        return written
    columns = layout_columns(tp, attention_dp_size, moe_tp, moe_ep)
    return ReplicaLayout(
        n,
        n,
        attention_dp_size > 1 and engine != "vllm",
        f"read as {n} GPUs, not {tp * attention_dp_size}: {why} ({columns})",
    )


def layout_columns(tp: int, attention_dp_size: int, moe_tp: int, moe_ep: int) -> str:
    """The layout columns as a note quotes them."""
    return f"tp {tp}, attention_dp_size {attention_dp_size}, moe_tp_size {moe_tp}, moe_ep_size {moe_ep}"


def _squared_n(engine: str, tp: int, adp: int, moe_tp: int, moe_ep: int) -> int | None:
    """N where the columns have the squared form of ``--tp N --ep N``, else None."""
    if engine == "vllm":
        if tp == adp and tp > 1 and moe_tp <= 1 and moe_ep == tp * adp:
            return tp
        return None
    if moe_tp == moe_ep and moe_tp > 1 and tp * adp == moe_tp * moe_ep:
        return moe_tp
    return None


_LAUNCH_FIELD = re.compile(r"^(tp|ep|attention_dp)=(\S+)$")


def launch_column(cell: str, columns: str) -> ReplicaLayout | None:
    """The ``launch_layout`` column of a serving row (our copy of ``serving-dev.csv``): the
    launch's parallel flags as its script set them, ``tp=N ep=M attention_dp=true|false``, where
    the export's layout columns lost them (the data README says which rows). ``columns`` describes
    the row's layout columns for the note. None where blank.

    Raises:
        RowError: a field other than ``tp``, ``ep``, ``attention_dp``, a degree that is not a
            whole number ≥ 1, ``ep`` that does not divide ``tp``, or a missing ``tp``.
    """
    cell = cell.strip()
    if not cell:
        return None
    got: dict[str, str] = {}
    for part in cell.split():
        m = _LAUNCH_FIELD.match(part)
        if m is None:
            raise RowError(f"column launch_layout value {cell!r} is not 'tp=N ep=M attention_dp=true|false'")
        got[m[1]] = m[2].lower()
    if "tp" not in got:
        raise RowError(f"column launch_layout value {cell!r} names no tp")
    try:
        tp, ep = int(got["tp"]), int(got.get("ep", "1"))
    except ValueError:
        raise RowError(f"column launch_layout value {cell!r}: tp and ep are whole numbers ≥ 1") from None
    if tp < 1 or ep < 1 or tp % ep:
        raise RowError(f"column launch_layout value {cell!r}: tp and ep ≥ 1, ep dividing tp")
    if got.get("attention_dp", "false") not in ("true", "false"):
        raise RowError(f"column launch_layout value {cell!r}: attention_dp is true or false")
    adp = got.get("attention_dp") == "true"
    note = f"read as its launch_layout column ({cell}), not the layout columns ({columns})"
    return ReplicaLayout(tp, ep, adp, note)
