"""`infersim engines`: the bundled engine presets and what each sets."""

from __future__ import annotations

import typer

from sim.cli.common import print_json, print_table
from sim.inputs.engines.preset import engine_families, engine_versions, load_engine


def engines(as_json: bool = typer.Option(False, "--json", help="print the presets as JSON")) -> None:
    """List the engine presets (--engine NAME): scheduling, KV defaults, CUDA graphs, CPU overhead."""
    presets = [load_engine(name) for name in engine_versions()]
    if as_json:
        print_json([p.model_dump() for p in presets])
        return
    rows = []
    for p in presets:
        s, o, g = p.scheduling, p.overhead, p.cuda_graph
        graphs = f"{len(g.capture_sizes)} sizes <= {g.capture_sizes[-1]} ({g.scope})" if g.capture_sizes else "none"
        cpu = (f"{o.per_step_us:g} + {o.per_seq_us:g}/seq + {o.per_token_us:g}/tok us, "
               + ("overlapped" + (f" + {o.residue_us:g} us" if o.residue_us else "") if o.overlap else "serial")
               + (f", {o.num_scheduler_steps} steps/schedule" if o.num_scheduler_steps > 1 else "")
               + (", async (arrivals join a step late)" if o.async_scheduling else ""))
        scheduling = f"{s.policy}, budget {s.max_num_batched_tokens}, seqs {s.max_num_seqs}, block {s.block_size}"
        kv = f"{p.kv.dtype} / {p.kv.dtype_quantized_checkpoint}"
        if p.large_gpu_scheduling is not None:
            big = p.large_gpu_scheduling
            scheduling += f" ({big.max_num_batched_tokens} / {big.max_num_seqs} on >= {big.min_hbm_gib:g} GiB GPUs)"
        aliases = [family for family, newest in engine_families().items() if newest == p.name]
        name = p.name + (f" (= {aliases[0]})" if aliases else "")
        rows.append([name, p.version_range or p.version, scheduling, kv, graphs, p.allreduce_kind, cpu])
    print_table("engine presets (any flag overrides; a bare family name is its newest version)",
                ["name", "versions", "scheduling", "KV dtype (bf16 / quantized)", "CUDA graphs", "all-reduce",
                 "engine CPU per step"], rows)
