"""summary.json `placement`: which GPUs of which node each replica uses, and `--nodes`."""

from __future__ import annotations

import pytest

from sim.errors import InputError
from sim.inputs.config import load_config
from sim.inputs.layout.placement import cluster_placement


def _placement(**knobs) -> dict:
    return cluster_placement(load_config(None, knobs))


def test_small_replicas_pack_a_node_without_straddling_and_large_ones_take_whole_nodes():
    packed = _placement(model="llama-3-8b", tp=2, replicas=5)
    assert [r["gpus"] for r in packed["replicas"]] == [[[0, 0, 2]], [[0, 2, 2]], [[0, 4, 2]], [[0, 6, 2]],
                                                       [[1, 0, 2]]]
    assert (packed["n_nodes"], packed["n_gpus"], packed["n_gpus_idle"]) == (2, 10, 6)
    pipelined = _placement(model="llama-3.1-405b", tp=8, pp=2, replicas=2)
    assert [r["gpus"] for r in pipelined["replicas"]] == [[[0, 0, 8], [1, 0, 8]], [[2, 0, 8], [3, 0, 8]]]
    assert pipelined["layout"]["pp"] == 2 and pipelined["replicas"][0]["n_gpus"] == 16


def test_a_replica_that_does_not_fit_the_rest_of_a_node_moves_to_the_next():
    mixed = _placement(model="llama-3-8b", tp=4, replicas=3, replica_hardware=["h100-sxm", "h200", "h100-sxm"])
    h100 = [r["gpus"] for r in mixed["replicas"] if r["hardware"] == "h100-sxm"]
    assert h100 == [[[0, 0, 4]], [[0, 4, 4]]]  # both on the first h100 node; the h200 has its own node
    assert [n["hardware"] for n in mixed["nodes"]] == ["h100-sxm", "h200"]


def test_nodes_bounds_the_cluster_and_spare_gpus_are_reported():
    assert _placement(model="llama-3-8b", tp=2, replicas=3, nodes=2)["n_gpus_idle"] == 10
    with pytest.raises(InputError, match="need 2 nodes"):
        _placement(model="llama-3-8b", tp=2, replicas=5, nodes=1)


def test_disaggregated_groups_are_placed_prefill_first():
    disagg = _placement(model="llama-3-8b", prefill_replicas=1, decode_replicas=2, prefill={"tp": 4},
                        decode={"tp": 2})
    assert [(r["role"], r["n_gpus"], r["gpus"]) for r in disagg["replicas"]] == [
        ("prefill", 4, [[0, 0, 4]]), ("decode", 2, [[0, 4, 2]]), ("decode", 2, [[0, 6, 2]])]
