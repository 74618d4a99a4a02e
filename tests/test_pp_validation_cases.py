"""The pipeline-parallel validation rows (TensorRT-LLM perf overview, RTX PRO 6000 Blackwell Server
Edition tables run as TP x PP) and the `pp` column that carries them through `infersim validate`."""

from __future__ import annotations

import re

import pytest

from sim.errors import InputError
from sim.validate.cases import bundled_case_files, load_cases
from sim.validate.run import case_config, predict

FIT_LENGTHS = {(128, 128), (128, 4096), (1000, 1000), (2048, 128), (5000, 500)}  # the v1.0 file's rule


def rtx_cases():
    path = next(p for p in bundled_case_files() if p.name == "trtllm_perf_overview_rtx_pro_6000.csv")
    return load_cases([path])


def test_rows_split_by_isl_osl_and_value_is_per_gpu_times_gpus():
    cases = rtx_cases()
    assert len(cases) == 27
    for case in cases:
        assert case.split == ("fit" if (case.input_len, case.output_len) in FIT_LENGTHS else "score"), case.case_id
        per_gpu, n_gpus = re.search(r"published ([\d,]+) output tok/s per GPU x (\d+) = value", case.note).groups()
        assert int(n_gpus) == case.tp * case.pp, case.case_id
        assert case.value == int(per_gpu.replace(",", "")) * int(n_gpus), case.case_id
    assert {c.pp for c in cases} == {1, 2}


def test_pp_column_becomes_the_configs_pipeline_stages():
    row = next(c for c in rtx_cases() if c.model == "Llama-3.3-70B" and c.pp == 2)
    cfg = case_config(row)
    assert (cfg.tp, cfg.pp, cfg.hardware) == (1, 2, "rtx-pro-6000")
    assert cfg.layout().n_gpus == 2


def test_dense_pp_rows_and_pp_with_attention_dp_rows_run():
    cases = rtx_cases()
    pp_row = next(c for c in cases if c.model == "Llama-3.3-70B" and c.pp == 2 and c.input_len == 1000)
    prediction = predict(pp_row, max_sim_requests=300)
    assert prediction.predicted is not None and prediction.predicted > 0
    one_stage = next(c for c in cases if c.model == "Llama-3.3-70B" and c.pp == 1 and c.input_len == 1000)
    # two stages of one GPU each hold twice the KV: more sequences in flight, more output per second
    assert prediction.predicted > predict(one_stage, max_sim_requests=300).predicted
    dep_pp = next(c for c in cases if c.pp == 2 and "enable_attention_dp" in c.engine_args)
    cfg = case_config(dep_pp)
    assert (cfg.pp, cfg.dp, cfg.ep, cfg.enable_dp_attention) == (2, cfg.tp, cfg.tp, True)
    staged = predict(dep_pp, max_sim_requests=200)  # attention DP + EP in each of 2 stages (sim/cost/pipeline_ep.py)
    assert staged.predicted is not None and staged.predicted > 0, staged.reason


def _case_file(tmp_path, pp: str, engine_args: str):
    path = tmp_path / "cases.csv"
    path.write_text("source,engine,model,gpu,tp,pp,weight_dtype,workload,num_requests,input_len,output_len,"
                    "engine_args,metric,value\n"
                    f"me,trtllm,llama-3.1-8b,h100,1,{pp},bf16,infinite_rate,10,128,128,{engine_args},"
                    "output_throughput_tok_s,100\n")
    return path


def test_pp_column_is_checked_and_not_given_twice(tmp_path):
    assert load_cases([_case_file(tmp_path, "", "")])[0].pp == 1
    assert load_cases([_case_file(tmp_path, "2", "")])[0].pp == 2
    with pytest.raises(InputError, match="pp"):
        load_cases([_case_file(tmp_path, "0", "")])
    with pytest.raises(InputError, match="pp column"):
        load_cases([_case_file(tmp_path, "2", "pipeline_parallel_size=2")])


def test_pcie_all_to_all_is_priced_below_the_cards_line_rate():
    """rtx-pro-6000's nccl all-to-all fits (measured dense PCIe exchanges): 8 GPUs sharing switches and
    root complexes send far less per GPU than one x16 link carries; 2 GPUs about the P2P rate."""
    from sim.cost.all_to_all import all_to_all_time_s
    from sim.inputs.hardware import load_hardware

    hw = load_hardware("rtx-pro-6000")
    payload = 64e6  # bytes one rank sends, local copies included
    for ep, most_per_gpu in ((2, 0.9), (8, 0.4)):
        remote_bytes = payload * (ep - 1) / ep
        seconds = float(all_to_all_time_s(hw, ep, payload, "nccl", "dispatch"))
        assert remote_bytes / seconds < most_per_gpu * hw.gpu_link_bytes_s
