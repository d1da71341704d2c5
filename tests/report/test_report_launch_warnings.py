"""The HTML report's launch section carries the plan's warnings on the chosen configuration, as
the terminal prints them under the launch (a break-it pass: a --max-model-len that refuses
longer requests was shown without its warning)."""

from __future__ import annotations

from html import escape

from tokenplan.api.plan import PlanRequest, plan
from tokenplan.report.html import _launch_html
from tokenplan.report.tables import recommended_choice


def test_the_launch_section_lists_the_chosen_configurations_warnings():
    result = plan(PlanRequest(gpus=("8xb200",)))
    choice = recommended_choice(result)
    assert choice is not None
    _, best = choice
    assert best.warnings  # the default plan warns that TensorRT-LLM's launch caps the batch lower
    page = _launch_html(result)
    assert all(f"<li>{escape(w)}</li>" in page for w in best.warnings)
