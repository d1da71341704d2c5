"""Regenerate ``src/tokenplan/catalog/gemm_curves.json`` from aiconfigurator's GEMM tables.

NVIDIA's aiconfigurator (github.com/ai-dynamo/aiconfigurator, Apache-2.0) publishes per-op
silicon measurements per GPU, engine and engine version:
``aic-core/src/aiconfigurator_core/systems/data/<system>/gemm/<engine>/<version>/gemm_perf.parquet``
with columns ``gemm_dtype, m, n, k, latency`` (latency in ms, one kernel of an M×K by K×N GEMM).

Reduction, per GPU with a table and per GEMM format (bf16, fp8 block-scaled, fp8 per-tensor,
nvfp4):

1. for each engine, its newest version's table; shapes with N and K in [1024, 16384] (the
   per-GPU projection and FFN shapes of the catalog's models under TP 1–8);
2. per shape, the kernel's fixed latency ``t_fix = t(1) − W / (0.9 · BW)``: the one-row time
   less the weight read ``W`` (N·K elements at the format's bytes) at 90 % of the datasheet
   HBM bandwidth ``BW`` (a plain device-to-device copy reaches ~92 %); the model holds that
   latency in its per-layer kernel latency (``layer_latency_s``), so it is not counted twice;
3. per shape and M, ``fraction = 2·M·N·K / (peak · (t(M) − t_fix))`` — the achieved share of
   the datasheet dense peak (catalog ``gpus.yaml``) once the fixed latency is taken off: at
   small M it is the weight read at 90 % of HBM (the model's roofline takes the larger of this
   and its bandwidth term), at large M the compute efficiency;
4. the median over shapes (a point whose ``t(M) − t_fix`` is not positive is a timing artefact
   and is dropped; an engine's M needs half its shapes valid), then the median over engines
   (robust to one engine's outlier kernel, e.g. a JIT compile timed at M = 1), capped at 1;
   The same median is also taken per weight-size band (N·K in [2^20, 2^22), [2^22, 2^24),
   [2^24, 2^26), [2^26, 2^28]: ``by_size``, stored at each band's geometric centre), because
   the efficiency depends on the weight's size as well as on M: on B200 at M = 8,192 FP8
   block-scaled GEMMs reach ~0.4 of peak below 4 M elements and ~0.65 above 64 M (small
   weights give too few output tiles to fill 148 SMs, and the block-scale overhead weighs
   more); BF16 stays within ~0.65–0.8 throughout. A band is held no higher than the next
   larger one at the same M (see ``_by_size``);
5. each curve keeps its ridge ``M* = F·b / (2·B)`` on the GPU measured (``ridge_rows``), below
   which the model does not read it (``perf/gemm.py``).

Usage: ``python tools/gemm_curves.py /path/to/aiconfigurator/git-dir [-o out.json]``. The path
is a git directory or work tree (read with ``git show HEAD:<path>``; ``--commit`` picks another).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from tokenplan.catalog import gpu_entry

DATA = "aic-core/src/aiconfigurator_core/systems/data"
SYSTEMS = {  # aiconfigurator system → tokenplan GPU key
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200",
    "b200_sxm": "b200",
    "gb200": "gb200",
    "b300_sxm": "b300",
    "gb300": "gb300",
    "rtx_pro_6000_server": "rtx-pro-6000",
    "a100_sxm": "a100-80gb",
    "l40s": "l40s",
}
# table dtype → (curve name, datasheet FLOPS class, weight bytes per element incl. block scales)
FORMATS = {
    "bfloat16": ("bf16", "bf16", 2.0),
    "fp8_block": ("fp8_block", "fp8", 1.0 + 4.0 / 128**2),
    "fp8": ("fp8_tensor", "fp8", 1.0),
    "nvfp4": ("fp4", "fp4", 0.5 + 1.0 / 16),
}
COPY_FRACTION = 0.9  # device-to-device copy share of datasheet HBM (see perf/efficiency.py hbm_fraction)
M_GRID = (1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
SHAPE_RANGE = (1024, 16384)
# Weight-size bands (N·K elements per GPU, edges 2^20 … 2^28: four factor-4 bands over the
# [1024, 16384]² range); each band's curve is stored at its geometric centre (2^21 … 2^27).
SIZE_EDGES = (2**20, 2**22, 2**24, 2**26, 2**28 + 1)


def _git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def newest_tables(repo: str, commit: str) -> dict[str, dict[str, str]]:
    """system → engine → path of the newest version's gemm_perf.parquet at ``commit``."""
    paths = _git(repo, "ls-tree", "-r", "--name-only", commit, DATA).decode().split()
    out: dict[str, dict[str, str]] = {}
    for p in paths:
        parts = p[len(DATA) + 1 :].split("/")
        if len(parts) != 5 or parts[1] != "gemm" or parts[4] != "gemm_perf.parquet" or parts[0] not in SYSTEMS:
            continue
        system, _, engine, version, _ = parts
        best = out.setdefault(system, {}).get(engine)
        if best is None or _version_key(version) > _version_key(best.split("/")[-2]):
            out[system][engine] = p
    return out


