"""The layout a simulation runs with, checked against the model and the cluster: what the simulator
does not price is refused in one line, before anything runs."""

from __future__ import annotations

from sim.errors import InputError
from sim.inputs.layout.parallel import ReplicaLayout
from sim.inputs.layout.placement import cluster_placement


def simulated_layout(cfg, model) -> ReplicaLayout:
    """The layout a simulation runs with, checked against `model`; refuses in one line what the
    simulator does not price (PP with disaggregation or speculative decoding; EP / DP-attention with
    speculative decoding in a disaggregated cluster). PP with EP / DP-attention: sim/cost/pipeline_ep.py;
    EP / DP-attention with speculative decoding: sim/cost/mtp.py, sim/engine/lockstep.py. A disaggregated
    group's config (sim/engine/disagg: the run's config with the group's knobs on top) takes its own EP /
    DP-attention layout."""
    layout = cfg.layout().check(model.n_layers, model.moe is not None, model.n_experts if model.moe else None)
    if not layout.is_dense_tp_pp:
        flag = "--ep" if layout.uses_expert_parallel else "--dp"
        if not layout.uses_expert_parallel:
            raise InputError(flag, None, "data-parallel attention without expert parallelism (MoE layers tensor-split "
                             "over the ranks) is not simulated: give --ep equal to the MoE layer's GPUs")
        if cfg.spec_tokens and cfg.is_disaggregated:
            raise InputError(flag, None, "expert-parallel / data-parallel-attention layouts with speculative decoding "
                             "in a disaggregated cluster are not simulated")
    _refuse_unused_moe_knobs(cfg, layout)
    if layout.pp > 1 and (cfg.is_disaggregated or cfg.spec_tokens):
        raise InputError("--pp", None, "pipeline stages with disaggregated prefill/decode or speculative decoding are "
                         "not modelled: use pp 1")
    if not cfg.is_disaggregated:  # a disaggregated cluster's placement is checked once, from the run's config
        cluster_placement(cfg)  # refuses a --nodes too small for the replicas, before anything runs
    return layout


def _refuse_unused_moe_knobs(cfg, layout: ReplicaLayout) -> None:
    """The all-to-all knobs change nothing without expert parallelism (deepep_mode without deepep):
    refused rather than ignored."""
    given = [flag for flag, is_set in (("--moe-a2a-backend", cfg.moe_a2a_backend != "nccl"),
                                       ("--deepep-mode", cfg.deepep_mode != "auto"),
                                       ("--moe-load-imbalance", cfg.moe_load_imbalance is not None),
                                       ("--enable-two-batch-overlap", cfg.enable_two_batch_overlap)) if is_set]
    if given and not layout.uses_expert_parallel:
        raise InputError(given[0], None, "prices the expert-parallel all-to-all: needs --ep (or "
                         "--enable-expert-parallel) on a MoE model")
    if cfg.deepep_mode != "auto" and cfg.moe_a2a_backend != "deepep":
        raise InputError("--deepep-mode", None, "selects DeepEP kernels: needs --moe-a2a-backend deepep")
