"""Load ``length_sets.yaml``: the length shapes of public prompt sets that benchmarks send.

A measurement row that names its prompt set (``--dataset-name sharegpt`` in its notes) keeps its
own mean lengths; the set gives the lognormal shape σ and the cap of the prompt and output
lengths around them (the file cites and derives each figure). Schema of one entry:

.. code-block:: yaml

    sharegpt:
      description: "..."
      filter: "..."        # the benchmark client's length filter, where it has one
      source: "..."
      input: {sigma: 1.586, cap_tokens: 1024}
      output: {sigma: 0.661, cap_tokens: 2044}
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError

from tokenplan.errors import ConfigError

# Same bound as ``tokenplan.job.workload.MAX_SIGMA`` (the catalog may not import the job layer's
# physics for validation; a σ above 5 spans five orders of magnitude between p1 and p99).
_MAX_SIGMA = 5.0


class LengthShape(BaseModel):
    """The shape of one side's lengths.

    Attributes:
        sigma: lognormal shape (dimensionless; 0 = every length at the mean).
        cap_tokens: the longest length the set holds (tokens); None = no cap.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    sigma: float = Field(ge=0.0, le=_MAX_SIGMA)
    cap_tokens: PositiveFloat | None = None


class LengthSet(BaseModel):
    """A prompt set's length shapes with their source."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    description: str
    filter: str = ""
    source: str
    input: LengthShape
    output: LengthShape


@lru_cache(maxsize=1)
def _length_sets() -> dict[str, LengthSet]:
    path = resources.files("tokenplan.catalog") / "length_sets.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    try:
        return {key: LengthSet.model_validate(entry) for key, entry in raw.items()}
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError("catalog/length_sets.yaml", ".".join(map(str, err["loc"])), err["msg"]) from None


def length_set_names() -> list[str]:
    """Names of the prompt sets whose length shape is known, sorted."""
    return sorted(_length_sets())


def length_set(name: str) -> LengthSet | None:
    """The length shapes of prompt set ``name`` (any case), or None when the catalog has none
    for it (a measurement row naming it is then skipped with the known names:
    ``api.resolve.resolve_case``)."""
    return _length_sets().get(name.strip().lower())
