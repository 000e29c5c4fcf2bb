# gid: the NCCL_IB_GID_INDEX of this host, read from its sysfs when an NCCL process starts (issue 47).
#
# What NCCL does itself (NVIDIA/nccl v2.28.9-1 src/transport/net_ib.cc; v2.30.7-1 src/transport/net_ib/connect.cc
# is the same): NCCL_IB_GID_INDEX defaults to -1 (NCCL_PARAM IbGidIndex). ncclIbGetGidIndex, called for every
# device and port a communicator uses, returns a value >= 0 as it is, for every RoCE device of the process. Unset,
# it scans the port's GID table from index 1 up (ncclUpdateGidIndex) for NCCL_IB_ADDR_FAMILY (default AF_INET),
# NCCL_IB_ROCE_VERSION_NUM (default 2) and NCCL_IB_ADDR_RANGE (default none), reading each candidate's
# gid_attrs/types/N from sysfs, and keeps the FIRST RoCE v2 IPv4-mapped GID. Before 2.21.5 the default was 0, the
# link-local RoCE v1 GID (v2.20.3-1 src/transport/net_ib.cc: NCCL_PARAM(IbGidIndex, "IB_GID_INDEX", 0)).
#
# Why an explicit per-host value is still right, though NCCL's guide says that from 2.21 it "should *not* be set"
# (v2.30.7-1 docs/userguide/source/troubleshooting/networking_troubleshooting.rst, against one value guessed from
# show_gids; a wrong one fails the queue pair, src/misc/ibvwrap.cc printIbModifyQpHint): NCCL's first RoCE v2 IPv4
# GID is the fabric address only when no other IPv4 address of the netdev sits below it in the table (a link-local 169.254 address, an old address left by a
# reconfiguration: the kernel adds a GID pair per address, so where ours lands moves with the interfaces' history;
# owners saw it at 3 on some kits and 5 on others). The index of the GID that carries spec hosts[].fabric.address is
# the one the peers route to, whatever NCCL's version; and with a value set NCCL skips its scan and the sysfs reads
# that can fail it with ncclSystemError ("NET/IB: open failed in ncclIbRoceGetVersionNum"). It is read when each
# process starts, never fixed in the container, since the table changes without the container changing.
#
# Twins: NCCL_IB_GID_INDEX is one value for every HCA of the process, and the fabric address sits on one HCA only
# (ConnectX-7 twins are on different subnets, preflight.py hca_problems); the twin's GID is its own address's. Each
# other HCA's index is NCCL's own choice for it (its first RoCE v2 IPv4 GID). When all agree, that index is set.
# When they differ, no single value is right for both (the wrong one on a twin fails its queue pair, ibvwrap.cc
# printIbModifyQpHint: "the incorrect GID index is forced by NCCL_IB_GID_INDEX"), so nothing is set and NCCL picks
# per HCA; that is the fabric address's GID too only when it is the first RoCE v2 IPv4 GID on its HCA, and the
# choice says so (`perHca`, `note`). No GID with the fabric address on any configured HCA: nothing is set, and
# `problem` says why (the fabric check fails on it; a launch runs on with NCCL's own choice and says so in its log).
#
# The launches call nccl_gid_exec through the pinned helper program (components/plan/launches.ts ncclGidExec); on its
# own, from components/hostProgram, JSON args then the argv to exec:
#
#   python3 -m spark_vllm.gid '{"address": "192.168.100.10", "hcas": ["rocep1s0f1", "roceP2p1s0f1"]}' PROGRAM ARGS...
import json
import os
import sys

from spark_vllm.common import ipv4_of_gid, read_file

GID_SYSFS = "/sys/class/infiniband"
GID_VARIABLE = "NCCL_IB_GID_INDEX"


def roce_v2_ipv4_gids(hca, root=GID_SYSFS):
    """Every RoCE v2 GID with an IPv4 address on HCA, by port then index (the kernel's IB core sysfs,
    Documentation/ABI/testing/sysfs-class-infiniband: ports/N/gids/M, ports/N/gid_attrs/types/M)."""
    found = []
    ports = os.path.join(root, hca, "ports")
    for port in sorted((p for p in os.listdir(ports) if p.isdigit()), key=int) if os.path.isdir(ports) else []:
        gids = os.path.join(ports, port, "gids")
        for index in sorted((i for i in os.listdir(gids) if i.isdigit()), key=int) if os.path.isdir(gids) else []:
            kind = read_file(os.path.join(ports, port, "gid_attrs", "types", index)) or ""
            address = ipv4_of_gid(read_file(os.path.join(gids, index)))
            if address and kind.lower() == "roce v2":
                found.append({"hca": hca, "port": int(port), "index": int(index), "address": address})
    return found


