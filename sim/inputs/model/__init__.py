"""Model architectures: `ModelSpec` (sim/inputs/model/spec.py), parameter counts (params.py), KV per
token (kv.py), and where specs come from (load.py: bundled YAML, a user's YAML, or a Hugging Face
config.json read by one module per architecture family under sim/inputs/model/hf/)."""

from sim.inputs.model.hf import from_hf_config, supported_model_types
from sim.inputs.model.load import bundled_models, load_model
from sim.inputs.model.spec import MLA, WEIGHT_GROUPS, ModelSpec, MoE

__all__ = ["MLA", "WEIGHT_GROUPS", "ModelSpec", "MoE", "bundled_models", "from_hf_config", "load_model",
           "supported_model_types"]
