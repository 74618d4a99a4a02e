"""MTP (next-n prediction) layers as the draft of speculative decoding (`--spec-method mtp`).

DeepSeek-V3's MTP module (its report, arXiv:2412.19437 sec. 2.2; GLM-4.5 ships the same kind):
RMSNorm of the token embedding and of the last hidden state, a projection of their concatenation
(2h -> h, `eh_proj`), one decoder layer like the model's last, and the shared LM head. One
proposal = one pass of that module over the speculating sequences (the first over the k+1 positions
just verified, `MTPDraft.time_s`); k proposals reuse it k times (vLLM's MTP proposer does so when
num_speculative_tokens exceeds the modules). Its cost is
priced by the same cost model as the target (`mtp_cost_model`), not as a guessed fraction of a
target step (an expert-parallel target's module is expert-parallel too: its MoE layer's experts over
the same EP group, with dispatch and combine, as SGLang's NextN draft runs under the server's EP
settings); acceptance per position stays a parameter (DeepSeek reports 85-90 % for the second
token, arXiv:2412.19437 sec. 5.4.3).
"""

from __future__ import annotations

import numpy as np

from sim.errors import InputError
from sim.inputs.model.spec import ModelSpec


def mtp_module_spec(model: ModelSpec) -> ModelSpec:
    """The MTP module as a one-layer model: the decoder layer kind of the model's last layer."""
    if not model.mtp_layers:
        raise InputError("--spec-method", None, f"mtp needs a model with MTP (next-n) layers; {model.name} has none "
                                                "(use heads or draft)")
    last = model.n_layers - 1
    update = {"n_layers": 1, "mtp_layers": 0, "layer_attention": None, "window_tokens": None,
              "name": f"{model.name} MTP module"}
    if model.moe is not None:
        update["moe"] = model.moe.model_copy(update={"dense_layers": [] if model.is_moe_layer(last) else [0]})
    if model.layer_attention is not None and model.attention_kind(last) != "full":
        update.update(layer_attention=[model.attention_kind(last)], window_tokens=model.window_tokens)
    return model.model_copy(update=update)


class MTPDraft:
    """Draft time of k proposals per speculating sequence from the MTP module's own cost."""

    def __init__(self, target_cost, k: int):
        from sim.cost.model import CostModel

        t = target_cost
        self.k = k
        expert_parallel = getattr(t, "expert_parallel", None)
        if expert_parallel is not None:  # an EP target: the module's MoE layer is expert-parallel like the target's
            from sim.cost.expert_parallel import ExpertParallelCostModel

            self.module = ExpertParallelCostModel(mtp_module_spec(t.model), t.hw, t.layout, _weight_dtype_of(t),
                                                  t.kv_dtype, t.block_size, expert_parallel=expert_parallel,
                                                  allreduce_kind=t.allreduce_kind, allreduce_rule=t.allreduce_rule,
                                                  step_overhead_s=0.0)
        else:
            self.module = CostModel(mtp_module_spec(t.model), t.hw, t.tp, _weight_dtype_of(t), t.kv_dtype,
                                    t.block_size, allreduce_kind=t.allreduce_kind, allreduce_rule=t.allreduce_rule,
                                    step_overhead_s=0.0)
        h = t.model.hidden_size
        self._eh_proj = (h // t.tp, 2 * h)  # column-split 2h -> h projection

    def time_s(self, contexts: np.ndarray) -> float:
        """k module passes over these sequences. The first runs over the k+1 positions the target
        just verified (vLLM's EagleProposer.propose feeds the draft every token of the target's step
        with its hidden states, and samples at each sequence's last), the other k-1 over one new
        token each; each pass samples one token per sequence from the shared LM head."""
        n = int(contexts.shape[0])
        if n == 0:
            return 0.0
        first = np.full(n, self.k + 1, dtype=np.int64)
        module_s = self.module.step_time_s(first, contexts, n, verify_tokens=self.k + 1)
        if self.k > 1:
            module_s += float(self.module.decode_run_times_s(contexts + self.k + 1, self.k - 1).sum())
        eh_first_s = float(self.module._gemm(np.array([float(n * (self.k + 1))]), *self._eh_proj, "eh_proj")[0][0])
        eh_s = float(self.module._gemm(np.array([float(n)]), *self._eh_proj, "eh_proj")[0][0])
        return module_s + eh_first_s + (self.k - 1) * eh_s


def _weight_dtype_of(cost) -> str:
    return getattr(cost, "requested_weight_dtype", cost.weight_dtype)
