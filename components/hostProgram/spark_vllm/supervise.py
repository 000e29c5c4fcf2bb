# The supervisor: the main process of every vLLM container (components/plan/containers.ts containerPlan). It re-runs what the
# launch commands declared, so a rebooted host or a dead Ray/vLLM process comes back without a person.
#
# A launch (components/plan/launches.ts) writes a record, RECORDS_DIR/<name>.json, after it started its process: the exact
# argv, where its output goes, how to tell that it runs, what must run first. Never a secret: a secret the relaunch
# needs is named by the 0600 file the launch already wrote it to (secretEnv). Deleting the launch removes the record
# first, so a destroyed stack never comes back. The container's file system survives a reboot (Docker restarts the
# same container under `restart: unless-stopped`), a replaced container starts without records.
#
# A record is only relaunched once the launch it came from was proven (`<name>.proven`): vLLM answered /health, or the
# process ran provenAfterSeconds. A first launch that fails belongs to `pulumi up`, whose probe diagnoses the log that a
# relaunch would rotate away. A relaunch that dies before it is proven again counts as a failure; failures back off
# (5 s doubling to 300 s) and after MAX_FAILURES the supervisor stops, writes `<name>.failed` with the diagnosis of the
# log, and says so: a crash loop ends in a diagnosis, never in a hot loop. A new launch clears both files.
#
# The memory guard (issue 47): on a GB10 the GPU allocates from the same memory as the host, and when the host runs out
# the NVIDIA driver's allocations fail (`NVRM: ... Out of memory [NV_ERR_NO_MEMORY]`) and the host can wedge until a
# power cycle (NVIDIA/dgx-spark-playbooks#97, NVIDIA/open-gpu-kernel-modules#1358). Each pass reads /proc/meminfo's
# MemAvailable (a container shares the host's /proc/meminfo: no memory limit is set on it); below `floorBytes` every
# launch of this container that runs is stopped (vLLM by its process group, Ray by `ray stop --force`, as the launch's
# own delete does: components/plan/hostCommands.ts rayLaunch) and marked `<name>.failed` with the figures, so it is not
# relaunched into the same state: `spark-vllm status` shows why, and only a new launch clears it.
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from spark_vllm.common import read_file, say
from spark_vllm.diagnosis import diagnose
from spark_vllm.memory import GIB
from spark_vllm.probes import process_state

MAX_FAILURES = 5
BACKOFF_SECONDS = (5, 300)
# After a relaunch, how long a process may take to show up before it counts as dead again.
RELAUNCH_GRACE_SECONDS = 10
# Lines about a record that waits (its gate, another record) are repeated at most this often.
WAIT_SAY_EVERY = 30
MEMINFO = "/proc/meminfo"
# How long a stopped launch gets between SIGTERM and SIGKILL (vLLM's own shutdown frees its memory on SIGTERM).
GUARD_STOP_SECONDS = 10


def log(text):
    say("spark-vllm supervise: %s" % text)


def parse_launch_record(text):
    """A record and its digest from its text as read_file gives it (stripped); (None, None) when absent or not JSON."""
    if text is None:
        return None, None
    try:
        return json.loads(text), hashlib.sha256(text.encode()).hexdigest()
    except ValueError:
        return None, None


def read_launch_record(directory, name):
    return parse_launch_record(read_file(os.path.join(directory, name + ".json")))


def marker_matches(text, digest):
    """Whether a marker (its text as read_file gives it) belongs to the record with DIGEST: its first line is that
    digest. A marker left by an older launch of the same name does not count."""
    return text is not None and text.split("\n")[0] == digest


def record_names(directory):
    try:
        names = [f[:-5] for f in os.listdir(directory) if f.endswith(".json") and not f.startswith(".")]
    except OSError:
        return []
    # What must run first comes first (Ray before vLLM); otherwise by name, so the order is stable.
    return sorted(names)


