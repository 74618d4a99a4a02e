"""Every shape a model needs (issue 39 item 4): MLA projections, MoE router / shared / grouped
expert GEMMs at EP token counts, fp8 padding to the kernel's alignment, and the CPU quick runs of
gpt-oss-120b (fp8) and DeepSeek-R1 exiting 0 with the shapes they time."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kernels.arch_shapes import decode_heads, expert_groups, model_gemm_shapes, prefill_heads
from kernels.shapes import dims_from_spec, shapes_for
from sim.inputs.model import load_model

torch = pytest.importorskip("torch")


def _shapes(name: str, tp: int) -> list[tuple[str, int, int]]:
    return [(s.op, s.n_out, s.k_in) for s in model_gemm_shapes(dims_from_spec(load_model(name)), tp)]


def test_deepseek_r1_tp8_gemms_are_its_mla_and_moe_projections():
    # config: hidden 7168, 128 heads, q_lora 1536, kv_lora 512, nope 128, rope 64, v 128,
    # dense intermediate 18432 (first 3 layers), 256 experts of 2048, one shared expert, vocab 129280
    assert _shapes("deepseek-r1", 8) == [
        ("q_a_proj", 1536, 7168), ("q_b_proj", 16 * 192, 1536), ("kv_a_proj", 512 + 64, 7168),
        ("kv_b_proj", 16 * (128 + 128), 512), ("o_proj", 7168, 16 * 128),
        ("gate_up_proj", 2 * 18432 // 8, 7168), ("down_proj", 7168, 18432 // 8),
        ("router", 256, 7168), ("shared_gate_up_proj", 2 * 2048 // 8, 7168), ("shared_down_proj", 7168, 2048 // 8),
        ("lm_head", 129280 // 8, 7168),
    ]  # fmt: skip


def test_gpt_oss_tp8_gemms_have_no_dense_mlp_and_expert_groups_in_both_layouts():
    dims = dims_from_spec(load_model("gpt-oss-120b"))
    assert _shapes("gpt-oss-120b", 8) == [
        ("qkv_proj", (8 + 2) * 64, 2880), ("o_proj", 2880, 8 * 64), ("router", 128, 2880), ("lm_head", 25136, 2880)]
    groups = {(g.op, g.ep): (g.n_out, g.k_in, g.n_local_experts) for g in expert_groups(dims, 8)}
    assert groups == {
        ("experts_gate_up", 1): (2 * 360, 2880, 128), ("experts_down", 1): (2880, 360, 128),  # TP-split width
        ("experts_gate_up", 8): (2 * 2880, 2880, 16), ("experts_down", 8): (2880, 2880, 16),  # EP: whole experts
    }


def test_expert_rows_follow_tokens_x_top_k_x_ep_over_experts():
    dims = dims_from_spec(load_model("deepseek-r1"))  # 256 experts, top 8
    tp_split, ep8 = expert_groups(dims, 8)[0], expert_groups(dims, 8)[2]
    assert (tp_split.ep, ep8.ep) == (1, 8)
    assert tp_split.at(1) == (8, 1)  # 8 rows: 8 experts with one row each
    assert tp_split.at(4096) == (256, 4096 * 8 * 1 // 256)
    assert ep8.at(4096) == (32, 4096 * 8 * 8 // 256)
    assert ep8.at(2) == (16, 1)


def test_a_dense_gqa_model_keeps_the_five_projections():
    dims = dims_from_spec(load_model("llama-3-8b"))
    assert model_gemm_shapes(dims, 2) == shapes_for(dims, 2) and expert_groups(dims, 2) == []


def test_mla_attention_heads_absorbed_decode_and_mha_prefill():
    dims = dims_from_spec(load_model("deepseek-r1"))
    decode = decode_heads(dims, 8)
    assert (decode.n_heads, decode.latent_dim, decode.rope_dim, decode.qk_head_dim) == (16, 512, 64, 192)
    prefill = prefill_heads(dims, 8)
    assert (prefill.n_heads, prefill.n_kv_heads, prefill.head_dim) == (16, 16, 192)


def test_fp8_operands_are_padded_to_16_and_the_product_is_unchanged():
    from kernels import gemm

    assert gemm.fp8_padded_kn(2880, 360) == (2880, 368) and gemm.fp8_padded_kn(640, 2880) == (640, 2880)
    inputs = gemm.make_fp8_gemm_inputs(5, 40, 360, "cpu")
    assert inputs.x.shape == (16, 368) and inputs.weight.shape == (48, 368)
    assert not inputs.x[:, 360:].float().any() and not inputs.weight[40:].float().any()
    assert inputs.weight[:40, :360].float().abs().sum() > 0
    out = gemm.fp8_projection(inputs).float()[:, :40]
    reference = inputs.x[:, :360].float() @ inputs.weight[:40, :360].float().t()
    assert torch.allclose(out, reference, rtol=2e-2, atol=2e-1)


@pytest.fixture(scope="module")
def cli():
    from sim.cli import app

    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["calibrate", "run", "--device", "cpu", "--quick", *map(str, args)])


def test_gpt_oss_fp8_quick_run_pads_k_360_and_exits_0(cli, tmp_path):
    """The H200 run died here with a traceback (torch._scaled_mm: K = 360 not divisible by 16)."""
    result = cli("--dtype", "fp8", "--model", "gpt-oss-120b", "--out", tmp_path / "p.yaml")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert any("experts_down tp=8: N=2880 K=360 (ran N=2880 K=368" in line for line in lines), result.stderr
    assert any(line.strip().startswith("qkv_proj tp=8: N=640 K=2880") for line in lines)
    assert any("lm_head tp=8 N=25136 K=2880: not timed" in line for line in lines)  # over the CPU cap, said
    assert any("CUDA-graph replay needs a CUDA device" in line for line in lines)


def test_deepseek_r1_quick_run_times_mla_shapes_and_exits_0(cli, tmp_path):
    from calibrate.measurements import read_measurements

    result = cli("--model", "deepseek-r1", "--out", tmp_path / "p.yaml")
    assert result.exit_code == 0, result.output
    frame = read_measurements(tmp_path / "p.measurements.csv")
    assert {"q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj", "router", "mla_decode_attention"} <= set(frame["op"])
    mla = frame[frame["op"] == "mla_decode_attention"]
    assert set(zip(mla["n_heads"], mla["n_kv_heads"], mla["head_dim"], mla["v_head_dim"])) == {(16, 1, 576, 512)}
    assert (frame["timing_mode"] == "eager").all() and frame["time_graph_s"].isna().all()
    assert (frame["time_s"] == frame["time_eager_s"]).all()
    assert "left out of the fit and residuals" in result.stderr and "mla_decode_attention" in result.stderr