def _version_key(version: str) -> tuple:
    """``1.3.0rc20`` → ((1, 3, 0), 0, 20); a release sorts after its release candidates."""
    m = re.fullmatch(r"([\d.]+?)\.?(?:(rc|post)(\d+))?", version)
    if m is None:
        return ((), 0, 0)
    nums = tuple(int(x) for x in m.group(1).split(".") if x)
    tag = {"rc": 0, None: 1, "post": 2}[m.group(2)]
    return (nums, tag, int(m.group(3) or 0))


def shape_efficiency(
    table: dict[str, np.ndarray],
    peak: float,
    bytes_per_weight: float,
    hbm_bytes_per_s: float,
    size_range: tuple[float, float] = (0.0, np.inf),
) -> dict[int, float]:
    """M → median over shapes of the achieved share of ``peak`` with the fixed latency taken off,
    over the shapes whose N·K lies in ``size_range`` (elements, half-open)."""
    lo, hi = SHAPE_RANGE
    best: dict[tuple[int, int, int], float] = {}  # (m, n, k) → fastest latency (ms)
    for m, n, k, lat in zip(table["m"], table["n"], table["k"], table["latency"]):
        if lo <= n <= hi and lo <= k <= hi and size_range[0] <= n * k < size_range[1] and (m == 1 or m in M_GRID):
            key = (int(m), int(n), int(k))
            best[key] = min(best.get(key, np.inf), float(lat))
    out: dict[int, float] = {}
    for m in M_GRID:
        effs = []
        for (mm, n, k), lat in best.items():
            if mm != m or (1, n, k) not in best:
                continue
            read_s = n * k * bytes_per_weight / (COPY_FRACTION * hbm_bytes_per_s)
            fixed_s = max(best[(1, n, k)] * 1e-3 - read_s, 0.0)
            busy_s = lat * 1e-3 - fixed_s
            effs.append(2.0 * m * n * k / (peak * busy_s) if busy_s > 0 else np.nan)
        valid = [e for e in effs if not np.isnan(e)]
        if effs and len(valid) >= 0.5 * len(effs):
            out[m] = min(float(np.median(valid)), 1.0)
    return out


def _by_size(bands: list[list[dict[int, float]]], ms: list[int], all_shapes: list[float]) -> dict:
    """The curve per weight-size band: per band and M the median over engines, where at least
    one engine measured that band at that M; else the all-shapes median (a band without a
    measurement keeps the curve it would have had without size information). At each M a band
    is then held no higher than the next larger band: a smaller weight has fewer output tiles
    to spread over the SMs, so it cannot run a larger share of peak; where the tables say it
    does (B200 BF16 below 4 M elements reads the 1.0 cap at 512–1,024 rows), the kernel's fixed
    latency taken off has left too little time to measure."""
    rows = []
    for per_engine in bands:
        rows.append(
            [
                float(np.median([e[m] for e in per_engine if m in e])) if any(m in e for e in per_engine) else v
                for m, v in zip(ms, all_shapes)
            ]
        )
    for i in range(len(rows) - 2, -1, -1):  # from the second-largest band down
        rows[i] = [min(a, b) for a, b in zip(rows[i], rows[i + 1])]
    rows = [[round(v, 3) for v in row] for row in rows]
    centres = [int(round(np.sqrt(lo * hi))) for lo, hi in zip(SIZE_EDGES[:-1], SIZE_EDGES[1:])]
    return {"weight_elements": centres, "fraction": rows}


