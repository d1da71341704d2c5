"""``manifest.json``: which job a run directory belongs to, so a rerun continues only the same job.

The job's configuration (what changes the outputs: model, mode, n, sampling, the input files'
names and sizes) is fingerprinted (SHA-256 of its canonical JSON); a run directory holding another
job's manifest is refused, naming each setting that changed, unless ``--force`` rebinds it.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tokenplan.errors import RunDirError
from tokenplan.runner.appendlog import write_whole

MANIFEST_FORMAT = 1


class Manifest(BaseModel):
    """``manifest.json``: which job this directory belongs to."""

    format: int = MANIFEST_FORMAT
    fingerprint: str
    job: dict[str, Any]
    created_at: str
    epoch: int = 0  # raised by every Ray-backend run; writers of an older epoch stop (runner.fencing)


def fingerprint(job: dict[str, Any]) -> str:
    """16 hex digits of SHA-256 over the job configuration as canonical JSON."""
    return hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()[:16]


def check_manifest(path: Path, job: dict[str, Any], *, force: bool) -> None:
    """Write the manifest for ``job``, or check that the existing one is for the same job.

    Raises:
        RunDirError: a different job's manifest (without ``force``), or an unreadable one.
    """
    manifest_path = path / "manifest.json"
    new = Manifest(fingerprint=fingerprint(job), job=job,
                   created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    if manifest_path.exists():
        try:
            old = Manifest.model_validate_json(manifest_path.read_text())
        except (ValidationError, ValueError) as problem:
            raise RunDirError(f"{manifest_path}: not a tokenplan manifest "
                              f"({str(problem).splitlines()[0]})") from None
        if old.fingerprint == new.fingerprint:
            return
        if not force:
            before, after = _flatten(old.job), _flatten(job)
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            detail = "; ".join(f"{k}: {before.get(k)!r} → {after.get(k)!r}" for k in changed)
            raise RunDirError(f"{path} holds a different job ({detail}); use another --out, "
                              "or --force to continue it with the new configuration")
    write_whole(manifest_path, new.model_dump_json(indent=2).encode())


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``, so a refusal names the one setting that changed."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict) and item:
            flat.update(_flatten(item, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = item
    return flat
