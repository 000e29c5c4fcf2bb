# The model's real size, before any download or launch, and whether it fits the hosts' memory (components/plan/memory.ts is
# the preview's twin for catalog models; this one knows every model).
#
# Which files: the *.safetensors vLLM loads. With a model.safetensors.index.json, only the files its weight_map names
# (vllm vllm/model_executor/model_loader/weight_utils.py filter_duplicate_safetensors_files: "For models like
# Mistral-7B-v0.3, there are both sharded safetensors files and a consolidated safetensors file"), else all of them.
#
# On disk: each file's safetensors header, not its size. The format (huggingface/safetensors README, "Format"): 8 bytes,
# a little-endian u64 N; N bytes of JSON, {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}};
# then the data. safetensors refuses a file whose data_offsets are not contiguous or whose end - begin is not
# nelements(shape) x bitsize(dtype) / 8 (safetensors/src/tensor.rs Metadata::validate), so the sum of end - begin is
# the bytes of every tensor vLLM will place in memory: the figure that must fit, read in one small read per file
# (headers are at most 100 MB: tensor.rs MAX_HEADER_SIZE), even for sub-byte dtypes. File sizes would add the headers
# and say nothing of a file that is not safetensors at all; a header that cannot be read is named here, not at load.
#
# From the hub, for a download: the repository's file listing, GET {endpoint}/api/models/{id}/tree/{revision}
# ?recursive=true, each entry {type, path, size, lfs: {size, oid}}, pages linked by a `Link: <…>; rel="next"` header
# (huggingface_hub src/huggingface_hub/hf_api.py list_repo_tree and RepoFile; utils/_pagination.py paginate). The
# endpoint is HF_ENDPOINT, default https://huggingface.co (huggingface_hub constants.py ENDPOINT), as the download's.
# The hub lists file sizes only: a safetensors file is its header plus its tensors, so that is the same figure within
# the headers' few MB.
import json
import math
import os
import re
import struct
import urllib.error
import urllib.parse
import urllib.request

SIZE_GIB = 1024 ** 3
SAFETENSORS_INDEX = "model.safetensors.index.json"
MAX_SAFETENSORS_HEADER = 100_000_000
HUB_ENDPOINT_DEFAULT = "https://huggingface.co"


class SizeUnknown(Exception):
    """The size could not be read (its message says why)."""


def loaded_files(names, weight_map):
    """The safetensors files vLLM loads out of NAMES (paths in the repository), given the index's weight_map or None."""
    tensors = sorted(n for n in names if n.endswith(".safetensors"))
    if weight_map is None:
        return tensors
    named = set(weight_map.values())
    return [n for n in tensors if n in named]


def header_tensor_bytes(path):
    """Bytes of all tensors one safetensors file declares (sum of data_offsets end - begin)."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SizeUnknown("%s is shorter than a safetensors header" % os.path.basename(path))
        (n,) = struct.unpack("<Q", head)
        if n > MAX_SAFETENSORS_HEADER:
            raise SizeUnknown("%s declares a %d-byte header, more than safetensors allows" % (os.path.basename(path), n))
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
        return sum(int(t["data_offsets"][1]) - int(t["data_offsets"][0]) for k, t in header.items() if k != "__metadata__")
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as e:
        raise SizeUnknown("%s has no readable safetensors header (%s)" % (os.path.basename(path), e))


def snapshot_weight_bytes(snap):
    """(tensor bytes, files) of the snapshot's safetensors that vLLM loads; SizeUnknown when it has none or one is bad."""
    names = []
    for root, _, files in os.walk(snap):
        names += [os.path.relpath(os.path.join(root, n), snap) for n in files]
    weight_map = None
    if os.path.isfile(os.path.join(snap, SAFETENSORS_INDEX)):
        try:
            with open(os.path.join(snap, SAFETENSORS_INDEX)) as f:
                weight_map = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError) as e:
            raise SizeUnknown("%s cannot be read (%s)" % (SAFETENSORS_INDEX, e))
    files = loaded_files(names, weight_map)
    if not files:
        raise SizeUnknown("the snapshot has no safetensors weights")
    return sum(header_tensor_bytes(os.path.join(snap, n)) for n in files), len(files)