def reduce(repo: str, commit: str) -> dict:
    """The curves and their provenance (see the module docstring)."""
    curves: dict[str, dict[str, dict[str, list[float]]]] = {}
    used: list[str] = []
    for system, engines in sorted(newest_tables(repo, commit).items()):
        gpu = gpu_entry(SYSTEMS[system]).to_gpu(SYSTEMS[system])  # datasheet figures (no curves yet)
        per_format: dict[str, list[dict[int, float]]] = {}
        per_size: dict[str, list[list[dict[int, float]]]] = {}  # format → band → per-engine curves
        nbytes_of = {name: nbytes for name, _, nbytes in FORMATS.values()}
        class_of = {name: flops_class for name, flops_class, _ in FORMATS.values()}
        for engine, path in sorted(engines.items()):
            table = pq.read_table(
                io.BytesIO(_git(repo, "show", f"{commit}:{path}")), columns=["gemm_dtype", "m", "n", "k", "latency"]
            ).to_pydict()
            used.append(path)
            dtypes = np.asarray(table.pop("gemm_dtype"))
            cols = {c: np.asarray(v) for c, v in table.items()}
            for dtype, (name, flops_class, nbytes) in FORMATS.items():
                peak = gpu.dense_flops_per_s.get(flops_class)
                sel = dtypes == dtype
                if peak and sel.any():
                    rows = {c: v[sel] for c, v in cols.items()}
                    per_format.setdefault(name, []).append(shape_efficiency(rows, peak, nbytes, gpu.hbm_bytes_per_s))
                    bands = per_size.setdefault(name, [[] for _ in SIZE_EDGES[1:]])
                    for band, size_range in zip(bands, zip(SIZE_EDGES[:-1], SIZE_EDGES[1:])):
                        band.append(shape_efficiency(rows, peak, nbytes, gpu.hbm_bytes_per_s, size_range))
        curves[SYSTEMS[system]] = {}
        for name, per_engine in sorted(per_format.items()):
            ms = [m for m in M_GRID if any(m in e for e in per_engine)]
            med = [float(np.median([e[m] for e in per_engine if m in e])) for m in ms]
            if ms:
                peak = gpu.dense_flops_per_s[class_of[name]]
                ridge = peak * nbytes_of[name] / (2.0 * gpu.hbm_bytes_per_s)  # rows: 2MNK/F = NKb/B
                curves[SYSTEMS[system]][name] = {
                    "m": ms,
                    "fraction": [round(v, 3) for v in med],
                    "bytes_per_weight": nbytes_of[name],
                    "ridge_rows": ridge,
                    "by_size": _by_size(per_size[name], ms, med),
                }
    return {"curves": curves, "tables": used}


def _fail(message: str) -> None:
    """One line on stderr, exit status 2 (bad input)."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", help="aiconfigurator git directory (a mirror or a clone)")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("-o", "--output", type=Path, default=Path("src/tokenplan/catalog/gemm_curves.json"))
    args = ap.parse_args()
    try:
        commit = _git(args.repo, "rev-parse", "--verify", f"{args.commit}^{{commit}}").decode().strip()
    except subprocess.CalledProcessError:
        _fail(
            f"repo {args.repo!r} commit {args.commit!r}: not a git directory holding that commit (allowed: "
            "an aiconfigurator clone or mirror, e.g. `git clone --mirror https://github.com/ai-dynamo/aiconfigurator`)"
        )
    reduced = reduce(args.repo, commit)
    if not reduced["curves"]:
        _fail(f"repo {args.repo!r}: no {DATA}/<system>/gemm/<engine>/<version>/gemm_perf.parquet at {commit}")
    doc = {
        "source": {
            "repository": "https://github.com/ai-dynamo/aiconfigurator",
            "commit": commit,
            "license": "Apache-2.0",
            "tables": reduced["tables"],
            "reduction": (
                "tools/gemm_curves.py: per GPU and GEMM format, the newest version of each engine's "
                "gemm_perf.parquet; shapes with N, K in [1024, 16384]; per shape the fixed latency "
                "t_fix = t(1) - N*K*bytes / (0.9 * datasheet HBM) and fraction = 2MNK / (datasheet dense "
                "peak * (t(M) - t_fix)); median over shapes, then over engines; capped at 1; by_size: the "
                "same per N*K band [2^20,2^22), [2^22,2^24), [2^24,2^26), [2^26,2^28], stored at the band's "
                "geometric centre, the all-shapes median where no engine measured a band at an M, each band held no "
                "higher than the next larger band at the same M. Peaks and "
                "bandwidths: src/tokenplan/catalog/gpus.yaml."
            ),
            "columns": "fraction = achieved / datasheet dense FLOP/s at M rows (tokens per GEMM)",
        },
        "curves": reduced["curves"],
    }
    args.output.write_text(render(doc))


def render(doc: dict) -> str:
    """The JSON text, one line per curve (the file stays small and diffs read per curve)."""
    head = json.dumps({"source": doc["source"]}, indent=1)[:-2]
    gpus = [
        f' "{gpu}": {{\n' + ",\n".join(f'  "{name}": {json.dumps(c)}' for name, c in curves.items()) + "\n }"
        for gpu, curves in doc["curves"].items()
    ]
    return head + ',\n "curves": {\n' + ",\n".join(gpus) + "\n }\n}\n"


if __name__ == "__main__":
    main()
