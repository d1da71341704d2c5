"""The job YAML — read once, validated by pydantic, errors as
one line naming the file and the key."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from tokenplan.errors import ConfigError, InputError, allowed_from_validation
from tokenplan.loaders import load_yaml
from tokenplan.units import MAX_PRICE_USD_PER_GPU_HOUR, MAX_REQUEST_TOKENS, MAX_SAMPLES

MAX_JOB_FILE_BYTES = 1 << 20  # a job YAML is a few hundred bytes


def _first_error(path: str, exc: ValidationError, model: type[BaseModel] | None = None) -> ConfigError:
    """The first validation error as one line; an unknown key lists the keys allowed where it sits."""
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"]) or "<root>"
    if err["type"] == "extra_forbidden" and model is not None:
        allowed = _keys_at(model, err["loc"][:-1])
        if allowed:
            close = difflib.get_close_matches(str(err["loc"][-1]), allowed, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            return ConfigError(path, key, f"unknown key ({hint}allowed: {', '.join(allowed)})")
    return ConfigError(path, key, f"{err.get('input')!r} is not allowed (allowed: {allowed_from_validation(err)})")


def _keys_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names of the (nested) model at ``loc`` ([] where ``loc`` is not a model)."""
    for part in loc:
        field = model.model_fields.get(str(part))
        inner = getattr(field, "annotation", None) if field else None
        inner = next(
            (a for a in getattr(inner, "__args__", (inner,)) if isinstance(a, type) and issubclass(a, BaseModel)), None
        )
        if inner is None:
            return []
        model = inner
    return list(model.model_fields)


