"""Engine presets (vLLM, SGLang, TensorRT-LLM, LMDeploy) and the engine overhead model."""

from sim.inputs.engines.overhead import EngineCost, EngineOverhead
from sim.inputs.engines.preset import EnginePreset, engine_names, load_engine

__all__ = ["EngineCost", "EngineOverhead", "EnginePreset", "engine_names", "load_engine"]