def comm_running(name, proc="/proc"):
    """Whether a process whose command name (/proc/PID/comm) is `name` runs (Ray's daemons: raylet, gcs_server)."""
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return False
    for p in pids:
        if (read_file("%s/%s/comm" % (proc, p)) or "") != name:
            continue
        stat = read_file("%s/%s/stat" % (proc, p)) or ""
        if ")" in stat and stat.rsplit(")", 1)[1].split()[:1] not in (["Z"], ["X"]):
            return True
    return False


def tcp_open(address, timeout=2):
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
        return True
    except OSError:
        return False


def http_ok(url, timeout=3):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200
    except Exception:
        return False


def start_time(pid, proc="/proc"):
    stat = read_file("%s/%d/stat" % (proc, pid)) or ""
    return stat.rsplit(")", 1)[1].split()[19] if ")" in stat else ""


def meminfo_available_bytes(path=MEMINFO):
    """MemAvailable of /proc/meminfo in bytes (the kernel prints kB: Documentation/filesystems/proc.rst), else None."""
    for line in (read_file(path) or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "MemAvailable:" and parts[1].isdigit():
            return int(parts[1]) * 1024
    return None


def guard_hint(available, floor):
    return ("this host's MemAvailable fell to %.1f GiB, below the memory guard's floor of %.1f GiB "
            "(spark-vllm:memoryGuard.floorGiB), so the supervisor stopped what it runs before the GPU driver runs out "
            "of memory and the host wedges. Lower spark-vllm:vllm.gpuMemoryUtilization or vllm.maxModelLen, stop other "
            "programs on the host, and drop the page cache; then run the `pulumi up --replace` that `spark-vllm status` "
            "prints." % (available / GIB, floor / GIB))


def stop_process_group(pid_file, proc="/proc", wait=GUARD_STOP_SECONDS, sleep=time.sleep):
    """SIGTERM to the session of the process PID_FILE names (a launch starts it with setsid, as its leader: scripts.ts
    detachedLaunch; a relaunch with start_new_session), SIGKILL after WAIT seconds, as scripts.ts stopByPidFile does.
    A stale pid file (another start time) signals nothing."""
    pid, state = process_state(pid_file, proc)
    if state != "running":
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except OSError:
        return
    for _ in range(int(wait * 10)):
        if process_state(pid_file, proc)[1] != "running":
            return
        sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def backoff(failures):
    base, cap = BACKOFF_SECONDS
    return min(cap, base * 2 ** max(0, failures - 1))


class Supervisor:
    def __init__(self, directory, proc="/proc", clock=time.time, backoff_fn=backoff, floor_bytes=0, meminfo=MEMINFO,
                 stop_ray=None):
        self.dir = directory
        self.floor = floor_bytes
        self.meminfo = meminfo
        self.stop_ray = stop_ray or (lambda: subprocess.run(["ray", "stop", "--force"], stdin=subprocess.DEVNULL,
                                                            capture_output=True, timeout=60))
        self.proc = proc
        self.clock = clock
        self.backoff = backoff_fn
        self.children = {}
        # Per record name: digest, failures, when it may be relaunched, when it was relaunched, when it was seen up.
        self.state = {}
        self.said = {}

    # ------------------------------------------------------------------ what runs
    def running(self, rec):
        if rec.get("pidFile"):
            return process_state(rec["pidFile"], self.proc)[1] == "running"
        return comm_running(rec["process"], self.proc)

    def marker(self, name, kind):
        return os.path.join(self.dir, "%s.%s" % (name, kind))

    def marked(self, name, kind, digest):
        return marker_matches(read_file(self.marker(name, kind)), digest)

    def mark(self, name, kind, digest, detail=None):
        tmp = self.marker(name, kind) + ".tmp"
        with open(tmp, "w") as f:
            f.write(digest + "\n" + (json.dumps(detail) + "\n" if detail is not None else ""))
        os.replace(tmp, self.marker(name, kind))

    def serving(self, rec, since):
        """Up as its launch meant it: /health answers 200, or it has run provenAfterSeconds."""
        if rec.get("healthUrl"):
            return http_ok(rec["healthUrl"])
        return self.clock() - since >= rec.get("provenAfterSeconds", 0)

    def say_waiting(self, name, text):
        now = self.clock()
        last = self.said.get(name)
        if last is None or last[0] != text or now - last[1] >= WAIT_SAY_EVERY:
            log("%s: %s" % (name, text))
            self.said[name] = (text, now)

    def gate_open(self, rec):
        gate = rec.get("gate")
        if not gate:
            return True, ""
        if gate.get("tcp"):
            return tcp_open(gate["tcp"]), "waiting for %s to answer" % gate["tcp"]
        try:
            p = subprocess.run(gate["argv"], capture_output=True, text=True, timeout=gate.get("timeoutSeconds", 30))
            last = (p.stdout.strip().splitlines() or p.stderr.strip().splitlines() or [""])[-1]
            return p.returncode == 0, "waiting: %s" % last[:200]
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, "waiting: %s" % e

    # ------------------------------------------------------------------ relaunch
    def environment(self, rec):
        env = dict(os.environ)
        for var, path in (rec.get("secretEnv") or {}).items():
            value = read_file(path)
            if not value:
                raise RuntimeError("the secret for %s is not in %s" % (var, path))
            env[var] = value
        return env

    def relaunch(self, name, rec):
        env = self.environment(rec)
        for argv in rec.get("before") or []:
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=120, env=env)
        if rec.get("pidFile"):
            if os.path.exists(rec["log"]):
                os.replace(rec["log"], rec["log"] + ".prev")
            with open(rec["log"], "ab") as out:
                child = subprocess.Popen(rec["argv"], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=env)
            self.children[name] = child
            with open(rec["pidFile"], "w") as f:
                f.write("%d %s\n" % (child.pid, start_time(child.pid, self.proc)))
            log("%s: relaunched, pid %d, log %s" % (name, child.pid, rec["log"]))
            return True
        with open(rec["log"], "ab") as out:
            code = subprocess.run(rec["argv"], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=120, env=env).returncode
        log("%s: relaunched, exit %d, log %s" % (name, code, rec["log"]))
        return code == 0

    def give_up(self, name, rec, digest, failures):
        text = ""
        for path in (rec["log"], rec["log"] + ".prev"):
            text = read_file(path) or ""
            if text:
                break
        found = diagnose(text) if text else None
        self.mark(name, "failed", digest, {"failures": failures, "diagnosis": found, "log": rec["log"]})
        why = ("%s: %s (hint: %s)" % (found["kind"], found["line"], found["hint"])) if found else \
            "no known cause in the log; read it"
        log("%s: died %d times in a row after relaunch; not relaunching it again. Diagnosis: %s. Log: %s. "
            "Fix the cause, then run the `pulumi up --replace` that `spark-vllm status` prints (for vllm every host's "
            "memory gate, which drops the page cache first; for ray this host's Ray launch): only a new launch clears "
            "this." % (name, failures, why, rec["log"]))

    # ------------------------------------------------------------------ one pass
    def tick(self):
        for child in list(self.children.values()):
            child.poll()
        names = record_names(self.dir)
        records = {}
        for name in names:
            rec, digest = read_launch_record(self.dir, name)
            if rec is not None:
                records[name] = (rec, digest)
        for name in list(self.state):
            if name not in records:
                del self.state[name]
        if self.guard(records):
            return
        for name in sorted(records, key=lambda n: (len(records[n][0].get("after") or []), n)):
            self.tick_one(name, records)

    # ------------------------------------------------------------------ the memory guard
    def guard(self, records):
        """Below the floor: stop every running launch (vLLM first, then what it runs on) and mark it failed with the
        figures. True when it fired."""
        if not self.floor:
            return False
        available = meminfo_available_bytes(self.meminfo)
        if available is None or available >= self.floor:
            return False
        fired = False
        for name in sorted(records, key=lambda n: (-len(records[n][0].get("after") or []), n)):
            rec, digest = records[name]
            if self.marked(name, "failed", digest) or not self.running(rec):
                continue
            if rec.get("pidFile"):
                stop_process_group(rec["pidFile"], self.proc)
            else:
                self.stop_ray()
            hint = guard_hint(available, self.floor)
            line = "MemAvailable %.1f GiB < floor %.1f GiB" % (available / GIB, self.floor / GIB)
            self.mark(name, "failed", digest, {
                "failures": 0, "log": rec["log"],
                "guard": {"memAvailableBytes": available, "floorBytes": self.floor, "at": self.clock()},
                "diagnosis": {"kind": "memory-guard", "line": line, "hint": hint}})
            log("%s: stopped by the memory guard: %s. %s" % (name, line, hint))
            fired = True
        return fired

    def tick_one(self, name, records):
        rec, digest = records[name]
        st = self.state.get(name)
        if st is None or st["digest"] != digest:
            st = self.state[name] = {"digest": digest, "failures": 0, "next": 0.0, "relaunched": None, "up": None}
        now = self.clock()
        if self.running(rec):
            if st["up"] is None:
                st["up"] = now
            if self.serving(rec, st["up"]):
                if not self.marked(name, "proven", digest):
                    self.mark(name, "proven", digest)
                if st["relaunched"] is not None:
                    log("%s: serving again" % name)
                    st["relaunched"], st["failures"] = None, 0
            return
        st["up"] = None
        if not self.marked(name, "proven", digest) or self.marked(name, "failed", digest):
            return
        if st["relaunched"] is not None:
            if now - st["relaunched"] < RELAUNCH_GRACE_SECONDS:
                return
            st["relaunched"] = None
            st["failures"] += 1
            if st["failures"] >= MAX_FAILURES:
                self.give_up(name, rec, digest, st["failures"])
                return
            st["next"] = now + self.backoff(st["failures"])
            log("%s: died again after relaunch (%d in a row); next try in %d s" % (
                name, st["failures"], st["next"] - now))
        if now < st["next"]:
            return
        for first in rec.get("after") or []:
            other = records.get(first)
            if other is not None and not self.running(other[0]):
                self.say_waiting(name, "waiting for %s to run" % first)
                return
        ok, why = self.gate_open(rec)
        if not ok:
            self.say_waiting(name, why)
            return
        with open(os.path.join(self.dir, ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            again, again_digest = read_launch_record(self.dir, name)
            if again is None or again_digest != digest or self.running(rec):
                return
            log("%s: not running; relaunching %s" % (name, " ".join(rec["argv"])))
            try:
                started = self.relaunch(name, rec)
            except Exception as e:  # a missing secret, a binary gone: counted like a crash
                log("%s: relaunch failed: %s" % (name, e))
                started = False
            st["relaunched"] = now
            if not started:
                st["relaunched"] = None
                st["failures"] += 1
                if st["failures"] >= MAX_FAILURES:
                    self.give_up(name, rec, digest, st["failures"])
                else:
                    st["next"] = now + self.backoff(st["failures"])


def supervise(args):
    directory = args["dir"]
    interval = args.get("intervalSeconds", 2)
    floor = int(args.get("memoryFloorBytes") or 0)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    sup = Supervisor(directory, floor_bytes=floor)
    log("watching %s every %g s%s" % (directory, interval, ", memory guard at MemAvailable < %.1f GiB" % (floor / GIB)
                                      if floor else ", no memory guard"))
    while True:
        try:
            sup.tick()
        except Exception as e:  # the container's main process: it must outlive any one bad pass
            print("spark-vllm supervise: pass failed: %r" % (e,), file=sys.stderr, flush=True)
        time.sleep(interval)
