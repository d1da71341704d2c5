"""A row whose source names only the GPU family ("NVIDIA H100 GPUs") is flagged and its interval
spans the family's variants: never scored as if the SXM guess were known (issue 28, point 6)."""

from __future__ import annotations

import pytest

from tokenplan.api.validate import validate
from tokenplan.catalog.listing import family_variants

HEADER = (
    "id,engine,model,gpu,num_gpus,tp,ep,pp,dp,attention_dp,weight_dtype,kv_dtype,isl,osl,concurrency,"
    "num_requests,spec_decode,output_tok_s_per_gpu,derived,trust,source_url,gpu_variant_stated\n"
)
ROW = "{id},vllm,llama-3.1-8b,{gpu},1,1,1,1,1,false,bf16,bf16,1024,1024,64,,none,3000,,medium,x,{stated}\n"


def test_the_h100_family_has_the_pcie_and_nvl_parts_beside_sxm():
    assert family_variants("h100-sxm") == ["h100-nvl", "h100-pcie"]
    assert family_variants("b200") == []  # a key without a variant suffix names one part


def test_an_unstated_variant_is_flagged_and_its_interval_spans_the_family(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(
        HEADER
        + ROW.format(id="stated", gpu="h100-sxm", stated="true")
        + ROW.format(id="guess", gpu="h100-sxm", stated="false")
        + ROW.format(id="pcie", gpu="h100-pcie", stated="true")
    )
    rows = {r["id"]: r for r in validate(str(path)).to_json()["rows"]}
    stated, guess, pcie = rows["stated"], rows["guess"], rows["pcie"]
    assert stated["gpu_variant_stated"] is True and guess["gpu_variant_stated"] is False
    # the same prediction (the guess is SXM) ...
    assert guess["predicted_output_tok_s_per_gpu"] == pytest.approx(stated["predicted_output_tok_s_per_gpu"])
    # ... but the interval reaches down to where the PCIe part's own interval starts: H100 PCIe
    # streams 2.0 TB/s against SXM's 3.35 (gpus.yaml), so its decode is slower
    assert pcie["predicted_output_tok_s_per_gpu"] < stated["predicted_output_tok_s_per_gpu"]
    assert guess["output_tok_s_per_gpu_low"] < stated["output_tok_s_per_gpu_low"]
    assert guess["output_tok_s_per_gpu_low"] <= pcie["output_tok_s_per_gpu_low"] * 1.001
    assert guess["output_tok_s_per_gpu_high"] >= stated["output_tok_s_per_gpu_high"]
