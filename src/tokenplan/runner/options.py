"""What a ``generate`` run is asked, in typed parts (:class:`RunOptions`): the servers, the job, the
run directory, and how requests are sampled, sent, exported and spread over Ray, each part
validated once with the bounds of :data:`RANGES`. The api's request extends it
(:class:`tokenplan.api.generate.GenerateRequest`); :mod:`tokenplan.runner.prepare` checks it and assembles the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from tokenplan.client.auth import url_problem
from tokenplan.client.openai import public_url
from tokenplan.runner.defaults import SAMPLING_RANGES
from tokenplan.runner.limits import MAX_CONCURRENCY
from tokenplan.runner.requests import extra_body_problem
from tokenplan.units import MAX_REQUEST_TOKENS

# Bounds beyond the fields' own constraints, so that no value makes the run overflow, hang or send
# something meaningless (issue 11): each is far past any real job, and finite.
RANGES: dict[str, tuple[float, float]] = {
    "concurrency": (1, MAX_CONCURRENCY),
    "max_tokens": (1, MAX_REQUEST_TOKENS),  # 16.8M tokens: above any model's context; keeps deadlines and caps finite
    **SAMPLING_RANGES,  # temperature, top_p, top_k: the bounds a generation_config.json is held to as well
    "seed": (0, 2**63 - 1),  # a 64-bit integer, as records store it and engines take it
    "n": (1, 10_000),  # units per row; --n 1e8 built 1e8 units per row before the first was sent
    "length_retries": (0, 100),
    "max_attempts": (1, 1000),
    "retry_base_delay_s": (0.0, 3600.0),
    "deadline_s": (0.0, 7 * 86400.0),
    "grace_s": (0.0, 86400.0),
}


def _in_range(name: str) -> AfterValidator:
    """A field's bounds of :data:`RANGES`, both said in one message (refuses nan too); None passes.
    A field checked here has no ``ge``/``le`` of its own, which would say only the one it breaks."""

    def check(value: Any) -> Any:
        low, high = RANGES[name]
        if value is not None and not low <= value <= high:
            raise ValueError(f"a number from {_bound(low)} to {_bound(high)}")
        return value

    return AfterValidator(check)


def _probability(value: Any) -> Any:
    """``top_p``: above 0 and at most 1, both said in one message (pydantic's ``gt``/``le`` each
    said only the bound broken: "≤ 1" for 2, "> 0" for -1; a new-user pass); refuses nan."""
    if value is not None and not 0.0 < value <= 1.0:
        raise ValueError("a number above 0 and at most 1")
    return value


def _bound(x: float) -> str:
    """``16,777,216`` for a whole number, ``0.5`` otherwise (not ``0.0`` or ``1.67772e+07``)."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


class Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ServerOptions(Options):
    """The servers: their base URLs, the model they serve and the variable holding the API key
    (None: ``$OPENAI_API_KEY`` if set; a named variable must be set)."""

    endpoints: list[str] = Field(min_length=1, repr=False)  # may hold user:password@ or ?key=: not in a repr
    model: str = Field(min_length=1)
    api_key_env: str | None = None

    @field_validator("endpoints")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            problem = url_problem(url)
            if problem:
                raise ValueError(f"http(s) base URLs such as http://127.0.0.1:8000/v1; {public_url(url)!r}: {problem}")
        seen: set[str] = set()
        for url in urls:  # the same server twice would get twice the requests in flight
            key = url.strip().rstrip("/").lower()
            if key in seen:
                raise ValueError(f"each server once ({public_url(url)!r} is given twice)")
            seen.add(key)
        return urls


class JobOptions(Options):
    """The input files and what each row becomes: the mode, samples per row, the ``length`` finish
    policy and, for a trial run, only the first ``limit`` usable rows."""

    inputs: list[str] = Field(min_length=1)
    mode: Literal["regenerate", "complete"] = "regenerate"
    on_length: Literal["keep", "drop", "retry"] = "keep"
    length_retries: Annotated[int, _in_range("length_retries")] = Field(default=2)
    n: Annotated[int, _in_range("n")] = Field(default=1)
    limit: int | None = Field(default=None, ge=1)


