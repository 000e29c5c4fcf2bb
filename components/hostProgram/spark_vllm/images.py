# image-transfer: on the head, copies the image to one worker over the fabric (docker save | ssh docker load).
import json
import subprocess
import time

from spark_vllm.common import PROGRESS_EVERY, fail, run, say


def image_id(argv):
    code, out, _ = run(argv, timeout=60)
    return out.strip() if code == 0 and out.strip().startswith("sha256:") else None


def pinned_key_options(host_key):
    """OpenSSH (>= 8.5) options that accept HOST_KEY ("<type> <base64>") and no other key, with no file: the same as the
    Docker provider's (components/spec/hostKeys.ts openSshPinnedKeyOptions, where the sources are cited). Without one, the
    head's own known_hosts decides, and batch mode refuses a host it does not know."""
    if not host_key:
        return []
    return ["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=none", "-o", "GlobalKnownHostsFile=none",
            "-o", "HostKeyAlgorithms=" + host_key.split(" ")[0], "-o", "KnownHostsCommand=/bin/echo * " + host_key]


def image_transfer(args):
    image, target = args["image"], args["target"]
    ssh = (["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"] + pinned_key_options(target.get("hostKey"))
           + ["%s@%s" % (target["user"], target["address"])])
    inspect = ["docker", "image", "inspect", "--format", "{{.Id}}", image]
    have = image_id(inspect)
    if not have:
        fail(["%s: image %s is not on the head: build or pull it there first" % (args["host"], image)])
    code, _, err = run(ssh + ["true"])
    if code != 0:
        fail(["%s: cannot ssh to %s@%s over the fabric (%s): the head needs key access to every worker for "
              "spark-vllm:imageSource: head" % (args["host"], target["user"], target["address"], err.strip())])
    theirs = image_id(ssh + inspect)
    if theirs == have:
        say("%s already holds %s (%s): skipped" % (target["name"], image, have))
    else:
        started = time.time()
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.Popen(ssh + ["docker", "load"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        sent, next_progress = 0, started + PROGRESS_EVERY
        for chunk in iter(lambda: save.stdout.read(1 << 20), b""):
            load.stdin.write(chunk)
            sent += len(chunk)
            if time.time() >= next_progress:
                say("%s: sent %.2f GB to %s (%.0f MB/s)" % (args["host"], sent / 1e9, target["name"],
                                                          sent / 1e6 / (time.time() - started)))
                next_progress += PROGRESS_EVERY
        load.stdin.close()
        out = load.stdout.read().decode(errors="replace")
        if save.wait() != 0 or load.wait() != 0:
            fail(["%s: copying %s to %s failed: %s" % (args["host"], image, target["name"], out.strip()[-500:])])
        say("%s: sent %.2f GB to %s in %d s" % (args["host"], sent / 1e9, target["name"], time.time() - started))
        theirs = image_id(ssh + inspect)
    if theirs != have:
        fail(["%s: after the copy %s holds %s, not %s" % (args["host"], target["name"], theirs, have)])
    say(json.dumps({"host": target["name"], "imageId": theirs}))
