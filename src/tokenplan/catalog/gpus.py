"""Load ``gpus.yaml``: the GPU catalog, every figure with its source.

The file is validated once by pydantic and turned into frozen :class:`~tokenplan.hardware.Gpu`
values. Schema of one entry (units in the key names, base SI):

.. code-block:: yaml

    b200:
      name: NVIDIA B200 (HGX B200)
      vendor: nvidia
      architecture: blackwell
      compute_capability: "10.0"
      memory: {bytes: 1.9226e11, source: "..."}
      bandwidth: {hbm_bytes_per_s: 8.0e12, source: "..."}
      compute: {dense_flops_per_s: {bf16: 2.25e15, fp8: 4.5e15, fp4: 9.0e15}, source: "..."}
      native_dtypes: {dtypes: [bf16, fp16, fp8, int8, mxfp8, nvfp4, mxfp4], source: "..."}
      scaleup: {kind: nvswitch, name: NVLink 5, bytes_per_s: 9.0e11, latency_s: 3.0e-6,
                max_gpus: 8, source: "..."}
      host_link: {kind: pcie, name: PCIe Gen5 x16, bytes_per_s: 6.4e10, latency_s: 5.0e-6, source: "..."}
      price: {low_usd_per_hour: 3.75, high_usd_per_hour: 6.0, typical_usd_per_hour: 4.5,
              as_of: "2026-03", source: "..."}   # or null where no public figure exists
      aliases: [b200_sxm]                 # optional: other names (AIConfigurator's system names)
      node: {gpus: 4, source: "..."}      # optional: GPUs rented together, where not the default
                                          # (one PCIe card; else the whole scale-up board)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from tokenplan.hardware import ARCHITECTURE_VENDOR, Gpu, Link, LinkKind, Price
from tokenplan.units import Dtype


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Memory(_Strict):
    bytes: PositiveFloat
    source: str = Field(min_length=3)


class _Bandwidth(_Strict):
    hbm_bytes_per_s: PositiveFloat
    source: str = Field(min_length=3)


class _Compute(_Strict):
    dense_flops_per_s: dict[Literal["bf16", "fp8", "fp4"], PositiveFloat]
    source: str = Field(min_length=3)


class _Native(_Strict):
    dtypes: list[Dtype]
    source: str = Field(min_length=3)


class _Link(_Strict):
    kind: LinkKind
    name: str
    bytes_per_s: PositiveFloat
    latency_s: PositiveFloat
    max_gpus: PositiveInt = 1
    source: str = Field(min_length=3)


class _Node(_Strict):
    gpus: PositiveInt
    source: str = Field(min_length=3)


class _Price(_Strict):
    low_usd_per_hour: PositiveFloat
    high_usd_per_hour: PositiveFloat
    typical_usd_per_hour: PositiveFloat
    as_of: str
    source: str = Field(min_length=3)


class GpuEntry(_Strict):
    """One ``gpus.yaml`` entry as written in the file."""

    name: str
    vendor: Literal["nvidia", "amd"]
    architecture: Literal[
        "ampere", "ada", "hopper", "blackwell", "blackwell-ultra", "blackwell-gb202", "cdna3", "cdna4"
    ]
    compute_capability: str
    memory: _Memory
    bandwidth: _Bandwidth
    compute: _Compute
    native_dtypes: _Native
    scaleup: _Link
    host_link: _Link
    price: _Price | None = None
    notes: str | None = None
    aliases: list[str] = Field(default_factory=list)
    node: _Node | None = None

    @model_validator(mode="after")
    def _vendor_of_architecture(self) -> "GpuEntry":
        # the calibration's vendor level (ROCm or CUDA) reads the vendor from the architecture
        if ARCHITECTURE_VENDOR[self.architecture] != self.vendor:
            raise ValueError(
                f"architecture {self.architecture} is {ARCHITECTURE_VENDOR[self.architecture]}'s, not {self.vendor}'s"
            )
        return self

    @property
    def node_gpus(self) -> int:
        """GPUs rented together: the entry's ``node`` where given (GB200 NVL72: a 4-GPU compute
        tray); otherwise one card where peers talk over PCIe (cards are sold and rented singly),
        and the whole scale-up domain where it is a board (HGX 8-GPU NVSwitch baseboard, MI300X
        8-GPU Infinity Fabric platform, H100 NVL bridged pair)."""
        if self.node is not None:
            return self.node.gpus
        return 1 if self.scaleup.kind == "pcie" else self.scaleup.max_gpus

    def to_gpu(self, key: str) -> Gpu:
        """The frozen value the performance model uses."""
        return Gpu(
            key=key,
            name=self.name,
            vendor=self.vendor,
            architecture=self.architecture,
            compute_capability=self.compute_capability,
            memory_bytes=self.memory.bytes,
            hbm_bytes_per_s=self.bandwidth.hbm_bytes_per_s,
            dense_flops_per_s={k: v for k, v in self.compute.dense_flops_per_s.items()},  # Literal keys as str
            native_dtypes=frozenset(self.native_dtypes.dtypes),
            scaleup=Link(self.scaleup.kind, self.scaleup.name, self.scaleup.bytes_per_s, self.scaleup.latency_s),
            host_link=Link(
                self.host_link.kind, self.host_link.name, self.host_link.bytes_per_s, self.host_link.latency_s
            ),
            max_gpus_per_scaleup=self.scaleup.max_gpus,
            node_gpus=self.node_gpus,
            price=None
            if self.price is None
            else Price(
                self.price.low_usd_per_hour,
                self.price.high_usd_per_hour,
                self.price.typical_usd_per_hour,
                self.price.as_of,
                self.price.source,
            ),
        )
