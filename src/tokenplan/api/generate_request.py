"""What ``generate`` is asked (:class:`GenerateRequest`): the job and its run directory, and four
groups of options (:data:`GROUPS`: sampling, sending, export, Ray), each validated once with the
bounds of :data:`RANGES`. :meth:`GenerateRequest.build` takes the CLI's flat option names and
puts each in its group; a bad value is one :class:`~tokenplan.errors.InputError` naming the option.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tokenplan.client.auth import url_problem
from tokenplan.client.openai import public_url
from tokenplan.errors import InputError, allowed_from_validation
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
    """A field's bound of :data:`RANGES` (refuses nan too); None passes."""

    def check(value: Any) -> Any:
        low, high = RANGES[name]
        if value is not None and not low <= value <= high:
            raise ValueError(f"a number from {low:,} to {high:,}")
        return value

    return AfterValidator(check)


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SamplingOptions(_Options):
    """What every request samples with. None: from the plan, the model's ``generation_config.json``
    or the fallback (:mod:`tokenplan.runner.defaults`); ``seed`` None sends none (``--no-seed``)."""

    max_tokens: Annotated[int | None, _in_range("max_tokens")] = Field(default=None, ge=1)
    temperature: Annotated[float | None, _in_range("temperature")] = Field(default=None, ge=0.0)
    top_p: Annotated[float | None, _in_range("top_p")] = Field(default=None, gt=0.0, le=1.0)
    top_k: Annotated[int | None, _in_range("top_k")] = Field(default=None, ge=1)
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


class SendingOptions(_Options):
    """How requests are sent: in flight per endpoint (None: the plan's, else the default), streaming,
    retries and deadlines (seconds), the answer cap (bytes) and when an endpoint is taken out."""

    concurrency: Annotated[int | None, _in_range("concurrency")] = Field(default=None, ge=1, le=100_000)
    stream: bool = False
    max_attempts: Annotated[int, _in_range("max_attempts")] = Field(default=6, ge=1)
    retry_base_delay_s: Annotated[float, _in_range("retry_base_delay_s")] = Field(default=1.0, ge=0)
    deadline_s: Annotated[float | None, _in_range("deadline_s")] = Field(default=None, gt=0)
    grace_s: Annotated[float, _in_range("grace_s")] = Field(default=30.0, ge=0)
    max_answer_bytes: int | None = Field(default=None, ge=1024)
    eject_after_failures: int = Field(default=5, ge=1)
    probe_interval_s: float = Field(default=5.0, gt=0)
    max_all_down_s: float = Field(default=600.0, gt=0)


class ExportOptions(_Options):
    """``--export``: the file (None: no export), its format (None: from the suffix) and which
    records to leave out (a length-cut turn; thinking cut before ``</think>``)."""

    path: Path | None = None
    format: Literal["parquet", "jsonl", "openai-batch"] | None = None
    drop_length: bool = False
    require_think_close: bool = False


class RayOptions(_Options):
    """``--backend ray``: an actor pool on a Ray cluster (:mod:`tokenplan.runner.ray.backend`);
    ``ray_address`` None joins or starts one (``ray.init``); ``actors`` client processes."""

    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    actors: int = Field(default=2, ge=1, le=10_000)


GROUPS: dict[str, type[_Options]] = {
    "sampling": SamplingOptions,
    "sending": SendingOptions,
    "export": ExportOptions,
    "ray": RayOptions,
}
# The flat option names (the CLI's, and build()'s keywords) of the group fields named otherwise.
FLAT_NAMES = {("export", "path"): "export", ("export", "format"): "export_format"}
_GROUP_OF = {
    FLAT_NAMES.get((group, name), name): (group, name) for group, model in GROUPS.items() for name in model.model_fields
}


class GenerateRequest(_Options):
    """Everything ``generate`` needs, validated once (see :meth:`build`): the job and the run
    directory here, the rest in four groups (:data:`GROUPS`)."""

    inputs: list[str] = Field(min_length=1)
    out_dir: Path
    endpoints: list[str] = Field(min_length=1, repr=False)  # may hold user:password@ or ?key=: not in a repr
    model: str = Field(min_length=1)
    mode: Literal["regenerate", "complete"] = "regenerate"
    on_length: Literal["keep", "drop", "retry"] = "keep"
    length_retries: Annotated[int, _in_range("length_retries")] = Field(default=2, ge=0)
    n: Annotated[int, _in_range("n")] = Field(default=1, ge=1)
    plan: Path | None = None
    limit: int | None = Field(default=None, ge=1)  # only the first N usable rows (a trial run)
    progress_every_s: float | None = Field(default=None, gt=0)  # rolling summary.json every S seconds
    dry_run: bool = False  # count rows, turns (and prompt tokens) and send nothing: see runner.dryrun
    tokenizer: Path | None = None  # for --dry-run's prompt tokens; None: --model when it is a local directory
    force: bool = False
    retry_skipped: bool = False  # send the units of skipped.jsonl again (runner.store.rundir.set_aside_skipped)
    api_key_env: str | None = None  # None: $OPENAI_API_KEY if set; a named variable must be set
    shard_max_bytes: int = Field(default=256 * 2**20, ge=1)
    sampling: SamplingOptions = SamplingOptions()
    sending: SendingOptions = SendingOptions()
    export: ExportOptions = ExportOptions()
    ray: RayOptions = RayOptions()

    @field_validator("endpoints")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            problem = url_problem(url)
            if problem:
                raise ValueError(f"http(s) base URLs such as http://127.0.0.1:8000/v1; {public_url(url)!r}: {problem}")
        return urls

    @classmethod
    def build(cls, **options: Any) -> GenerateRequest:
        """Validate ``options``, named as the CLI's options are (``temperature``, ``export``,
        ``export_format``…); each goes to its group.

        Raises:
            InputError: naming the first bad option, its value and what is allowed.
        """
        fields: dict[str, Any] = {}
        for key, value in options.items():
            group, name = _GROUP_OF.get(key, (None, key))
            if group is None:
                fields[key] = value
            else:
                fields.setdefault(group, {})[name] = value
        try:
            return cls(**fields)
        except ValidationError as problem:
            raise _input_error(problem.errors()[0]) from None


def _input_error(error: Any) -> InputError:
    """The one-line error of pydantic's first ``error``, named by the flat option name."""
    loc = error["loc"]
    if loc and loc[0] in GROUPS:  # ("sampling",): the group's one model-level check, on extra_body
        field_name = FLAT_NAMES.get((loc[0], loc[1]), str(loc[1])) if len(loc) > 1 else "extra_body"
    else:
        field_name = ".".join(str(p) for p in loc)
    field_name = {"export_format": "format"}.get(field_name, field_name)  # the CLI's --format
    value = error.get("input")
    if field_name == "endpoints" or field_name.startswith("endpoints."):
        value = [public_url(u) for u in value] if isinstance(value, list) else public_url(str(value))
    elif isinstance(value, dict) and "extra_body" in value:
        value = value["extra_body"]
        value = value if len(repr(value)) <= 200 else repr(value)[:200] + "…"  # e.g. nested 300 deep
    return InputError(field_name, value, allowed_from_validation(error))