def hub_next_link(header):
    m = re.search(r'<([^>]+)>\s*;\s*rel="next"', header or "")
    return m.group(1) if m else None


def hub_get(url, token, timeout):
    headers = {"Authorization": "Bearer " + token} if token else {}
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def hub_weight_bytes(model, token, endpoint=None, revision="main", timeout=30):
    """(bytes, files) of the safetensors vLLM would load, from the hub's listing; SizeUnknown when it cannot be read."""
    endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or HUB_ENDPOINT_DEFAULT).rstrip("/")
    url = "%s/api/models/%s/tree/%s?recursive=true" % (endpoint, model, urllib.parse.quote(revision, safe=""))
    sizes = {}
    try:
        while url:
            with hub_get(url, token, timeout) as resp:
                for e in json.loads(resp.read(64 << 20)):
                    if e.get("type") == "file":
                        sizes[e["path"]] = int((e.get("lfs") or {}).get("size", e.get("size", 0)))
                url = hub_next_link(resp.headers.get("Link"))
        weight_map = None
        if SAFETENSORS_INDEX in sizes:
            # vLLM reads the same file to choose its shards (weight_utils.py download_safetensors_index_file_from_hf).
            with hub_get("%s/%s/resolve/%s/%s" % (endpoint, model, urllib.parse.quote(revision, safe=""), SAFETENSORS_INDEX), token, timeout) as resp:
                weight_map = json.loads(resp.read(64 << 20))["weight_map"]
    except urllib.error.HTTPError as e:
        raise SizeUnknown("the hub at %s answered %d" % (endpoint, e.code))
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as e:
        raise SizeUnknown("the hub at %s could not be read (%s)" % (endpoint, e))
    files = loaded_files(sizes, weight_map)
    if not files:
        raise SizeUnknown("the hub lists no safetensors weights for %s" % model)
    return sum(sizes[n] for n in files), len(files)


def fit_problem(host, model, weight_bytes, nfiles, fit, where):
    """Why WEIGHT_BYTES cannot fit the GPUs FIT describes, with the figures; None when they fit.
    FIT: tensorParallelSize, pipelineParallelSize, gpuMemoryUtilization, usableGiB (per GPU), reserveGiB (per GPU).
    The even split weights / (TP x PP) per GPU, as components/plan/memory.ts planMemory; a Spark has one GPU, so per GPU is
    per host."""
    ranks = fit["tensorParallelSize"] * fit["pipelineParallelSize"]
    total = weight_bytes / SIZE_GIB
    per_gpu = total / ranks
    share = fit["usableGiB"] * fit["gpuMemoryUtilization"]
    room = share - fit["reserveGiB"]
    if per_gpu <= room:
        return None
    need = math.ceil(total / room) if room > 0 else None
    return ("%s: %s has %.2f GiB of weights (%s, %d file%s): %.2f GiB per GPU under TP %d x PP %d, but each GPU "
            "holds %.2f GiB for them (gpuMemoryUtilization %s x %.2f GiB usable, less %s GiB reserve): the weights "
            "cannot fit. Nothing was %s. Use %s, a smaller quantization of the model, or raise "
            "spark-vllm:vllm.gpuMemoryUtilization"
            % (host, model, total, where, nfiles, "" if nfiles == 1 else "s", per_gpu, fit["tensorParallelSize"],
               fit["pipelineParallelSize"], room, fit["gpuMemoryUtilization"], fit["usableGiB"], fit["reserveGiB"],
               "downloaded or launched" if where.startswith("the hub") else "launched",
               "at least %d GPUs (hosts, with tensorParallelSize x pipelineParallelSize to match)" % need if need else "more hosts"))
