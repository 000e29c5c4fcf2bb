"""The stand-in vLLM's Ray worker: a real Ray actor (real Ray from PyPI, tests/sim/image-wheels.ts) that the driver's
RayDistributedExecutor stand-in (vllm/_sim_serve.py) places with one logical GPU in each bundle of its placement group,
as vLLM's RayWorkerWrapper is (vllm/v1/executor/ray_executor.py _init_workers_ray). Imported by Ray's worker processes
on every node from /opt/vllm-sim/python (the container's PYTHONPATH, which the raylet passes on)."""
import json
import os

import simcommon as sc

# Ray's default session directory on the node (python/ray/_private/node.py: <temp dir>/session_latest, temp dir /tmp/ray).
WORKER_ENV_RECORD = "/tmp/ray/session_latest/logs/worker_env.json"


class RayWorkerWrapper:
    def info(self):
        import ray
        rel = sc.release()
        return {"pid": os.getpid(), "ip": ray.util.get_node_ip_address(),
                "node_id": ray.get_runtime_context().get_node_id(),
                "vllm": rel.get("version"), "architectures": rel.get("architectures", [])}

    def update_environment_variables(self, envs):
        """vllm/v1/worker/worker_base.py WorkerWrapperBase.update_environment_variables: the driver's variables set
        here; the names are recorded on the node so a test can see what reached it."""
        os.environ.update(envs)
        try:
            with open(WORKER_ENV_RECORD, "w") as f:
                json.dump(sorted(envs), f)
        except OSError:
            pass
        return sorted(envs)

    def ping(self):
        return os.getpid()
