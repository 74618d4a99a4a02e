"""The notebooks execute on tiny inputs and draw their figures; the report helpers they use are right.

Each notebook runs through papermill (its `parameters` cell overridden by the tiny values below)
in a temporary directory, with the repository on PYTHONPATH so the kernel imports this checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import papermill
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.run.report import PARTS, breakdown_table, headline_table, latency_parts

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"

# notebook -> (tiny parameters, minimum PNG figures, text its output must contain)
CASES = {
    "scheduler_comparison.ipynb": (
        {"max_requests": 60, "prefix_max_requests": 30},
        3,
        "splitwise_conv: 60 requests",
    ),
    "calibration_report.ipynb": ({"row_stride": 16}, 2,
                                 ["(row_stride 16)", "held out, out of sample: fitted",
                                  "is in sample there (calibrate/defaults fitted it on these rows)"]),
    "batch_and_block_size.ipynb": (
        {"max_requests": 60, "max_num_seqs_values": [8, 64], "block_sizes": [8, 16, 32], "attention_contexts": [512]},
        4,
        ["block sizes [8] dropped: vllm takes 16, 32, 64, 128 or 256",
         "profile h100-sxm has one paged-attention efficiency (0.903) for every block size"],
    ),
}


def _outputs(notebook) -> list[dict]:
    return [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]


def _text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return output.get("data", {}).get("text/plain", "")


@pytest.mark.parametrize("name", sorted(CASES))
def test_notebook_executes_and_draws(name, tmp_path, monkeypatch):
    parameters, min_figures, expected_text = CASES[name]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    executed = papermill.execute_notebook(
        str(NOTEBOOKS / name),
        str(tmp_path / name),
        parameters=parameters,
        kernel_name="python3",
        cwd=str(tmp_path),
        progress_bar=False,
        log_output=False,
    )
    outputs = _outputs(executed)
    assert not [o for o in outputs if o.get("output_type") == "error"]
    n_figures = sum("image/png" in o.get("data", {}) for o in outputs)
    assert n_figures >= min_figures, f"{name}: {n_figures} figures, expected at least {min_figures}"
    texts = "".join(_text(o) for o in outputs)
    for expected in [expected_text] if isinstance(expected_text, str) else expected_text:
        assert expected in texts, f"{name}: no {expected!r} in its output"


def test_capacity_planning_notebook_gives_the_cli_plan(tmp_path, monkeypatch):
    """The notebook and `infersim plan` call the same code with the same defaults: on the same inputs,
    neither naming an engine or a policy, the same plan.json, both simulating vLLM's newest preset
    with its default policy (before, the notebook ran the generic engine and the test hid it behind
    `--engine none`). The workload: the first 300 requests of the bundled Azure conversation trace."""
    import json

    from typer.testing import CliRunner

    from sim.cli import app
    from sim.inputs.workload import load_workload
    from sim.inputs.workload.canonical import write_canonical_jsonl

    workload = tmp_path / "azure_conv_300.jsonl"
    write_canonical_jsonl(load_workload("splitwise_conv").take(range(300)), workload)
    parameters = {"workload": str(workload), "model": "llama-3-8b", "hardware": ["h100-sxm", "a100-80g-sxm"],
                  "tps": [1], "slos": ["ttft_p99=1s", "tpot_p99=50ms"], "target_qps": 12.0,
                  "max_requests": 60, "workers": 1, "plan_json": str(tmp_path / "notebook_plan.json")}
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    executed = papermill.execute_notebook(str(NOTEBOOKS / "capacity_planning.ipynb"),
                                          str(tmp_path / "capacity_planning.ipynb"), parameters=parameters,
                                          kernel_name="python3", cwd=str(tmp_path), progress_bar=False,
                                          log_output=False)
    outputs = _outputs(executed)
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 5
    text = "".join(_text(o) for o in outputs)
    assert "300 requests" in text and "recommended for 12 req/s of llama-3-8b" in text
    assert "engine: vLLM 0.15" in text and "policies: radix" in text
    cli = CliRunner().invoke(app, ["plan", "--workload", str(workload), "--model", "llama-3-8b", "--hardware",
                                   "h100-sxm,a100-80g-sxm", "--tp", "1", "--slo", "ttft_p99=1s",
                                   "--slo", "tpot_p99=50ms", "--target-qps", "12", "--max-requests", "60",
                                   "--workers", "1", "--out", str(tmp_path / "cli")])
    assert cli.exit_code == 0, cli.output
    from_cli = json.loads((tmp_path / "cli" / "plan.json").read_text())
    from_notebook = json.loads((tmp_path / "notebook_plan.json").read_text())
    assert from_notebook == from_cli
    verified = from_cli["recommended"]["verified_run"]
    # the whole 300-request workload, tiled as far as steady state needs (sim.run.steady_state)
    assert from_cli["recommended"]["verified"] and verified["n_requests"] >= 300
    assert verified["steady_state"]["long_enough"] and verified["steady_state"]["n_requests"] == verified["n_requests"]
    assert from_cli["launch"]["engine"] == "vllm" and from_cli["recommended"]["policy"] == "radix"
    assert from_cli["launch"]["simulated"].startswith("# infersim simulated: vLLM 0.15")
    assert "--disable-custom-all-reduce" not in from_cli["launch"]["command"]


def test_committed_notebooks_have_no_outputs_and_a_parameters_cell():
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {p.name for p in paths} >= set(CASES) | {"capacity_planning.ipynb"}
    for path in paths:
        notebook = nbformat.read(path, as_version=4)
        code_cells = [c for c in notebook.cells if c.cell_type == "code"]
        assert "parameters" in code_cells[0].metadata.get("tags", []), path.name
        assert all(not c.outputs and c.execution_count is None for c in code_cells), f"{path.name} has outputs"


# ---------------------------------------------------------------- report helpers


def _requests(rows: list[tuple]) -> pd.DataFrame:
    """rows: (arrival, scheduled, first_token, finish, preempted, status)."""
    frame = pd.DataFrame(
        rows, columns=["arrival_s", "scheduled_s", "first_token_s", "finish_s", "preempted_s", "status"]
    )
    frame.insert(0, "request_id", np.arange(len(frame)))
    frame["queue_delay_s"] = frame["scheduled_s"] - frame["arrival_s"]
    frame["e2e_s"] = frame["finish_s"] - frame["arrival_s"]
    return frame


def test_latency_parts_by_hand():
    frame = _requests(
        [
            (0.0, 1.0, 1.5, 4.5, 0.0, "FINISHED"),  # queue 1, prefill 0.5, decode 3
            (1.0, 1.0, 2.0, 7.0, 2.0, "FINISHED"),  # 2 s preempted inside a 5 s decode phase
            (0.0, 0.5, 4.0, 4.5, 3.0, "FINISHED"),  # preempted 3 s, decode phase only 0.5 s
            (0.0, np.nan, np.nan, np.nan, 0.0, "REJECTED"),
        ]
    )
    parts = latency_parts(frame)
    assert list(parts.index) == [0, 1, 2]
    np.testing.assert_allclose(parts.loc[0, list(PARTS)], [1.0, 0.5, 3.0, 0.0])
    np.testing.assert_allclose(parts.loc[1, list(PARTS)], [0.0, 1.0, 3.0, 2.0])
    np.testing.assert_allclose(parts.loc[2, list(PARTS)], [0.5, 1.0, 0.0, 3.0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(*[st.floats(0, 100, allow_nan=False)] * 4, st.floats(0, 1)), min_size=1, max_size=30))
def test_latency_parts_add_up_to_e2e_and_stay_non_negative(draws):
    """Oracle: for any timeline arrival <= scheduled <= first token <= finish whose preempted time
    fits after scheduling, the four parts are >= 0 and sum to e2e."""
    rows = []
    for arrival, queue, prefill, decode, preempted_share in draws:
        scheduled, first = arrival + queue, arrival + queue + prefill
        finish = first + decode
        rows.append((arrival, scheduled, first, finish, preempted_share * (finish - scheduled), "FINISHED"))
    parts = latency_parts(_requests(rows))
    np.testing.assert_allclose(parts[list(PARTS)].sum(axis=1), parts["e2e_s"], rtol=1e-9, atol=1e-9)
    assert (parts[list(PARTS)].to_numpy() >= -1e-9).all()


def test_breakdown_table_tail_is_the_slowest_requests():
    rows = [(0.0, 0.0, 0.1, 1.0 + i, 0.0, "FINISHED") for i in range(100)]
    table = breakdown_table({"a": _requests(rows)}, tail_quantile=0.99)
    assert list(table.index) == [("a", "mean"), ("a", "p99")]
    assert table.loc[("a", "mean"), "n_requests"] == 100
    assert table.loc[("a", "p99"), "n_requests"] == 1
    assert table.loc[("a", "p99"), "e2e_s"] == pytest.approx(100.0)
    assert table.loc[("a", "mean"), "e2e_s"] == pytest.approx(np.mean(1.0 + np.arange(100)))
    tail_5 = breakdown_table({"a": _requests(rows)}, tail_quantile=0.95).loc[("a", "p95")]
    assert tail_5["n_requests"] == 5 and tail_5["e2e_s"] == pytest.approx(98.0)


def test_headline_table_units_and_missing_values():
    summary = {
        "n_finished": 3,
        "n_rejected": 0,
        "request_throughput": 1.5,
        "ttft_s": {"p50": 0.2, "p99": None},
        "preemptions": 2,
    }
    table = headline_table({"x": summary})
    assert table.loc["x", "TTFT p50 ms"] == pytest.approx(200.0)
    assert pd.isna(table.loc["x", "TTFT p99 ms"]) and pd.isna(table.loc["x", "KV util"])
    assert str(table["finished"].dtype) == "Int64" and table.loc["x", "preemptions"] == 2
