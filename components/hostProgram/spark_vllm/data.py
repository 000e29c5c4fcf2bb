# The catalogs that cross from TypeScript (components/plan/toolsProgram.ts toolsData()):
# {"diagnosis": {"catalog", "syntax"[, "maxLineChars"]}, "firstVllm": {architecture: version}}.
#
# In the shipped file they are the global SPARK_VLLM_DATA, one generated line of JSON.
# Run from the source tree (tests), they are read from the JSON file named by the
# environment variable SPARK_VLLM_DATA_FILE.
import json
import os

_loaded = []


def data():
    if not _loaded:
        shipped = globals().get("SPARK_VLLM_DATA")
        if shipped is not None:
            _loaded.append(shipped)
        else:
            path = os.environ.get("SPARK_VLLM_DATA_FILE")
            if not path:
                raise RuntimeError("no SPARK_VLLM_DATA: run the joined spark_vllm_tools.py, or set SPARK_VLLM_DATA_FILE "
                                   "to a JSON file holding toolsData() from components/plan/toolsProgram.ts")
            with open(path) as f:
                _loaded.append(json.load(f))
    return _loaded[0]
