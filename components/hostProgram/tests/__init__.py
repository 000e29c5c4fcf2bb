# Tests of the helper's modules, each alone. Run from the repository root:
#
#   python3 -m unittest discover -s components/hostProgram/tests -t components/hostProgram
#
# The modules read the TypeScript catalogs through spark_vllm/data.py. Unless SPARK_VLLM_DATA_FILE
# already names a JSON file, this writes toolsData() (components/plan/toolsProgram.ts) to a temporary
# one with the repository's node and tsx, so the tests always see the current catalogs.
import atexit
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURE_LOGS = os.path.join(ROOT, "tests", "fixtures", "logs")


def scratch_dir(test):
    """A temporary folder for one test, removed when it ends, passed or failed (named so CI's leftover check sees it)."""
    path = tempfile.mkdtemp(prefix="spark-vllm-pytest-")
    test.addCleanup(shutil.rmtree, path, True)
    return path


def _write_data():
    node = os.path.join(ROOT, "node_modules", ".bin", "node")
    script = "process.stdout.write(JSON.stringify(require('./components/plan/toolsProgram').toolsData()))"
    out = subprocess.run([node if os.path.exists(node) else "node", "--import", "tsx", "-e", script],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    fd, path = tempfile.mkstemp(prefix="spark-vllm-data-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(out)
    atexit.register(os.remove, path)
    os.environ["SPARK_VLLM_DATA_FILE"] = path


if not os.environ.get("SPARK_VLLM_DATA_FILE"):
    _write_data()
