# host-owner: which stack holds this host (issue 15, shared hosts). Every container spark-vllm creates carries its
# owner's labels (components/plan/ownership.ts); "since" is the container's Created time, which Docker records on the host
# when the container is made (a time in a label would change every run). A host another stack holds is refused
# before anything of ours is written or created, naming that stack, its model, since when, and the fix.
import json

from spark_vllm.common import fail, run, say

# Keep in step with OWNER_LABELS in components/plan/ownership.ts (tests/unit/plan/ownership.test.ts checks).
LABELS = {"project": "spark-vllm.project", "stack": "spark-vllm.stack", "model": "spark-vllm.model",
          "servedName": "spark-vllm.served-name"}


def labelled_containers(runner=None):
    """`docker inspect` of every container, running or not, with a stack label; None when Docker cannot be asked."""
    run_ = runner or run
    code, ids, _ = run_(["docker", "ps", "-aq", "--filter", "label=" + LABELS["stack"]])
    if code != 0:
        return None
    ids = ids.split()
    if not ids:
        return []
    code, out, _ = run_(["docker", "inspect"] + ids)
    try:
        return json.loads(out) if code == 0 else None
    except ValueError:
        return None


def other_holders(containers, owner):
    """The stacks other than `owner` holding containers here, oldest first: project, stack, model, since, containers."""
    groups = {}
    for c in containers:
        labels = (c.get("Config") or {}).get("Labels") or {}
        key = (labels.get(LABELS["project"], ""), labels.get(LABELS["stack"], ""))
        if key == (owner["project"], owner["stack"]):
            continue
        g = groups.setdefault(key, {"project": key[0], "stack": key[1], "model": None, "servedName": None, "since": None,
                                    "containers": []})
        # The model is on every container, the served name on the endpoint proxy's (components/plan/ownership.ts).
        g["model"] = g["model"] or labels.get(LABELS["model"])
        g["servedName"] = g["servedName"] or labels.get(LABELS["servedName"])
        g["containers"].append((c.get("Name") or "").lstrip("/"))
        created = c.get("Created") or ""
        if created and (g["since"] is None or created < g["since"]):
            g["since"] = created
    return sorted(groups.values(), key=lambda g: (g["since"] or "", g["project"], g["stack"]))


def since_text(created):
    """Docker's Created (RFC 3339 in UTC, nanoseconds) as `2026-12-01 04:10:00 UTC`."""
    return created[:19].replace("T", " ") + " UTC" if created else "an unknown time"


def refusal(host, owner, h):
    same = h["project"] == owner["project"]
    who = "stack %s" % h["stack"] if same else "stack %s of project %s" % (h["stack"], h["project"])
    fix = "pulumi destroy -s %s" % h["stack"]
    where = "" if same else " in project %s" % h["project"]
    serving = "model %s" % (h["model"] or "unknown") + (", served as %s" % h["servedName"] if h["servedName"] else "")
    return ("%s: held by %s (%s) since %s (containers %s): run `%s`%s first to switch this host to stack %s, "
            "or give stack %s other hosts"
            % (host, who, serving, since_text(h["since"]), ", ".join(sorted(h["containers"])), fix, where,
               owner["stack"], owner["stack"]))


def ownership_problems(host, owner, runner=None):
    """One refusal line per other stack holding this host; none when Docker cannot be asked (preflight says why)."""
    containers = labelled_containers(runner)
    return [refusal(host, owner, h) for h in other_holders(containers or [], owner)]


def host_owner(args):
    """Before the helper program is installed: refuse a host another stack holds."""
    problems = ownership_problems(args["host"], args["owner"])
    if problems:
        fail(problems)
    say(json.dumps({"host": args["host"], "owner": "%s/%s" % (args["owner"]["project"], args["owner"]["stack"])}))