def gid_choice(hcas, address, root=GID_SYSFS):
    """What to set NCCL_IB_GID_INDEX to on this host: {index (None: leave it unset), fabricGid, perHca, problem, note}."""
    per_hca, fabric_gid = [], None
    for hca in hcas:
        gids = roce_v2_ipv4_gids(hca, root)
        mine = [g for g in gids if g["address"] == address]
        if mine and fabric_gid is None:
            fabric_gid = mine[0]
        chosen = mine[0] if mine else (gids[0] if gids else None)
        per_hca.append({"hca": hca, "index": chosen["index"] if chosen else None,
                        "address": chosen["address"] if chosen else None, "ncclFirst": gids[0]["index"] if gids else None})
    choice = {"index": None, "fabricGid": fabric_gid, "perHca": per_hca, "problem": None, "note": None}
    if fabric_gid is None:
        choice["problem"] = ("no RoCE v2 GID carries the fabric address %s on %s (%s): NCCL would pick a GID of its own; "
                             "check that spark-vllm:hosts[].fabric.hcas names the HCA of the fabric interface (ibdev2netdev) "
                             "and that the interface has the address (ip -br addr)"
                             % (address, ", ".join(hcas) or "no HCA", "; ".join(
                                 "%s: %s" % (h["hca"], "index %s = %s" % (h["index"], h["address"]) if h["address"]
                                             else "no RoCE v2 IPv4 GID") for h in per_hca) or "nothing read"))
        return choice
    indexes = sorted({h["index"] for h in per_hca if h["index"] is not None})
    if len(indexes) == 1:
        choice["index"] = indexes[0]
        return choice
    fabric_hca = next(h for h in per_hca if h["hca"] == fabric_gid["hca"])
    choice["note"] = ("the HCAs' RoCE v2 IPv4 GIDs sit at different indexes (%s) and NCCL_IB_GID_INDEX is one value per "
                      "process: left unset, so NCCL picks on each HCA its first RoCE v2 IPv4 GID%s"
                      % (", ".join("%s %s" % (h["hca"], h["index"]) for h in per_hca if h["index"] is not None),
                         "" if fabric_hca["ncclFirst"] == fabric_gid["index"] else
                         "; on %s that is index %s, not the fabric address's %s: remove the other IPv4 address from its "
                         "netdev" % (fabric_gid["hca"], fabric_hca["ncclFirst"], fabric_gid["index"])))
    return choice


def gid_line(choice, address):
    """One line for a log: what was set and why."""
    if choice["index"] is not None:
        g = choice["fabricGid"]
        return ("spark-vllm: %s=%d: %s port %d GID %d is RoCE v2 with the fabric address %s (read from %s)"
                % (GID_VARIABLE, choice["index"], g["hca"], g["port"], g["index"], address, GID_SYSFS))
    return "spark-vllm: %s not set: %s" % (GID_VARIABLE, choice["problem"] or choice["note"])


def nccl_gid_exec(args, argv, root=GID_SYSFS, environ=None, execvpe=os.execvpe):
    """Exec ARGV with NCCL_IB_GID_INDEX set to this host's choice (args: address, hcas); unset when there is none."""
    env = dict(os.environ if environ is None else environ)
    choice = gid_choice(args.get("hcas") or [], args.get("address") or "", root)
    env.pop(GID_VARIABLE, None)
    if choice["index"] is not None:
        env[GID_VARIABLE] = str(choice["index"])
    print(gid_line(choice, args.get("address")), file=sys.stderr, flush=True)
    execvpe(argv[0], argv, env)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: python3 -m spark_vllm.gid '{\"address\": ..., \"hcas\": [...]}' PROGRAM [ARGS...]", file=sys.stderr)
        sys.exit(2)
    nccl_gid_exec(json.loads(sys.argv[1]), sys.argv[2:])
