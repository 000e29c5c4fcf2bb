# Output, failure and subprocess helpers every subcommand uses.
import subprocess
import sys

PROGRESS_EVERY = 10


def say(text):
    print(text, flush=True)


def fail(lines):
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    sys.exit(1)


def run(argv, timeout=30):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, "", str(e)


def read_file(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None
