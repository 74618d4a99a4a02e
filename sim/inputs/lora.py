"""Multi-LoRA serving knobs (vLLM's `--enable-lora --max-loras --max-lora-rank --max-cpu-loras`) and the
sizes of LoRA adapters (docs/lora.md).

Defaults are vLLM's `LoRAConfig` (vllm/config/lora.py): max_lora_rank 16 (allowed ranks 1, 8, 16, 32, 64,
128, 256, 320, 512), max_loras 1 (adapters in one batch), max_cpu_loras None = max_loras (it must be >=
max_loras). An adapter wraps every linear layer of the decoder (q, k, v, o, gate, up, down: vLLM's
packed qkv_proj / gate_up_proj plus o_proj / down_proj) with A [in x r] and B [r x out] in the base
model's dtype (vLLM's lora_dtype `auto`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_serializer, model_validator

from sim.schema import StrictModel

LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vLLM's MaxLoRARanks
MAX_ADAPTERS = 1_000_000
LORA_KEYS = ("enable_lora", "max_loras", "max_lora_rank", "max_cpu_loras", "lora_disk_gb_s")
LORA_ENGINES = ("vLLM",)  # the engines whose LoRA scheduling is modelled (SGLang's max_loras_per_batch: not yet)
LORA_POLICIES = ("continuous", "chunked", "radix")
LORA_BYTES_PER_EL = 2  # lora_dtype auto = the model's dtype: bf16 / fp16 for every dense model bundled


class LoraKnobs(StrictModel):
    """Off unless `enable_lora`; the other knobs are refused without it (they would be ignored)."""

    enable_lora: bool = False
    max_loras: PositiveInt = Field(1, le=4096)  # distinct adapters in one batch = GPU adapter slots
    max_lora_rank: Literal[1, 8, 16, 32, 64, 128, 256, 320, 512] = 16  # rank every slot is preallocated for
    max_cpu_loras: PositiveInt | None = Field(None, le=MAX_ADAPTERS)  # host-memory adapter cache; None: max_loras
    # read bandwidth of an adapter not in the host cache (safetensors from local disk into host memory);
    # an assumption (a local NVMe SSD reads 2-7 GB/s), not a measurement: docs/lora.md
    lora_disk_gb_s: PositiveFloat = Field(2.0, le=1000.0)

    @model_validator(mode="after")
    def _lora_knobs(self):
        if not self.enable_lora:
            given = [k for k in ("max_cpu_loras",) if getattr(self, k) is not None]
            given += [k for k in ("max_loras", "max_lora_rank", "lora_disk_gb_s")
                      if getattr(self, k) != LoraKnobs.model_fields[k].default]
            if given:
                raise ValueError(f"{given[0]} acts on LoRA adapters: give enable_lora true (--enable-lora)")
            return self
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise ValueError(f"max_cpu_loras ({self.max_cpu_loras}) must be >= max_loras ({self.max_loras}), "
                             "as vLLM requires")
        return self

    @model_serializer(mode="wrap")
    def _without_lora_when_off(self, handler):
        """A config without LoRA dumps exactly as before LoRA existed (sweep point ids, run provenance)."""
        data = handler(self)
        if not self.enable_lora and isinstance(data, dict):
            for key in LORA_KEYS:
                data.pop(key, None)
        return data

    @property
    def cpu_lora_slots(self) -> int:
        return self.max_cpu_loras if self.max_cpu_loras is not None else self.max_loras


def lora_refusal(cfg, model, engine_name: str | None) -> str | None:
    """Why this config cannot serve LoRA adapters here (one line), or None. `engine_name`: the preset's
    engine (vllm, sglang, ...), None without a preset (then vLLM's behaviour is modelled)."""
    if engine_name is not None and engine_name not in LORA_ENGINES:
        return (f"enable_lora is modelled as vLLM runs it; the {engine_name} preset's LoRA scheduling "
                "(e.g. SGLang's max_loras_per_batch) is not modelled yet: use engine vllm or none")
    if cfg.policy not in LORA_POLICIES:
        return f"enable_lora needs policy {', '.join(LORA_POLICIES)} (not {cfg.policy})"
    if cfg.spec_tokens or cfg.prefill_replicas is not None:
        return "enable_lora with speculative decoding or disaggregated prefill/decode is not modelled yet"
    if model.moe is not None or model.mla is not None:
        return f"enable_lora is modelled for dense models with plain attention; {model.name} has MoE or MLA layers"
    if cfg.preemption_mode == "swap":
        return "enable_lora with preemption_mode swap is not modelled yet (vLLM V1 recomputes preempted requests)"
    if cfg.pp != 1:
        return "enable_lora with pipeline parallelism (pp > 1) is not modelled yet"
    return None


def lora_linears(model) -> list[tuple[int, int, bool]]:
    """(in, out, column_parallel) of each LoRA-wrapped linear of one decoder layer (unsharded)."""
    h, q, kv = model.hidden_size, model.n_heads * model.head_dim, model.n_kv_heads * model.head_dim
    f = model.intermediate_size
    mlp_in = [(h, f, True), (h, f, True)] if model.mlp == "gated" else [(h, f, True)]
    return [(h, q, True), (h, kv, True), (h, kv, True), (q, h, False), *mlp_in, (f, h, False)]


def adapter_elements_per_gpu(model, rank: int, tp: int) -> int:
    """Weight elements of one rank-`rank` adapter on one GPU of a `tp` group. vLLM shards half of the
    LoRA computation by default (fully_sharded_loras False): a column-parallel layer keeps A whole and
    shards B's output, a row-parallel layer shards A's input and keeps B whole."""
    per_layer = 0
    for n_in, n_out, column in lora_linears(model):
        per_layer += rank * (n_in + n_out // tp) if column else rank * (n_in // tp + n_out)
    return per_layer * model.n_layers


def slot_bytes_per_gpu(model, max_loras: int, max_lora_rank: int, tp: int, bytes_per_el: float) -> int:
    """GPU memory vLLM preallocates for the adapter slots (max_loras x max_lora_rank stacked A and B of
    every wrapped layer, at model init, before the KV cache is sized from what is left)."""
    return int(max_loras * adapter_elements_per_gpu(model, max_lora_rank, tp) * bytes_per_el)


PopularityKind = Literal["uniform", "zipf"]


def blocks_beside_adapters(cfg, model, memory) -> int:
    """KV blocks per GPU once the adapter slots are allocated (all of `memory`'s blocks without LoRA).
    vLLM allocates the slots with the model, before profiling sizes the KV cache from what is left."""
    if not cfg.enable_lora:
        return memory.num_gpu_blocks
    from sim.errors import InputError

    slot_bytes = slot_bytes_per_gpu(model, cfg.max_loras, cfg.max_lora_rank, cfg.tp, LORA_BYTES_PER_EL)
    block_bytes = memory.block_size * memory.kv_bytes_per_token_per_gpu
    blocks = memory.num_gpu_blocks - -(-slot_bytes // block_bytes)
    if blocks < 1:
        raise InputError("--max-loras", None, f"{cfg.max_loras} adapter slots of rank {cfg.max_lora_rank} take "
                         f"{slot_bytes / 2**30:.1f} GiB per GPU: no KV cache is left; lower max_loras or max_lora_rank")
    return int(blocks)
