"""Each engine's container in the manifests `plan --emit k8s` writes (sim/planner/k8s.py): its image, the
executable its launch line starts with, the port and host flags its server needs inside a pod (SGLang and
trtllm-serve listen on localhost by default), and its health endpoint.

Images are the engines' public ones at a moving tag; pin it to the version the plan simulated (the
`infersim/simulated` annotation names it). Defaults: `vllm serve` port 8000 (vLLM's), SGLang 30000
(`sglang.launch_server`'s), trtllm-serve 8000; all three answer GET /health.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_RESOURCE = "nvidia.com/gpu"  # the NVIDIA device plugin's resource


@dataclass(frozen=True)
class EngineContainer:
    name: str
    image: str
    executable: tuple[str, ...]  # the launch line's leading words, the container's `command`
    port: int
    serve_args: tuple[str, ...]  # appended to the serving node's args
    health_path: str = "/health"


CONTAINERS = {
    "vllm": EngineContainer("vllm", "vllm/vllm-openai:latest", ("vllm", "serve"), 8000, ("--port", "8000")),
    "sglang": EngineContainer("sglang", "lmsysorg/sglang:latest", ("python3", "-m", "sglang.launch_server"), 30000,
                              ("--host", "0.0.0.0", "--port", "30000")),
    "trtllm": EngineContainer("trtllm", "nvcr.io/nvidia/tensorrt-llm/release:latest", ("trtllm-serve",), 8000,
                              ("--host", "0.0.0.0", "--port", "8000")),
}
LINE_EXECUTABLES = {"vllm": 2, "sglang": 3, "trtllm": 1}  # words of the launch line before its arguments


def engine_container(engine: str) -> EngineContainer | None:
    """The container of `engine`'s launch line, None for an engine without one here (LMDeploy)."""
    return CONTAINERS.get(engine)


def split_line(engine: str, argv: list[str]) -> tuple[list[str], list[str]]:
    """(the container's command, its args) of a one-node launch line; SGLang's `python` is `python3` in
    its image."""
    spec, n = CONTAINERS[engine], LINE_EXECUTABLES[engine]
    return list(spec.executable), argv[n:]


def pod_container(spec, command: list[str], args: list[str], gpus: int, ready: bool) -> dict:
    """One engine container on `gpus` GPUs; `ready`: it serves the API (a readiness probe on /health)."""
    limits = {GPU_RESOURCE: str(gpus)}  # a quantity: a string
    container = {"name": spec.name, "image": spec.image, "command": command, "args": args,
                 "resources": {"limits": dict(limits), "requests": dict(limits)},
                 "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    if ready:
        container["ports"] = [{"name": "http", "containerPort": spec.port}]
        container["readinessProbe"] = {"httpGet": {"path": spec.health_path, "port": spec.port}, "periodSeconds": 10}
    return container


def pod_spec(container: dict) -> dict:
    return {"containers": [container], "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}
