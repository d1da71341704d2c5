"""``manifest.json``: which job a run directory belongs to, so a rerun continues only the same job.

The job's configuration (what changes the outputs: model, mode, n, sampling, the input files'
names, sizes and SHA-256) is fingerprinted (SHA-256 of its canonical JSON); a run directory holding another
job's manifest is refused, naming each setting that changed, unless ``--force`` rebinds it.

A directory that holds no stored answer yet is bound to nothing worth protecting: a ``generate``
that failed before its first answer (a wrong ``--model``, port or ``/v1``; every row refused) has
written its manifest, and the corrected command rebinds the directory without ``--force``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tokenplan.errors import RunDirError
from tokenplan.runner.store.appendlog import shard_paths, write_whole

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


def check_manifest(path: Path, job: dict[str, Any], *, force: bool) -> str | None:
    """Write the manifest for ``job``, or check that the existing one is for the same job.

    Returns a note when a different job's manifest was replaced without ``force`` because the
    directory holds no stored answer (its skipped units are then the caller's to send again);
    None otherwise.

    Raises:
        RunDirError: a different job's manifest in a directory with stored answers (without
            ``force``), or an unreadable one.
    """
    manifest_path = path / "manifest.json"
    new = Manifest(
        fingerprint=fingerprint(job), job=job, created_at=datetime.now(timezone.utc).isoformat(timespec="seconds")
    )
    if manifest_path.exists():
        try:
            old = Manifest.model_validate_json(manifest_path.read_text())
        except (ValidationError, ValueError) as problem:
            raise RunDirError(f"{manifest_path}: not a tokenplan manifest ({str(problem).splitlines()[0]})") from None
        if old.fingerprint == new.fingerprint:
            return None
        if _without_digests(job) == old.job:  # written before inputs had a digest: the same job
            write_whole(
                manifest_path,
                new.model_copy(update={"created_at": old.created_at, "epoch": old.epoch})
                .model_dump_json(indent=2)
                .encode(),
            )
            return None
        before, after = _flatten(old.job), _flatten(job)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        detail = "; ".join(f"{k}: {before.get(k)!r} → {after.get(k)!r}" for k in changed)
        if not force and holds_answers(path):
            raise RunDirError(
                f"{path} holds a different job ({detail}); use another --out, "
                "or --force to continue it with the new configuration"
            )
        if not force:
            write_whole(manifest_path, new.model_dump_json(indent=2).encode())
            return (
                f"{path} held no stored answer, so it now holds this configuration ({detail}); "
                "units the earlier one skipped are sent again"
            )
    write_whole(manifest_path, new.model_dump_json(indent=2).encode())
    return None


def _without_digests(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` as a manifest written before the inputs' SHA-256 states it (names and sizes)."""
    inputs = job.get("inputs")
    if not isinstance(inputs, list):
        return job
    return {**job, "inputs": [{k: v for k, v in f.items() if k != "sha256"} for f in inputs]}


def holds_answers(path: Path) -> bool:
    """Whether any shard of ``path`` holds a whole record line (a stored answer)."""
    for shard in shard_paths(path / "shards"):
        with open(shard, "rb") as fh:
            if any(line.endswith(b"\n") and line.strip() for line in fh):
                return True
    return False


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``, so a refusal names the one setting that changed."""
    flat: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict) and item:
            flat.update(_flatten(item, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = item
    return flat
