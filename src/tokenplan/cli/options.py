"""Option parsing shared by CLI commands (translation only, no computation)."""

from __future__ import annotations

from tokenplan.errors import InputError
from tokenplan.userfiles import MAX_PRICE_USD_PER_GPU_HOUR


def parse_prices(items: list[str]) -> dict[str, float]:
    """``["b200=4.5"]`` → ``{"b200": 4.5}``. Raises InputError."""
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            out[key.strip().lower()] = float(value)
        except ValueError:
            raise InputError("price", item, "GPU=USD per GPU-hour, e.g. b200=4.5") from None
        if not sep or not key.strip():
            raise InputError("price", item, "GPU=USD per GPU-hour, e.g. b200=4.5")
        if not 0 < out[key.strip().lower()] <= MAX_PRICE_USD_PER_GPU_HOUR:  # also refuses nan
            raise InputError("price", item, f"GPU=USD per GPU-hour with 0 < USD ≤ {MAX_PRICE_USD_PER_GPU_HOUR:,}")
    return out


def plan_request_fields(job_path: str | None, cli: dict) -> dict:
    """Merge a job YAML under the CLI options (CLI wins); drop unset values."""
    fields: dict = {}
    if job_path:
        from tokenplan.userfiles import read_job_file

        job = read_job_file(job_path)
        for name in ("model", "samples", "engine"):
            if getattr(job, name) is not None:
                fields[name] = getattr(job, name)
        if job.gpus:
            fields["gpus"] = tuple(job.gpus)
        if job.prices:
            fields["prices"] = {k.lower(): v for k, v in job.prices.items()}
        if job.spec:
            fields["specs"] = (job.spec,)
        for prefix, lengths in (("isl", job.isl), ("osl", job.osl)):
            if lengths is not None:
                fields[f"{prefix}_mean"], fields[f"{prefix}_sigma"], fields[f"{prefix}_cap"] = (
                    lengths.mean, lengths.sigma, lengths.cap)
    fields.update({k: v for k, v in cli.items() if v is not None})
    return fields
