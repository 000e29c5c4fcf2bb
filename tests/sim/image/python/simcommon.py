"""Shared helpers for the ray / vllm stand-ins (python3 standard library only).

Environment contract (all optional):
  VLLM_SIM_RELEASE   path of the release description (default /etc/vllm-sim/release.json)
  VLLM_SIM_FAULTS    path of the fault switches (default $HF_HOME/sim-faults.json)
  RAY_SIM_DIR        ray state directory of this "host" (default /tmp/ray)
  VLLM_HOST_IP       this host's fabric address (node IP default)
"""
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request

DEFAULT_RELEASE = {
    "version": "0.17.1",
    "architectures": [
        "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
        "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
        "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
        "GptOssForCausalLM", "Gemma3ForConditionalGeneration",
    ],
    "transformers": "4.57.1",
    "load_seconds": 3,
    "ray": "2.51.1",
}

DEFAULT_MODEL_TYPES = [
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
    "qwen3_5", "qwen3_5_moe", "gpt_oss", "gemma3", "deepseek_v3", "phi3",
]

RAY_VERSION_DEFAULT = "2.51.1"


def release_path():
    return os.environ.get("VLLM_SIM_RELEASE", "/etc/vllm-sim/release.json")


def release():
    data = dict(DEFAULT_RELEASE)
    try:
        with open(release_path()) as f:
            data.update(json.load(f))
    except (OSError, ValueError):
        pass
    return data


def hf_home():
    return os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")


def faults_path():
    return os.environ.get("VLLM_SIM_FAULTS") or os.path.join(hf_home(), "sim-faults.json")


def faults():
    try:
        with open(faults_path()) as f:
            data = json.load(f)
            return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def ray_dir():
    return os.environ.get("RAY_SIM_DIR", "/tmp/ray")


def node_ip(explicit=None):
    return explicit or os.environ.get("VLLM_HOST_IP") or "127.0.0.1"


def pid_alive(pid):
    try:
        pid = int(pid)
        os.kill(pid, 0)
    except (ValueError, TypeError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    # a zombie counts as dead
    try:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                return False
    except OSError:
        pass
    return True


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_json(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


# ---------------------------------------------------------------- GCS client

class GcsUnavailable(Exception):
    pass


def gcs_call(address, path, payload=None, timeout=2.0):
    """JSON request to the GCS stand-in at 'ip:port'. Raises GcsUnavailable."""
    url = "http://%s%s" % (address, path)
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method="GET" if data is None else "POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            body = json.loads(e.read() or b"null")
        except ValueError:
            body = None
        return e.code, body
    except (OSError, ValueError) as e:
        raise GcsUnavailable(str(e))


def current_cluster_address():
    """Like Ray: RAY_ADDRESS, else /tmp/ray/ray_current_cluster."""
    env = os.environ.get("RAY_ADDRESS")
    if env and env != "auto":
        return env.replace("ray://", "").split("/")[0]
    try:
        with open(os.path.join(ray_dir(), "ray_current_cluster")) as f:
            addr = f.read().strip()
            return addr or None
    except OSError:
        return None


# ---------------------------------------------------------------- formatting

def ray_ts():
    t = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + ",%03d" % int((t % 1) * 1000)


def vllm_ts():
    return time.strftime("%m-%d %H:%M:%S")


def out(line=""):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def err(line=""):
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def port_free(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()
