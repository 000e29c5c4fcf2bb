# ray-env: in the head's container, before `vllm serve`: names vLLM must not copy to its Ray workers.
#
# vLLM's Ray executor copies the driver's environment (every registered VLLM_* variable, VLLM_API_KEY among them, and
# any VLLM_/HF_/NCCL_/UCX_/… prefixed one) to each Ray worker, except the names listed in
# $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json, which vLLM reads once at import (vllm/ray/ray_env.py,
# get_env_vars_to_copy). VLLM_CONFIG_ROOT defaults to $XDG_CONFIG_HOME/vllm, else ~/.config/vllm (vllm/envs.py,
# get_default_config_root). The names already in the file are kept.
import json
import os
import tempfile

from spark_vllm.common import fail, say

NON_CARRY_OVER_FILE = "ray_non_carry_over_env_vars.json"


def vllm_config_root(environ=None):
    env = os.environ if environ is None else environ
    home = os.path.expanduser("~")
    default = os.path.join(env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "vllm")
    root = env.get("VLLM_CONFIG_ROOT") or default
    return os.path.join(home, root[2:]) if root.startswith("~/") else root


def merged_names(path, names):
    """The file's list (an unreadable or malformed one counts as empty, as vLLM treats it) plus NAMES, sorted."""
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = []
    old = [n for n in old if isinstance(n, str)] if isinstance(old, list) else []
    return sorted(set(old) | set(names))


def ray_env(args, environ=None):
    names = args.get("nonCarryOver") or []
    root = vllm_config_root(environ)
    path = os.path.join(root, NON_CARRY_OVER_FILE)
    try:
        os.makedirs(root, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, prefix="." + NON_CARRY_OVER_FILE + ".")
        with os.fdopen(fd, "w") as f:
            json.dump(merged_names(path, names), f)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        fail(["cannot write %s (vLLM would copy %s to its Ray workers): %s" % (path, ", ".join(names), e)])
    say("vLLM will not copy %s to its Ray workers (%s)" % (", ".join(names), path))
