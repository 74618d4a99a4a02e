"""Write the fitted and derived defaults (calibrate/defaults/fit.py) into hwprofiles/*.yaml.

Each profile gets: efficiency terms, `collectives`, `uncertainty` and `sources` (a line per group of
numbers: measured-fit | derived | guessed, with the rule or the data), and a provenance section
between the markers below (replaced on every run, so the script is idempotent).
"""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np
import yaml

from calibrate.defaults.fit import ATTENTION, custom_allreduce_h100, fit_measured_gpu
from calibrate.fit_collectives import fit_collectives
from calibrate.uncertainty import GUESSED_SIGMA
from calibrate.vidur_import import bundled_vidur_path, read_measurement_file
from sim.inputs.hardware import HardwareProfile

PROFILES_DIR = Path(__file__).resolve().parents[2] / "hwprofiles"
MARK_BEGIN = "-- fitted defaults (python -m calibrate.defaults --write) --"
MARK_END = "-- end of fitted defaults --"
PAGED_BLOCK_OVERHEAD_TOKENS = 4.0  # judgement: each KV block costs about 4 tokens' reading time extra
ARCH = {"h100-sxm": "hopper", "h200": "hopper", "h100-pcie": "hopper", "a100-80g-sxm": "ampere",
        "a100-80g-pcie": "ampere"}  # fmt: skip
DERIVED_FROM = {"h200": "h100-sxm", "h100-pcie": "h100-sxm", "a100-80g-pcie": "a100-80g-sxm"}
PAIRWISE = {"h100-pcie": "h100_pairwise_nvlink", "a100-80g-pcie": "a100_pairwise_nvlink"}
GUESSED = ("b200", "l40s", "mi300x")
CUSTOM_PUBLISHED = ("published: fit to sglang PR 2904 H100 custom all-reduce latencies, one line per algorithm\n"
                    "(one-shot below, two-shot from above_bytes: 512 KiB on 4 GPUs, 256 KiB on 8, vLLM "
                    "csrc/custom_all_reduce.cuh); the two-shot line of 4 GPUs fits vLLM's own kernel timed in CUDA "
                    "graphs (vLLM PRs 24111 and 24532, H100 TP=4, 0.5-4 MiB; calibrate/defaults/fit.py)")
CUSTOM_DERIVED = "derived: NCCL fit, latency x H100 custom/NCCL ratio"
PAGED_RULE = f"guessed: memory x B / (B + {PAGED_BLOCK_OVERHEAD_TOKENS:g}) per block size B"


def paged_from_rule(memory: float) -> dict[int, float]:
    """paged efficiency(B) = memory * B / (B + B0): a fixed per-block cost, relatively larger for small blocks."""
    b0 = PAGED_BLOCK_OVERHEAD_TOKENS
    return {b: round(memory * b / (b + b0), 3) for b in (8, 16, 32, 64, 128)}


def _custom_from_ratio(nccl: dict, h100_nccl: dict, h100_custom: dict) -> dict:
    """custom all-reduce elsewhere: NCCL's bandwidth, latency scaled by H100's custom/NCCL ratio."""
    out = {}
    for tp, fit in nccl.items():
        ref = min(h100_nccl, key=lambda t: abs(int(t) - int(tp)))
        ratio = h100_custom[ref]["latency_us"] / h100_nccl[ref]["latency_us"]
        out[tp] = {"latency_us": round(fit["latency_us"] * ratio, 3), "bus_gb_s": fit["bus_gb_s"]}
    return out


def _pairwise(setup: str) -> tuple[dict, dict]:
    frame = read_measurement_file(bundled_vidur_path(f"network/{setup}/all_reduce.csv"))
    fitted, residuals = fit_collectives(frame)
    return fitted["allreduce"]["nccl"], residuals


def _round(terms: dict) -> dict:
    return {k: (float(f"{v:.4g}") if isinstance(v, float) else _round(v) if isinstance(v, dict) else v)
            for k, v in terms.items()}


def measured_updates(fits: dict) -> dict[str, dict]:
    """Profile name -> {efficiency terms, collectives, uncertainty, sources, note} for every profile."""
    h100_custom = custom_allreduce_h100()
    out = {}
    for name, fit in fits.items():
        arch = ARCH[name]
        nccl = fit["collectives"]["allreduce"]["nccl"]
        custom = h100_custom if name == "h100-sxm" else _custom_from_ratio(nccl, fits["h100-sxm"]["collectives"]
                                                                           ["allreduce"]["nccl"], h100_custom)
        terms = _round(fit["terms"]) | {"attention_compute": ATTENTION[arch][0]}
        res = "; ".join(f"{m}: " + ", ".join(f"{op} {100 * a:.1f}/{100 * b:+.1f}" for op, (a, b) in ops.items())
                        for m, ops in fit["gemm_residuals"].items())  # fmt: skip
        coll = ", ".join(f"{k} {100 * v['mape']:.1f}/{100 * v['bias']:+.1f}" for k, v in
                         fit["collective_residuals"].items())  # fmt: skip
        out[name] = {
            "terms": terms,
            "collectives": {"allreduce": {"nccl": nccl, "custom": custom},
                            "send_recv": fit["collectives"]["send_recv"]},
            "uncertainty": fit["uncertainty"],
            "sources": {
                "gemm": "measured-fit: all bundled Vidur mlp.csv of this GPU (calibrate/defaults/fit.py)",
                "elementwise": "measured-fit: Vidur norm/rotary/activation/add kernels of the same files",
                "collectives.nccl": "measured-fit: Vidur network all_reduce.csv / send_recv.csv (one node)",
                "collectives.custom": CUSTOM_PUBLISHED if name == "h100-sxm" else CUSTOM_DERIVED,
                "attention_compute": f"published: {ATTENTION[arch][1]}",
                "paged_attention_memory": PAGED_RULE,
                "step_overhead_us": "guessed: team judgement (no kernel measures it)",
            },
            "note": (f"GEMM residuals (MAPE/bias %, per model and op, fit on all of them): {res}. "
                     f"Elementwise MAPE {100 * fit['elementwise_mape']:.1f} %. Collectives (MAPE/bias %): {coll}."),
        }  # fmt: skip
    return out


