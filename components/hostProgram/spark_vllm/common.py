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


def ipv4_of_gid(gid):
    """The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d, as RoCE v2 GIDs of IPv4 addresses are), else None."""
    parts = (gid or "").strip().lower().split(":")
    if len(parts) != 8 or parts[:5] != ["0000"] * 5 or parts[5] != "ffff":
        return None
    word = int(parts[6], 16) << 16 | int(parts[7], 16)
    return ".".join(str(word >> s & 255) for s in (24, 16, 8, 0))
