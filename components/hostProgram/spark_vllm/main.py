# spark-vllm's helper program on each host: one subcommand per call,
#
#   python3 spark_vllm_tools.py SUBCOMMAND 'JSON ARGS'
#
#   host-owner         refuse a host another stack holds (before the helper program is installed)
#   preflight          host facts (arch, GPU, Docker, fabric, HCAs, disk, memory); fails per problem
#   image-transfer     on the head: copy the image to one worker over the fabric
#   weights            put the model's weights in place (present, download, copy) and list them
#   serve-weights      on the head: serve its snapshot to the workers' copies (token on stdin) until each has its copy
#   fabric-check       in the container: one rank of the NCCL all-reduce across the hosts; transport, bus bandwidth
#   compat             the image's vLLM, transformers, CUDA build and Ray against the model and this GPU
#   flush-page-cache   on the host: drop the page cache before a vLLM launch (unified memory)
#   memory-check       in the container: free GPU memory against what vLLM will ask for
#   memory-after-load  in the container, once vLLM answers: free memory left (CUDA free, MemAvailable); warns when low
#   ray-probe          wait until every node and GPU has joined the Ray head
#   ray-env            in the head's container: names vLLM must not copy to its Ray workers (the API key)
#   endpoint-probe     wait for vLLM to answer; on failure, the root cause from the whole log
#   serving-proof      on the head: a short streamed load; time to first token p50/p95, output tokens/s
#   host-status        read-only: this host's vLLM process, health, served model, memory, Ray node (spark-vllm status)
#   given-up           read-only, on the host: the launches the supervisor stopped relaunching, from a records tar on stdin
#   host-facts         read-only, on the host: what the preflight gates on (kernel, CMA, driver, NVRM/Xid lines, RoCE GIDs)
#   supervise          the container's main process: relaunches what the launches recorded when it is not running
#
# Every subcommand prints progress lines, then one JSON object as its last stdout line
# on success; on failure it prints what is wrong and how to fix it on stderr, exit 1.
import json
import sys

from spark_vllm.common import fail
from spark_vllm.compat import compat
from spark_vllm.fabric import fabric_check
from spark_vllm.images import image_transfer
from spark_vllm.memory import flush_page_cache, memory_after_load, memory_check
from spark_vllm.ownership import host_owner
from spark_vllm.preflight import preflight
from spark_vllm.probes import endpoint_probe, ray_probe
from spark_vllm.rayenv import ray_env
from spark_vllm.serving import serving_proof
from spark_vllm.status import given_up_command, host_facts_command, host_status_command
from spark_vllm.supervise import supervise
from spark_vllm.weights import weights
from spark_vllm.weights_source import serve_weights

# The usage line lists these in this order; the header above lists each (a test checks both).
COMMANDS = {
    "host-owner": host_owner,
    "preflight": preflight,
    "image-transfer": image_transfer,
    "weights": weights,
    "serve-weights": serve_weights,
    "fabric-check": fabric_check,
    "compat": compat,
    "flush-page-cache": flush_page_cache,
    "memory-check": memory_check,
    "memory-after-load": memory_after_load,
    "ray-probe": ray_probe,
    "ray-env": ray_env,
    "endpoint-probe": endpoint_probe,
    "serving-proof": serving_proof,
    "host-status": host_status_command,
    "given-up": given_up_command,
    "host-facts": host_facts_command,
    "supervise": supervise,
}


def main(argv):
    if len(argv) != 3 or argv[1] not in COMMANDS:
        fail(["usage: spark_vllm_tools.py %s 'JSON'" % "|".join(COMMANDS)])
    COMMANDS[argv[1]](json.loads(argv[2]))


if __name__ == "__main__":
    main(sys.argv)
