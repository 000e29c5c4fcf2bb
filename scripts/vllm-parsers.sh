#!/usr/bin/env bash
# Installs real vLLM from PyPI, one venv per version, for tests/unit/plan/vllm-parser.test.ts: each venv holds what
# importing `vllm serve`'s argument parser needs (scripts/vllm-parsers-<version>.txt, every package pinned, installed
# with --no-deps), and scripts/vllm-parsers.py runs in it. Idempotent: a venv whose stamp matches its pin file is kept.
#
# Versions: the oldest and the newest vLLM of the known-images table (components/knowledge/images.ts KNOWN_IMAGES) that PyPI
# carries: 0.10.1.1 (nvcr.io/nvidia/vllm:25.09-py3) and 0.20.1 (nvcr.io/nvidia/vllm:26.05-py3).
#
# Where: $SPARK_VLLM_PARSERS_DIR, default ${XDG_CACHE_HOME:-$HOME/.cache}/spark-vllm/vllm-parsers/<version>.
# Needs python3 (3.11, the interpreter the pin files were made with: Debian 12's) with venv (python3-venv on Debian).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSIONS=(0.10.1.1 0.20.1)
ROOT="${SPARK_VLLM_PARSERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-vllm/vllm-parsers}"
PYTHON="${PYTHON:-python3}"

for v in "${VERSIONS[@]}"; do
    pins="scripts/vllm-parsers-$v.txt"
    dir="$ROOT/$v"
    stamp="$(sha256sum "$pins" | cut -c1-16) $("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    if [ -f "$dir/.spark-vllm-stamp" ] && [ "$(cat "$dir/.spark-vllm-stamp")" = "$stamp" ]; then
        echo "vllm-parsers: vLLM $v ready in $dir"
        continue
    fi
    echo "vllm-parsers: installing vLLM $v into $dir ..."
    start=$SECONDS
    rm -rf "$dir"
    mkdir -p "$ROOT"
    "$PYTHON" -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check --no-deps --no-input -r "$pins"
    # The proof that the venv serves its purpose: the parser imports and builds.
    echo '{}' | "$dir/bin/python" scripts/vllm-parsers.py >/dev/null
    echo "$stamp" > "$dir/.spark-vllm-stamp"
    echo "vllm-parsers: vLLM $v installed in $((SECONDS - start)) s, $(du -sh "$dir" | cut -f1)"
done
