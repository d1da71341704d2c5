"""The launch columns of our copy of ``serving-dev.csv`` (its last four): ``memory_fraction``,
``chunked_prefill_size``, ``disable_radix_cache`` and ``ssm_dtype``, as the InferenceX script of each
pinned SGLang run set ``--mem-fraction-static``, ``--chunked-prefill-size``,
``--disable-radix-cache`` and ``--mamba-ssm-dtype`` (groups and commits in the data README).
Each case quotes the script line (SemiAnalysisAI/InferenceX at the commit named). A malformed
cell skips its row naming the column: ``test_serving_run_columns.py``.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.gap_twins import serving_rows, twins

from tokenplan.api.resolve import measurement_request
from tokenplan.files.measurements import read_measurements

SERVING = Path(__file__).parents[3] / "data" / "ground-truth" / "serving-dev.csv"
LAUNCH = ("memory_fraction", "chunked_prefill_size", "disable_radix_cache", "ssm_dtype")


def _rows() -> dict:
    return {m.row_id: m for m in read_measurements(str(SERVING)).rows}


def _launch(m) -> tuple:
    return (m.memory_fraction, m.chunked_prefill_size, m.disable_radix_cache, m.ssm_dtype)


def test_the_qwen35_mtp_run_at_256_reads_its_scripts_flags():
    # benchmarks/single_node/qwen3.5_fp8_b200_mtp.sh @ 35d4bb36: "MEM_FRAC_STATIC=0.8",
    # "CHUNKED_PREFILL_SIZE=32768", "--quantization fp8 --kv-cache-dtype fp8_e4m3 --mamba-ssm-dtype
    # bfloat16", "--context-length $CONTEXT_LENGTH --disable-radix-cache"
    row = _rows()["2026_04_06_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c256_tp4_ep1_1957"]
    assert _launch(row) == (0.8, 32768, True, "bfloat16")
    req = measurement_request(row)
    assert (req.memory_fraction, req.chunked_prefill_size, req.disable_radix_cache, req.ssm_dtype) == (
        0.8,
        32768,
        True,
        "bfloat16",
    )


def test_each_pinned_group_reads_its_scripts_flags():
    rows = [m for m in _rows().values() if m.engine == "sglang"]

    def group(model: str, gpu: str, dtype: str, spec: str | None = None, cap: int | None = None) -> set:
        got = {
            _launch(m)
            for m in rows
            if m.model == model
            and m.gpu == gpu
            and m.weight_dtype == dtype
            and (spec is None or m.spec.startswith(spec))
            and (cap is None or m.max_running == cap)
            and m.max_running is not None
        }
        assert got, (model, gpu, dtype, spec, cap)
        return got

    # qwen3.5_bf16_b200.sh @ 9dc87a68: "MEM_FRAC_STATIC=0.82", "CHUNKED_PREFILL_SIZE=32768",
    # "--disable-radix-cache", no --mamba-ssm-dtype (the config's float32)
    assert group("qwen3.5-397b-a17b", "b200", "bf16") == {(0.82, 32768, True, None)}
    # qwen3.5_fp8_b200.sh @ 6a5dad46: "MEM_FRAC_STATIC=0.82", "--mamba-ssm-dtype bfloat16"
    assert group("qwen3.5-397b-a17b", "b200", "fp8", "none") == {(0.82, 32768, True, "bfloat16")}
    # qwen3.5_fp4_b200.sh @ 48d35c48: "MEM_FRAC_STATIC=0.85"
    assert group("qwen3.5-397b-a17b", "b200", "nvfp4") == {(0.85, 32768, True, "bfloat16")}
    # qwen3.5_fp8_h200.sh @ f65d6b4b: "--chunked-prefill-size 16384", "--mem-fraction-static 0.8"
    assert group("qwen3.5-397b-a17b", "h200", "fp8") == {(0.8, 16384, True, "bfloat16")}
    # dsr1_fp8_b200.sh @ 12ba0ae0, TP 8 branch: "MEM_FRAC_STATIC=0.82", "CHUNKED_PREFILL_SIZE=32768"
    # (MAX_RUNNING_REQUESTS=128); TP 4 branch: "MEM_FRAC_STATIC=0.95", "CHUNKED_PREFILL_SIZE=8192" (32)
    assert group("deepseek-r1", "b200", "fp8", "none", 128) == {(0.82, 32768, True, None)}
    assert group("deepseek-r1", "b200", "fp8", "none", 32) == {(0.95, 8192, True, None)}
    # dsr1_fp8_b200_mtp.sh @ 12ba0ae0: "MEM_FRAC_STATIC=0.82", "CHUNKED_PREFILL_SIZE=16384"
    assert group("deepseek-r1", "b200", "fp8", "mtp") == {(0.82, 16384, True, None)}
    # dsr1_fp4_b200.sh @ 12ba0ae0: "--mem-fraction-static 0.85", "--chunked-prefill-size 16384"
    assert group("deepseek-r1", "b200", "nvfp4") == {(0.85, 16384, True, None)}
    # glm5_nvfp4_b200.sh @ d43805fc: "--mem-fraction-static 0.80", "--chunked-prefill-size 131072",
    # and no --disable-radix-cache
    assert group("glm-5", "b200", "nvfp4") == {(0.8, 131072, False, None)}


def test_rows_whose_launch_is_not_known_keep_the_engine_defaults():
    rows = _rows().values()
    # aiconfigurator's gap-analysis rows (no public launcher) and the non-SGLang rows: blank
    # (the 58 copies of an InferenceX run among them carry its launch: tests/support/gap_twins.py)
    copies = twins(serving_rows())
    unknown = [m for m in rows if ("gap" in m.row_id and m.row_id not in copies) or m.engine != "sglang"]
    assert unknown and all(_launch(m) == (None, None, None, None) for m in unknown)
    # glm5_fp8_h200.sh @ ebb48d4b: "--mem-fraction-static 0.85" and nothing else of the four
    glm = [m for m in rows if m.engine == "sglang" and m.model == "glm-5" and m.gpu == "h200"]
    assert glm and {_launch(m) for m in glm} == {(0.85, None, False, None)}