class RunDirOptions(Options):
    """The run directory: ``force`` rebinds one made for another job, ``retry_skipped`` sends the
    units of ``skipped.jsonl`` again (:func:`tokenplan.runner.store.rundir.set_aside_skipped`), a
    rolling ``summary.json`` every ``progress_every_s`` seconds, shards of ``shard_max_bytes``."""

    out_dir: Path
    force: bool = False
    retry_skipped: bool = False
    progress_every_s: float | None = Field(default=None, gt=0)
    shard_max_bytes: int = Field(default=256 * 2**20, ge=1)


class SamplingOptions(Options):
    """What every request samples with. None: from the plan, the model's ``generation_config.json``
    or the fallback (:mod:`tokenplan.runner.defaults`); ``seed`` None sends none (``--no-seed``)."""

    max_tokens: Annotated[int | None, _in_range("max_tokens")] = Field(default=None)
    temperature: Annotated[float | None, _in_range("temperature")] = Field(default=None)
    top_p: Annotated[float | None, AfterValidator(_probability)] = Field(default=None)
    top_k: Annotated[int | None, _in_range("top_k")] = Field(default=None)
    seed: Annotated[int | None, _in_range("seed")] = 0
    thinking: Literal["on", "off"] | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)
    extra_body_override: bool = False  # let extra_body replace the fields tokenplan sets (said so by the user)
    generation_config: Path | None = None  # a generation_config.json (or its model directory)

    @model_validator(mode="after")
    def _extra_body(self) -> SamplingOptions:
        problem = extra_body_problem(self.extra_body, self.extra_body_override)
        if problem is not None:
            raise ValueError(problem)
        return self


class SendingOptions(Options):
    """How requests are sent: in flight per endpoint (None: the plan's, else the default), streaming,
    retries and deadlines (seconds), the answer cap (bytes) and when an endpoint is taken out."""

    concurrency: Annotated[int | None, _in_range("concurrency")] = Field(default=None)
    stream: bool = False
    max_attempts: Annotated[int, _in_range("max_attempts")] = Field(default=6)
    retry_base_delay_s: Annotated[float, _in_range("retry_base_delay_s")] = Field(default=1.0)
    deadline_s: Annotated[float | None, _in_range("deadline_s")] = Field(default=None, gt=0)
    grace_s: Annotated[float, _in_range("grace_s")] = Field(default=30.0)
    max_answer_bytes: int | None = Field(default=None, ge=1024)
    eject_after_failures: int = Field(default=5, ge=1)
    probe_interval_s: float = Field(default=5.0, gt=0)
    max_all_down_s: float = Field(default=600.0, gt=0)
    stall_probe_after_s: float = Field(default=120.0, gt=0)  # client.stall: quiet this long, probed


class ExportOptions(Options):
    """``--export``: the file (None: no export), its format (None: from the suffix) and which
    records to leave out (a length-cut turn; thinking cut before ``</think>``)."""

    path: Path | None = None
    format: Literal["parquet", "jsonl", "openai-batch"] | None = None
    drop_length: bool = False
    require_think_close: bool = False


class RayOptions(Options):
    """``--backend ray``: an actor pool on a Ray cluster (:mod:`tokenplan.runner.ray.backend`);
    ``ray_address`` None joins or starts one (``ray.init``); ``actors`` client processes."""

    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    actors: int = Field(default=2, ge=1, le=10_000)


class RunOptions(Options):
    """Everything a run is asked, in its parts (the order in which a bad value is reported)."""

    server: ServerOptions
    job: JobOptions
    run_dir: RunDirOptions
    sampling: SamplingOptions = SamplingOptions()
    sending: SendingOptions = SendingOptions()
    export: ExportOptions = ExportOptions()
    ray: RayOptions = RayOptions()