def derived_updates(measured: dict) -> dict[str, dict]:
    out = {}
    for name, source in DERIVED_FROM.items():
        base = measured[source]
        upd = {"terms": dict(base["terms"]), "uncertainty": dict(base["uncertainty"]), "collectives": None}
        rule = f"derived: same architecture as {source} -> its fitted efficiencies (datasheet peak and bandwidth kept)"
        sources = {k: (rule if k in ("gemm", "elementwise") else v) for k, v in base["sources"].items()}
        if name == "h200":
            upd["collectives"] = base["collectives"]
            sources["collectives.nccl"] = "derived: h100_dgx fits (same NVLink4 / NVSwitch HGX board)"
            sources["collectives.custom"] = "derived: h100-sxm custom all-reduce fit (same board)"
            note = "Efficiencies and collectives are h100-sxm's (rules in sources)."
        else:
            pairs, residuals = _pairwise(PAIRWISE[name])
            h100 = measured["h100-sxm"]["collectives"]["allreduce"]
            custom = _custom_from_ratio(pairs, h100["nccl"], h100["custom"])
            upd["collectives"] = {
                "allreduce": {"nccl": {4: pairs[4]}, "custom": {4: custom[4]}},
                "nvlink_bridge": {"nccl": pairs[2], "custom": custom[2]},
            }
            setup = PAIRWISE[name]
            sources["collectives.nccl"] = f"measured-fit: Vidur {setup} all_reduce TP 4 (PCIe between bridged pairs)"
            sources["collectives.custom"] = CUSTOM_DERIVED
            sources["collectives.nvlink_bridge"] = f"measured-fit: Vidur {setup} all_reduce TP 2 (a bridged pair)"
            coll = ", ".join(f"{k} {100 * v['mape']:.1f}/{100 * v['bias']:+.1f}" for k, v in residuals.items())
            note = f"Collectives from Vidur {setup} (MAPE/bias %: {coll}); TP 2 without a bridge uses the TP-4 fit."
        upd["sources"], upd["note"] = sources, note
        out[name] = upd
    for name in GUESSED:
        out[name] = {"terms": {}, "collectives": None, "uncertainty": dict.fromkeys(
            ("gemm", "gemm_table", "elementwise", "attention", "collective", "overhead"), GUESSED_SIGMA),
            "sources": {"efficiency": "guessed: team starting values (see provenance); no measurements of this GPU",
                        "collectives": "guessed: ring formula over interconnect.gpu_link_gb_s and a judged latency"},
            "note": "No measurements of this GPU are bundled: every efficiency is a guess (sources)."}  # fmt: skip
    return out


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, value):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _dict(dumper, value):
    """Flow style for small leaf mappings (per-block-size and per-link numbers), block otherwise."""
    leaf = all(not isinstance(v, dict | list) for v in value.values())
    short = all(isinstance(k, int) for k in value) or set(value) <= {"latency_us", "bus_gb_s"}
    return dumper.represent_mapping("tag:yaml.org,2002:map", value, flow_style=leaf and short)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(dict, _dict)


def apply(path: Path, update: dict, today: str) -> dict:
    data = yaml.safe_load(path.read_text())
    eff = data["efficiency"] | update["terms"]
    if update["terms"]:
        eff["paged_attention_memory"] = paged_from_rule(eff["memory"])
    data["efficiency"] = eff
    # fitted end to end elsewhere (issue 11: FP4 GEMM ceiling); this writer keeps it and its source line
    # as is the MoE all-to-all block (published DeepEP figures, not fitted here) and its source line
    kept_sources = {k: v for k, v in (data.get("sources") or {}).items()
                    if (k == "gemm_compute_max_by_dtype" and k in eff) or (k == "all_to_all" and k in data)}
    for key in ("collectives", "uncertainty", "sources"):
        data.pop(key, None)
        if update.get(key):
            data[key] = update[key]
    if kept_sources:
        data["sources"] = {**data.get("sources", {}), **kept_sources}
    prov = data["provenance"]
    if MARK_BEGIN in prov:
        prov = prov[: prov.index(MARK_BEGIN)] + prov[prov.index(MARK_END) + len(MARK_END):].lstrip("\n")
    data["provenance"] = prov.rstrip("\n") + f"\n{MARK_BEGIN}\n{today}: {update['note']}\n{MARK_END}\n"
    HardwareProfile.model_validate(data)
    return data


def main(argv: list[str]) -> int:
    fits = {name: fit_measured_gpu(name) for name in ("h100-sxm", "a100-80g-sxm")}
    measured = measured_updates(fits)
    updates = measured | derived_updates(measured)
    today = datetime.date.today().isoformat()
    for name, update in sorted(updates.items()):
        print(f"{name}: {update['terms'] or 'guessed (unchanged)'}")
        print(f"  {update['note']}")
        if "--write" in argv:
            path = PROFILES_DIR / f"{name}.yaml"
            data = apply(path, update, today)
            path.write_text(yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True))
    return 0


__all__ = ["main", "np"]
