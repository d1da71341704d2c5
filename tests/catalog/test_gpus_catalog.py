"""The GPU catalog (tokenplan/catalog/gpus.yaml): schema, coverage, sources, sanity and hand-derived figures."""

from __future__ import annotations

import importlib.resources

import pytest
import yaml

from tokenplan.catalog.gpus import GpuEntry
from tokenplan.hardware import Gpu, LinkKind
from tokenplan.units import GB, TB, Dtype, GiB, MiB

REQUIRED_KEYS = {
    "rtx-pro-6000",
    "rtx-5090",
    "l40s",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h100-nvl",
    "h200",
    "h20",
    "b200",
    "b300",
    "gb200",
    "gb300",
    "mi300x",
    "mi325x",
    "mi355x",
}

TFLOPS = 1e12


def _raw() -> dict:
    text = (importlib.resources.files("tokenplan.catalog") / "gpus.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


RAW = _raw()
ENTRIES = {key: GpuEntry.model_validate(value) for key, value in RAW.items()}
GPUS = {key: entry.to_gpu(key) for key, entry in ENTRIES.items()}


# --- schema and coverage -------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(RAW))
def test_every_entry_validates_and_converts(key: str) -> None:
    entry = GpuEntry.model_validate(RAW[key])
    gpu = entry.to_gpu(key)
    assert isinstance(gpu, Gpu)
    assert gpu.key == key


def test_every_required_key_present() -> None:
    missing = REQUIRED_KEYS - set(RAW)
    assert not missing, f"missing GPU entries: {sorted(missing)}"


def test_keys_are_lowercase_slugs() -> None:
    for key in RAW:
        assert key == key.lower() and " " not in key


@pytest.mark.parametrize("key", sorted(RAW))
def test_every_source_is_non_empty(key: str) -> None:
    entry = ENTRIES[key]
    groups = [entry.memory, entry.bandwidth, entry.compute, entry.native_dtypes, entry.scaleup, entry.host_link]
    if entry.price is not None:
        groups.append(entry.price)
    for group in groups:
        assert group.source.strip(), f"{key}: empty source in {type(group).__name__}"
        assert len(group.source.strip()) >= 10, f"{key}: source too short: {group.source!r}"


# --- sanity ranges -------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(RAW))
def test_memory_in_range(key: str) -> None:
    assert 16 * GB <= GPUS[key].memory_bytes <= 400 * GB


@pytest.mark.parametrize("key", sorted(RAW))
def test_bandwidth_in_range(key: str) -> None:
    assert 0.5 * TB <= GPUS[key].hbm_bytes_per_s <= 10 * TB


@pytest.mark.parametrize("key", sorted(RAW))
def test_bf16_dense_in_range(key: str) -> None:
    flops = GPUS[key].dense_flops_per_s
    assert "bf16" in flops, f"{key}: every GPU has a bf16 class"
    assert 100 * TFLOPS <= flops["bf16"] <= 3000 * TFLOPS


@pytest.mark.parametrize("key", sorted(RAW))
def test_fp8_is_twice_bf16(key: str) -> None:
    flops = GPUS[key].dense_flops_per_s
    if "fp8" in flops:
        assert flops["fp8"] == pytest.approx(2 * flops["bf16"], rel=0.10)


@pytest.mark.parametrize("key", sorted(RAW))
def test_fp4_at_least_fp8(key: str) -> None:
    flops = GPUS[key].dense_flops_per_s
    if "fp4" in flops:
        assert "fp8" in flops
        assert flops["fp4"] >= flops["fp8"]


@pytest.mark.parametrize("key", sorted(RAW))
def test_links_are_plausible(key: str) -> None:
    gpu = GPUS[key]
    for link in (gpu.scaleup, gpu.host_link):
        assert 1e10 <= link.bytes_per_s <= 2e12
        assert 1e-7 <= link.latency_s <= 1e-3
    assert gpu.max_gpus_per_scaleup in (2, 8, 72)


# --- dtypes --------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(RAW))
def test_no_weight_only_format_listed_as_native(key: str) -> None:
    assert Dtype.W4A16 not in GPUS[key].native_dtypes


@pytest.mark.parametrize("key", sorted(RAW))
def test_native_dtypes_agree_with_flops_classes(key: str) -> None:
    gpu = GPUS[key]
    for dtype in gpu.native_dtypes:
        assert dtype.flops_class in gpu.dense_flops_per_s, f"{key}: {dtype} native but no {dtype.flops_class} rate"
    # A flops class without any native dtype in it would be unreachable.
    for cls in gpu.dense_flops_per_s:
        assert any(d.flops_class == cls for d in gpu.native_dtypes), f"{key}: {cls} rate but no native dtype"


def test_nvfp4_only_on_nvidia_blackwell() -> None:
    for key, gpu in GPUS.items():
        blackwell = gpu.architecture in ("blackwell", "blackwell-ultra", "blackwell-gb202")
        assert (Dtype.NVFP4 in gpu.native_dtypes) == blackwell, key
        if not blackwell:
            assert "fp4" not in gpu.dense_flops_per_s or key == "mi355x", key


def test_chips_without_fp4_lack_fp4_rate_and_mx_formats() -> None:
    for key in ("a100-80gb", "l40s", "h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20", "mi300x", "mi325x"):
        gpu = GPUS[key]
        assert "fp4" not in gpu.dense_flops_per_s, key
        assert not {Dtype.NVFP4, Dtype.MXFP4, Dtype.MXFP8} & gpu.native_dtypes, key


def test_a100_has_no_fp8() -> None:
    gpu = GPUS["a100-80gb"]
    assert set(gpu.dense_flops_per_s) == {"bf16"}
    # INT8 is left out on purpose: its rate class is fp8, which A100 lacks (see the YAML source).
    assert gpu.native_dtypes == frozenset({Dtype.BF16, Dtype.FP16})
    assert not gpu.runs_natively(Dtype.FP8)
    # FP8 and INT8 weights on A100 run weight-only at the BF16 rate.
    assert gpu.flops_per_s(Dtype.FP8) == gpu.dense_flops_per_s["bf16"]
    assert gpu.flops_per_s(Dtype.INT8) == gpu.dense_flops_per_s["bf16"]


@pytest.mark.parametrize("key", sorted(RAW))
def test_flops_per_s_defined_for_every_dtype(key: str) -> None:
    gpu = GPUS[key]
    for dtype in Dtype:
        assert gpu.flops_per_s(dtype) > 0


def test_ada_has_fp8_but_no_fp4() -> None:
    gpu = GPUS["l40s"]
    assert set(gpu.dense_flops_per_s) == {"bf16", "fp8"}
    assert Dtype.FP8 in gpu.native_dtypes


def test_mi355x_has_mx_but_not_nvfp4() -> None:
    gpu = GPUS["mi355x"]
    assert {Dtype.MXFP4, Dtype.MXFP8} <= gpu.native_dtypes
    assert Dtype.NVFP4 not in gpu.native_dtypes
    assert "fp4" in gpu.dense_flops_per_s


def test_blackwell_ultra_drops_int8() -> None:
    for key in ("b300", "gb300"):
        assert Dtype.INT8 not in GPUS[key].native_dtypes
    for key in ("b200", "gb200", "rtx-pro-6000", "rtx-5090"):
        assert Dtype.INT8 in GPUS[key].native_dtypes


# --- architecture, topology ----------------------------------------------------------------------


def test_architectures_and_compute_capabilities() -> None:
    expected = {
        "rtx-pro-6000": ("blackwell-gb202", "12.0"),
        "rtx-5090": ("blackwell-gb202", "12.0"),
        "l40s": ("ada", "8.9"),
        "a100-80gb": ("ampere", "8.0"),
        "h100-sxm": ("hopper", "9.0"),
        "h100-pcie": ("hopper", "9.0"),
        "h100-nvl": ("hopper", "9.0"),
        "h200": ("hopper", "9.0"),
        "h20": ("hopper", "9.0"),
        "b200": ("blackwell", "10.0"),
        "gb200": ("blackwell", "10.0"),
        "b300": ("blackwell-ultra", "10.3"),
        "gb300": ("blackwell-ultra", "10.3"),
        "mi300x": ("cdna3", "gfx942"),
        "mi325x": ("cdna3", "gfx942"),
        "mi355x": ("cdna4", "gfx950"),
    }
    for key, (arch, cc) in expected.items():
        assert (GPUS[key].architecture, GPUS[key].compute_capability) == (arch, cc), key


def test_scaleup_kinds() -> None:
    kinds = {key: gpu.scaleup.kind for key, gpu in GPUS.items()}
    for key in ("rtx-pro-6000", "rtx-5090", "l40s", "h100-pcie"):
        assert kinds[key] is LinkKind.PCIE, key
    for key in ("a100-80gb", "h100-sxm", "h200", "h20", "b200", "b300", "gb200", "gb300"):
        assert kinds[key] is LinkKind.NVSWITCH, key
    for key in ("mi300x", "mi325x", "mi355x"):
        assert kinds[key] is LinkKind.IF_MESH, key
    assert kinds["h100-nvl"] is LinkKind.NVLINK_BRIDGE
    assert GPUS["h100-nvl"].max_gpus_per_scaleup == 2
    assert GPUS["gb200"].max_gpus_per_scaleup == 72
    assert GPUS["gb300"].max_gpus_per_scaleup == 72
    assert GPUS["b200"].max_gpus_per_scaleup == 8


def test_grace_parts_use_nvlink_c2c_to_host() -> None:
    for key in ("gb200", "gb300"):
        link = GPUS[key].host_link
        assert link.kind is LinkKind.NVLINK_BRIDGE
        assert link.name == "NVLink-C2C"
        # NVLink-C2C 900 GB/s bidirectional / 2 = 450 GB/s = 4.5e11 B/s per direction.
        assert link.bytes_per_s == pytest.approx(900e9 / 2)


# --- hand-derived figures ------------------------------------------------------------------------


def test_b200_memory_from_nvidia_smi() -> None:
    # nvidia-smi: 183,359 MiB; 183,359 x 1,048,576 = 192,265,846,784 bytes (= 179.06 GiB = 192.3 GB).
    assert 183_359 * MiB == 192_265_846_784
    assert GPUS["b200"].memory_bytes == 192_265_846_784


def test_nvidia_smi_memory_figures() -> None:
    # MiB x 1,048,576, computed by hand:
    #   H100 SXM/PCIe 81,559 MiB  -> 85,520,809,984 B
    #   H200         143,771 MiB -> 150,754,820,096 B
    #   RTX PRO 6000  97,887 MiB -> 102,641,958,912 B
    #   A100 80GB     81,920 MiB -> 85,899,345,920 B (exactly 80 GiB)
    expected = {
        "h100-sxm": 85_520_809_984,
        "h100-pcie": 85_520_809_984,
        "h200": 150_754_820_096,
        "rtx-pro-6000": 102_641_958_912,
        "a100-80gb": 85_899_345_920,
    }
    for key, value in expected.items():
        assert GPUS[key].memory_bytes == value, key
    assert GPUS["a100-80gb"].memory_bytes == 80 * GiB


def test_mi300x_memory_is_192_gib() -> None:
    # 192 GiB = 192 x 1,073,741,824 = 206,158,430,208 bytes (8 HBM3 stacks x 24 GiB).
    assert GPUS["mi300x"].memory_bytes == 206_158_430_208 == 192 * GiB


def test_nvlink5_per_direction() -> None:
    # NVLink 5: 1.8 TB/s bidirectional per GPU / 2 = 9e11 B/s per direction.
    for key in ("b200", "b300", "gb200", "gb300"):
        assert GPUS[key].scaleup.bytes_per_s == pytest.approx(1.8e12 / 2), key


def test_nvlink4_and_3_per_direction() -> None:
    # NVLink 4: 900 GB/s bidirectional / 2 = 4.5e11; NVLink 3: 600 / 2 = 3.0e11; H100 NVL bridge 600 / 2.
    for key in ("h100-sxm", "h200", "h20"):
        assert GPUS[key].scaleup.bytes_per_s == pytest.approx(900e9 / 2), key
    assert GPUS["a100-80gb"].scaleup.bytes_per_s == pytest.approx(600e9 / 2)
    assert GPUS["h100-nvl"].scaleup.bytes_per_s == pytest.approx(600e9 / 2)


def test_infinity_fabric_mesh_sum() -> None:
    # MI300X/MI325X: 7 links x 128 GB/s bidirectional = 896 GB/s; per direction 7 x 64 = 448 GB/s.
    for key in ("mi300x", "mi325x"):
        assert GPUS[key].scaleup.bytes_per_s == pytest.approx(7 * 128e9 / 2), key
    # MI355X: 7 links x 153.6 GB/s bidirectional = 1,075.2 GB/s; per direction 537.6 GB/s.
    assert GPUS["mi355x"].scaleup.bytes_per_s == pytest.approx(7 * 153.6e9 / 2)


def test_pcie_per_direction() -> None:
    # Gen5 x16 = 128 GB/s bidirectional / 2 = 64 GB/s; Gen4 x16 = 64 / 2 = 32 GB/s.
    for key in ("rtx-pro-6000", "rtx-5090", "h100-pcie"):
        assert GPUS[key].scaleup.bytes_per_s == pytest.approx(64e9), key
    assert GPUS["l40s"].scaleup.bytes_per_s == pytest.approx(32e9)
    assert GPUS["l40s"].host_link.bytes_per_s == pytest.approx(32e9)
    assert GPUS["a100-80gb"].host_link.bytes_per_s == pytest.approx(32e9)
    assert GPUS["h100-sxm"].host_link.bytes_per_s == pytest.approx(64e9)


def test_dense_is_half_of_datasheet_sparse() -> None:
    # H100 SXM datasheet: BF16 1,979 TFLOPS with sparsity / 2 = 989.5 ~ 989.4 dense
    # (132 SMs x 1.83 GHz x 4,096 FLOP/clk/SM = 989.4 TFLOPS).
    assert GPUS["h100-sxm"].dense_flops_per_s["bf16"] == pytest.approx(132 * 1.83e9 * 4096, rel=1e-3)
    assert GPUS["h100-sxm"].dense_flops_per_s["bf16"] == pytest.approx(1979e12 / 2, rel=1e-3)
    # H100 NVL datasheet: BF16 1,671 and FP8 3,341 with sparsity -> 835.5 / 1,670.5 dense.
    assert GPUS["h100-nvl"].dense_flops_per_s["bf16"] == pytest.approx(1671e12 / 2)
    assert GPUS["h100-nvl"].dense_flops_per_s["fp8"] == pytest.approx(3341e12 / 2)
    # HGX B200: FP4 144 PF sparse per 8 GPUs -> 144 / 8 / 2 = 9 PF dense per GPU.
    assert GPUS["b200"].dense_flops_per_s["fp4"] == pytest.approx(144e15 / 8 / 2)
    # HGX B300: FP4 105 PF dense per 8 GPUs -> 13.125 PF per GPU (Blackwell Ultra FP4 sparsity is not 2x).
    assert GPUS["b300"].dense_flops_per_s["fp4"] == pytest.approx(105e15 / 8)
    # GB300 NVL72: 1,080 PF dense FP4 per 72 GPUs -> 15 PF per GPU.
    assert GPUS["gb300"].dense_flops_per_s["fp4"] == pytest.approx(1080e15 / 72)


def test_amd_compute_from_clock_and_cus() -> None:
    # MI300X: 304 CUs x 2.1 GHz x 4,096 FP8 FLOP/clk/CU = 2,614.9 TFLOPS.
    assert GPUS["mi300x"].dense_flops_per_s["fp8"] == pytest.approx(304 * 2.1e9 * 4096, rel=1e-4)
    # MI355X: 256 CUs x 2.4 GHz x 8,192 FP8 FLOP/clk/CU = 5,033.2 TFLOPS.
    assert GPUS["mi355x"].dense_flops_per_s["fp8"] == pytest.approx(256 * 2.4e9 * 8192, rel=1e-4)


def test_geforce_uses_fp32_accumulate_rate() -> None:
    # RTX 5090: 419 TFLOPS BF16 dense with FP16 accumulate; half (209.5) with FP32 accumulate.
    rtx = GPUS["rtx-5090"].dense_flops_per_s
    assert rtx["bf16"] == pytest.approx(419e12 / 2)
    # The pro card on the larger die is not halved: it is faster than the GeForce card per class.
    pro = GPUS["rtx-pro-6000"].dense_flops_per_s
    assert pro["bf16"] > 2 * rtx["bf16"]


def test_memory_relations() -> None:
    # Same die, more memory or bandwidth: H200 > H100; B300 > B200; GB300 > GB200; MI325X > MI300X.
    assert GPUS["h200"].memory_bytes > GPUS["h100-sxm"].memory_bytes
    assert GPUS["b300"].memory_bytes > GPUS["b200"].memory_bytes
    assert GPUS["gb300"].memory_bytes > GPUS["gb200"].memory_bytes
    assert GPUS["mi325x"].memory_bytes > GPUS["mi300x"].memory_bytes
    assert GPUS["h200"].dense_flops_per_s == GPUS["h100-sxm"].dense_flops_per_s


# --- prices --------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(RAW))
def test_price_ordering(key: str) -> None:
    price = GPUS[key].price
    if price is None:
        return
    assert price.low_usd_per_hour <= price.typical_usd_per_hour <= price.high_usd_per_hour
    assert 0.1 <= price.low_usd_per_hour and price.high_usd_per_hour <= 50
    assert len(price.as_of) == 7 and price.as_of[4] == "-", price.as_of


def test_prices_null_where_no_public_figure() -> None:
    for key in ("h20", "b300", "gb300", "mi355x"):
        assert GPUS[key].price is None, key