class JobFile(BaseModel):
    """A job described in YAML (every key optional; CLI options override it).

    Example::

        model: qwen3.6-27b
        samples: 914000
        isl: {mean: 1024, sigma: 0.8, cap: 8192}   # or isl: 1024 (σ 0: every prompt 1,024)
        osl: {mean: 2500, sigma: 1.0, cap: 32768}
        gpus: ["4xrtx-pro-6000", "8xb200"]
        engine: sglang
        prices: {b200: 5.25}
        spec: [none, "mtp:1"]   # or one setting (spec: mtp:3), as --spec is given once or repeated
        current: engine=sglang,tp=4,weight-dtype=bf16,spec=mtp:3,max-running=48   # or a mapping of the same keys
        measured_tok_s: 1600
        draft_model: z-lab/Qwen3.6-27B-DFlash   # with spec: dflash:7 (plan --draft-model)
        tp: 4              # search only these layouts (plan --tp/--pp/--dp/--ep)
        max_running: 128   # the engine's running-request cap per replica (plan --max-running)
    """

    model_config = ConfigDict(extra="forbid")

    class Lengths(BaseModel):
        model_config = ConfigDict(extra="forbid")
        mean: float = Field(gt=0, le=MAX_REQUEST_TOKENS)
        sigma: float = Field(default=0.0, ge=0)
        cap: float | None = Field(default=None, gt=0, le=MAX_REQUEST_TOKENS)

    model: str | None = None
    samples: StrictInt | None = None
    isl: Lengths | None = None
    osl: Lengths | None = None
    gpus: list[str] | None = None
    engine: str | None = None
    prices: dict[str, Annotated[float, Field(gt=0, le=MAX_PRICE_USD_PER_GPU_HOUR)]] | None = None
    spec: str | list[str] | None = None  # one setting, or a list as repeated --spec options
    draft_model: str | None = None  # plan --draft-model: the EAGLE/DFlash drafter's folder or repository
    current: str | None = None  # plan --current: the setup run now on the first GPU option
    measured_tok_s: float | None = Field(default=None, gt=0)  # plan --measured-tok-s
    tp: StrictInt | None = Field(default=None, gt=0)  # plan --tp
    pp: StrictInt | None = Field(default=None, gt=0)  # plan --pp
    dp: StrictInt | None = Field(default=None, gt=0)  # plan --dp
    ep: StrictInt | None = Field(default=None, gt=0)  # plan --ep
    max_running: StrictInt | None = Field(default=None, gt=0)  # plan --max-running

    @field_validator("samples")
    @classmethod
    def _samples_in_range(cls, value: int | None) -> int | None:
        """The range ``plan --samples`` allows, in its words (a job file said "a number > 0")."""
        if value is not None and not 1 <= value <= MAX_SAMPLES:
            raise ValueError(f"an integer from 1 to {MAX_SAMPLES:,}")
        return value

    @field_validator("isl", "osl", mode="before")
    @classmethod
    def _bare_mean(cls, value: object) -> object:
        """``isl: 512`` as ``isl: {mean: 512}`` (fixed lengths: a job file's σ is 0 unless given),
        the way ``--isl 512`` names a mean on the command line; it was refused in pydantic's
        words ("a valid dictionary or instance of Lengths")."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {"mean": value}
        if value is not None and not isinstance(value, dict):  # 'abc', [1], 1e30 (YAML 1.1 reads it as text)
            raise ValueError("a number of tokens (e.g. 1024 or 1.0e+4), or a mapping of mean, sigma and cap")
        return value

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpu_options(cls, value: object) -> object:
        """``gpus:`` as a list of ``--gpu`` options, or one of them alone (``gpus: 8xb200``, as
        ``--gpu`` takes one: a new-user pass was told "allowed: a list")."""
        return [value] if isinstance(value, str) else value

    @field_validator("spec", mode="before")
    @classmethod
    def _spec_settings(cls, value: object) -> object:
        """``spec:`` as one ``--spec`` setting or a list of them; anything else is refused in one
        phrase (pydantic named each arm of the union: ``spec.str: … (allowed: text)``)."""
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return value
        raise ValueError('a --spec setting (e.g. mtp:3), or a list of them (e.g. [none, "mtp:1"])')

    @field_validator("current", mode="before")
    @classmethod
    def _current_text(cls, value: object) -> object:
        """``current:`` as ``--current`` text, or a mapping of the same keys (``{engine: sglang,
        tp: 4}`` → ``engine=sglang,tp=4``; YAML booleans as true/false)."""
        if not isinstance(value, dict):
            return value
        shown = {k: str(v).lower() if isinstance(v, bool) else v for k, v in value.items()}
        return ",".join(f"{k}={v}" for k, v in shown.items())

    def request_fields(self) -> dict:
        """The keys given, as ``tokenplan.api.plan.PlanRequest`` fields: ``isl``/``osl`` →
        ``isl_mean``/``isl_sigma``/``isl_cap`` (tokens), ``spec`` → ``specs``, ``prices`` as
        written; keys not given are left out."""
        fields: dict = {}
        for name in (
            "model",
            "samples",
            "engine",
            "draft_model",
            "current",
            "measured_tok_s",
            "tp",
            "pp",
            "dp",
            "ep",
            "max_running",
        ):
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        if self.gpus:
            fields["gpus"] = tuple(self.gpus)
        if self.prices:
            fields["prices"] = dict(self.prices)  # as written: api.job_request.prices_by_key resolves the names
        if self.spec:
            fields["specs"] = (self.spec,) if isinstance(self.spec, str) else tuple(self.spec)
        for prefix, lengths in (("isl", self.isl), ("osl", self.osl)):
            if lengths is not None:
                fields[f"{prefix}_mean"], fields[f"{prefix}_sigma"], fields[f"{prefix}_cap"] = (
                    lengths.mean,
                    lengths.sigma,
                    lengths.cap,
                )
        return fields


def read_job_file(path: str) -> JobFile:
    """Parse a job YAML. Raises ConfigError naming the file and key."""
    p = Path(path)
    if not p.is_file():
        raise InputError("job file", path, "an existing YAML file")
    if p.stat().st_size > MAX_JOB_FILE_BYTES:
        raise ConfigError(path, "<root>", f"larger than {MAX_JOB_FILE_BYTES:,} bytes; a job file is a few keys")
    raw = load_yaml(p)  # ConfigError: not UTF-8, not YAML, a key twice, too deep, alias bomb
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(path, "<root>", "expected a mapping of job keys")
    if not raw:  # an empty file (or ``{}``) planned the defaults, as if --job were not given: a slip
        raise ConfigError(path, "<root>", f"no job keys (allowed: {', '.join(JobFile.model_fields)})")
    # a key written with no value (``model:``, ``gpus: []``) is a slip, not the default: leaving the
    # key out asks for that (a new-user pass saw `model: null` plan the default model)
    for key, value in raw.items():
        if not isinstance(key, str):  # ``1: 2`` read "1: 1 is not allowed (allowed: Keys should be strings)"
            raise ConfigError(path, str(key), f"unknown key (allowed: {', '.join(JobFile.model_fields)})")
        if value is None or value == [] or value == {}:
            shown_value = "null" if value is None else json.dumps(value)
            raise ConfigError(path, str(key), f"{shown_value} is not allowed (allowed: a value, or leave the key out)")
    try:
        job = JobFile.model_validate(raw)
    except ValidationError as exc:
        raise _first_error(path, exc, JobFile) from None
    _check_values(job, path)
    return job


def _check_values(job: JobFile, path: str) -> None:
    """The checks ``plan`` makes of the lengths and ``current:``, now, so that a bad value names
    the file (ConfigError: ``j.yaml: isl: isl-cap 100 is not allowed …``)."""
    from tokenplan.job.workload import DEFAULT_ISL, DEFAULT_OSL, check_stated_lengths
    from tokenplan.planning.current import parse_current

    for name, lengths, default in (("isl", job.isl, DEFAULT_ISL), ("osl", job.osl, DEFAULT_OSL)):
        try:
            if lengths is not None:
                # a cap the file states is the file's, even where it equals the default
                check_stated_lengths(name, lengths.mean, lengths.sigma, lengths.cap, default, cap_stated=True)
        except InputError as exc:
            # the key as the file spells it (osl.cap, not the --max-tokens the same check names)
            key = {name: f"{name}.mean", f"{name}-sigma": f"{name}.sigma"}.get(exc.field, f"{name}.cap")
            text = str(exc)
            raise ConfigError(
                path, key, text[len(exc.field) + 1 :] if text.startswith(exc.field + " ") else text
            ) from None
    try:
        if job.current is not None:
            parse_current(job.current)
    except InputError as exc:
        raise ConfigError(path, "current", str(exc)) from None
