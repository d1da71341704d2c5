"""How much of a validation error is the spread between repeated runs of one configuration?

InferenceX re-runs each configuration nightly, and the engine image changes between runs: the
same DeepSeek-R1 configuration on the same GPUs can measure 2× apart on two dates (SGLang
v0.5.2 against v0.5.9 on MI355X). A model that is not told the engine version can at best
predict one value per configuration. This script measures, for one measurement file:

- the *floor*: each row predicted by its configuration's median measurement (the geometric
  median over its repeats; the best single value a version-blind model could give), and
- the model's error against that same configuration median, next to its error against each row.

A configuration is the row's engine, model, GPU, layout, formats, nominal lengths, concurrency
and speculative decoding (everything ``tokenplan validate`` reads, not the date or the image).
Errors are |predicted / measured − 1| as in ``tokenplan validate``; percentiles by linear
interpolation (numpy's default, as ``calibration.validate.percentile``).

Usage (from the repository root)::

    python tools/repeat_spread.py data/ground-truth/inferencex-dev.csv

Reads the shipped calibration (``tokenplan validate FILE --json``); prints one line per figure.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import defaultdict

import numpy as np

CONFIG_COLUMNS = (
    "engine",
    "model",
    "gpu",
    "tp",
    "ep",
    "pp",
    "dp",
    "attention_dp",
    "weight_dtype",
    "kv_dtype",
    "isl",
    "osl",
    "concurrency",
    "spec_decode",
)
METRICS = (
    ("output tok/s per GPU", "output_tok_s_per_gpu", "predicted_output_tok_s_per_gpu"),
    ("median TPOT", "tpot_ms_median", "predicted_tpot_ms"),
    ("median TTFT", "ttft_ms_median", "predicted_ttft_ms"),
)


def _summary(errors: list[float]) -> str:
    e = np.asarray(errors)
    return f"median {np.median(e):6.1%}  p90 {np.percentile(e, 90):6.1%}"


def main(path: str) -> int:
    out = subprocess.run(["tokenplan", "validate", path, "--json"], capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout)["rows"]
    with open(path, newline="", encoding="utf-8") as f:
        source = {line: r for line, r in enumerate(csv.DictReader(f), start=2)}
    for label, column, predicted in METRICS:
        if column not in next(iter(source.values())):
            continue
        repeats: dict[tuple, list[float]] = defaultdict(list)
        for r in source.values():
            if r.get(column):
                repeats[tuple(r.get(c, "") for c in CONFIG_COLUMNS)].append(float(r[column]))
        median = {k: float(np.exp(np.median(np.log(v)))) for k, v in repeats.items()}
        floor, vs_row, vs_config = [], [], []
        for r in rows:
            s = source[r["line"]]
            if not s.get(column) or r.get(predicted) is None:
                continue
            measured, config = float(s[column]), median[tuple(s.get(c, "") for c in CONFIG_COLUMNS)]
            # validate's tok/s column is per GPU as in the file; its TPOT/TTFT are in ms like the file's
            floor.append(abs(config / measured - 1))
            vs_row.append(abs(r[predicted] / measured - 1))
            vs_config.append(abs(r[predicted] / config - 1))
        multi = sum(len(v) > 1 for v in repeats.values())
        print(f"{label}: {len(vs_row)} rows, {len(repeats)} configurations ({multi} measured more than once)")
        print(f"  floor (each row predicted by its configuration's median): {_summary(floor)}")
        print(f"  model against each row:                                   {_summary(vs_row)}")
        print(f"  model against its configuration's median:                 {_summary(vs_config)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python tools/repeat_spread.py FILE.csv", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
