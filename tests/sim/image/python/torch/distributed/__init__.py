"""torch.distributed stand-in: init_process_group over TCP between hosts, NCCL's all_reduce and
barrier, destroy_process_group, for the fabric check (components/hostProgram/spark_vllm/fabric.py).

How it behaves, like torch 2.11 with NCCL 2.28.9 (the real run in tests/fixtures/nccl/):
- init_process_group("nccl", "tcp://ADDR:PORT" or "env://", rank, world_size, timeout): rank 0
  serves a store on ADDR:PORT and waits for every rank; the others connect, retrying until the
  timeout. NCCL itself starts lazily, at the first collective (as torch's ProcessGroupNCCL does).
- The first collective: rank 0 picks its bootstrap interface (NCCL's rules below) and sends the
  "unique id" through the store; each other rank gets it, then picks its own interface. A rank
  that finds none prints NCCL's WARN and raises torch's DistBackendError; rank 0 dying makes the
  others raise the store error; rank 0 waits for the others without a timeout, as NCCL's
  bootstrap does (the fabric check's own timeout ends it).
- The network: IB when NCCL_IB_DISABLE is not 1 and the HCAs exist, else sockets; the lines it
  prints are NCCL's, in the order the real logs show (tests/fixtures/nccl/*.nccl.log).
- Data: a tensor is a size and one value; all_reduce sums the values through rank 0 and then
  sleeps as long as the link needs for the bytes (nccl-tests' all-reduce bus traffic, 2(n-1)/n × S).

Fault switches ($HF_HOME/sim-faults.json, simcommon.faults), per host:
  iface_missing   true: NCCL finds no socket interface (bootstrap fails as NCCL_SOCKET_IFNAME would)
  hca_missing     true: no HCA found (`NET/IB : No device found.`, then sockets); or a list of HCA
                  names that are missing (the others are found)
  slow_link_gbps  the fabric link's rate in Gb/s (default 200, a Spark's ConnectX-7 port)
NCCL_DEBUG=INFO prints INFO and WARN lines, WARN only WARN lines, to NCCL_DEBUG_FILE (%h, %p
expanded) or stdout.
"""
import array
import fcntl
import json
import os
import socket
import struct
import sys
import threading
import time
from datetime import timedelta

import simcommon as sc

NCCL_VERSION = "2.28.9+cuda13.0"   # tests/fixtures/nccl/*.nccl.log
CUDA_DRIVER_VERSION = 13000        # `cudaDriverVersion 13000` in the same logs (driver 580, CUDA 13.0)
DEFAULT_LINK_GBPS = 200.0          # DGX Spark: ConnectX-7, 200 Gb/s per port (NVIDIA DGX Spark hardware overview)
SOCKET_BUSBW_GBPS = 4.2            # NCCL over TCP sockets, real: tests/fixtures/nccl/socket.out at 256 MiB
SPARK_HCAS = ["rocep1s0f1", "roceP2p1s0f1"]   # DESIGN.md: a Spark's twin HCAs


class DistError(RuntimeError):
    pass


class DistBackendError(DistError):
    pass


class DistStoreError(DistError):
    pass


class DistNetworkError(DistError):
    pass


for _cls in (DistError, DistBackendError, DistStoreError, DistNetworkError):
    _cls.__module__ = "torch.distributed"


class ReduceOp:
    SUM = "sum"
    MAX = "max"
    MIN = "min"


_REDUCE = {ReduceOp.SUM: sum, ReduceOp.MAX: max, ReduceOp.MIN: min}
_pg = None


def is_available():
    return True


def is_nccl_available():
    return True


def is_initialized():
    return _pg is not None


def get_rank():
    return _group().rank


def get_world_size():
    return _group().world


def _group():
    if _pg is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return _pg


# ---------------------------------------------------------------- NCCL's log

class _NcclLog:
    """NCCL's debug output: `host:pid:tid [dev] NCCL INFO msg` (src/debug.cc)."""

    def __init__(self, device):
        level = (os.environ.get("NCCL_DEBUG") or "").upper()
        self.info, self.warn = level in ("INFO", "TRACE"), level in ("INFO", "TRACE", "WARN")
        # getHostName cuts at the first '.' (src/debug.cc).
        self.host = socket.gethostname().split(".")[0]
        self.device = device
        self.out = None
        path = os.environ.get("NCCL_DEBUG_FILE")
        if path and self.info:
            path = path.replace("%h", self.host).replace("%p", str(os.getpid()))
            try:
                self.out = open(path, "w", buffering=1)
            except OSError:
                self.out = None

    def _write(self, text):
        out = self.out or sys.stdout
        out.write(text)
        out.flush()

    def _prefix(self):
        return "%s:%d:%d [%d]" % (self.host, os.getpid(), threading.get_native_id(), self.device)

    def INFO(self, msg):
        if self.info:
            self._write("%s NCCL INFO %s\n" % (self._prefix(), msg))

    def WARN(self, where, msg):
        # A blank line, then a timestamped WARN (tests/fixtures/nccl/iface-missing.nccl.log).
        if self.warn:
            self._write("\n%s %s %s NCCL WARN %s\n" % (time.strftime("[%Y-%m-%d %H:%M:%S]"), self._prefix(), where, msg))


# ---------------------------------------------------------------- interfaces (NCCL's rules)

def _ipv4_interfaces():
    """(name, address) of running interfaces with an IPv4 address (SIOCGIFCONF / SIOCGIFFLAGS)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        buf = array.array("B", b"\0" * 40 * 64)
        size = struct.unpack("iL", fcntl.ioctl(s.fileno(), 0x8912, struct.pack("iL", len(buf), buf.buffer_info()[0])))[0]
        data = buf.tobytes()[:size]
        found = []
        for i in range(0, size, 40):
            name = data[i:i + 16].split(b"\0")[0]
            flags = struct.unpack("16sH", fcntl.ioctl(s.fileno(), 0x8913, struct.pack("16sH", name, 0)))[1]
            if flags & 0x40:  # IFF_RUNNING: NCCL only considers running interfaces
                found.append((name.decode(), socket.inet_ntoa(data[i + 20:i + 24])))
        return found
    finally:
        s.close()


def _match(spec, interfaces):
    """findInterfaces (src/misc/socket.cc): prefixes, `^` excludes, `=` exact."""
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    prefixes = [p.split(":")[0] for p in spec.split(",") if p]
    hit = lambda n: any(n == p if exact else n.startswith(p) for p in prefixes)  # noqa: E731
    return [(n, a) for n, a in interfaces if hit(n) != exclude]


def _pick_interface(log):
    """ncclFindInterfaces (src/misc/socket.cc): NCCL_SOCKET_IFNAME, else ib, else not docker/lo/virbr, ...

    Returns (name, address) or None; prints NCCL's NCCL_SOCKET_IFNAME lines."""
    if sc.faults().get("iface_missing"):
        return None
    env = os.environ.get("NCCL_SOCKET_IFNAME") or ""
    interfaces = _ipv4_interfaces()
    if len(env) > 1:
        log.INFO("NCCL_SOCKET_IFNAME set by environment to %s" % env)
        log.INFO("NCCL_SOCKET_IFNAME set to %s" % env)
        found = _match(env, interfaces)
    else:
        found = []
        for spec in ("ib", "^docker,lo,virbr", "docker", "lo", "virbr"):
            found = found or _match(spec, interfaces)
    return found[0] if found else None


# ---------------------------------------------------------------- the store (JSON lines over TCP)

class _Peer:
    def __init__(self, sock):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.rfile = sock.makefile("rb")

    def send(self, obj):
        self.sock.sendall((json.dumps(obj) + "\n").encode())

    def recv(self):
        line = self.rfile.readline()
        if not line:
            raise EOFError()
        return json.loads(line)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class _Group:
    def __init__(self, rank, world, addr, port, timeout):
        self.rank, self.world, self.timeout = rank, world, timeout
        self.addr, self.port = addr, port
        self.peers = {}
        self.server = None
        self.nccl = None
        if rank == 0:
            self._serve()
        else:
            self._connect()

    def _serve(self):
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((self.addr, self.port))
        srv.listen(64)
        self.server = srv
        deadline = time.time() + self.timeout
        while len(self.peers) < self.world - 1:
            srv.settimeout(max(0.05, deadline - time.time()))
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                # torch's TCPStore (pytorch test/distributed/test_store.py,
                # test_store_timeout_on_missing_clients); the server counts itself.
                raise DistStoreError("Timed out after %d seconds waiting for clients. %d/%d clients joined."
                                     % (self.timeout + 1, len(self.peers) + 1, self.world))
            conn.settimeout(None)
            peer = _Peer(conn)
            self.peers[peer.recv()["rank"]] = peer

    def _connect(self):
        deadline = time.time() + self.timeout
        while True:
            try:
                sock = socket.create_connection((self.addr, self.port), timeout=2)
                sock.settimeout(None)
                break
            except OSError:
                if time.time() >= deadline:
                    # vllm-project/vllm#19670: "torch.distributed.DistNetworkError: The client socket has
                    # timed out after 600000ms while trying to connect to (172.17.0.9, 46229)."
                    raise DistNetworkError("The client socket has timed out after %dms while trying to connect to "
                                           "(%s, %d)." % (self.timeout * 1000, self.addr, self.port))
                time.sleep(0.2)
        self.peers[0] = _Peer(sock)
        self.peers[0].send({"rank": self.rank})

    # ---- NCCL communicator, at the first collective

    def _nccl_error(self, log):
        # torch's exception after NCCL's bootstrap failure (tests/fixtures/nccl/iface-missing.rank.log).
        log.WARN("bootstrap.cc:114", "Bootstrap : no socket interface found")
        log.INFO("init.cc:126 -> 5")
        log.INFO("init.cc:160 -> 5")
        return DistBackendError(
            "NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3135, invalid usage (run with "
            "NCCL_DEBUG=WARN for details), NCCL version %s\nncclInvalidUsage: This usually reflects invalid usage of "
            "NCCL library.\nLast error:\nBootstrap : no socket interface found" % NCCL_VERSION.split("+")[0])

    def _init_nccl(self):
        from torch import cuda
        log = _NcclLog(cuda.current_device())
        if self.rank == 0:
            iface = _pick_interface(log)
            if iface is None:
                raise self._nccl_error(log)
            for peer in self.peers.values():
                peer.send({"uid": "%016x" % (hash((self.addr, self.port)) & (2 ** 64 - 1))})
        else:
            try:
                self.peers[0].recv()
            except (EOFError, OSError):
                # tests/fixtures/nccl/iface-missing-rank1.rank.log (without torch's C++ stack).
                raise DistBackendError(
                    "[%d] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value "
                    "store by key '0', but store->get('0') got error: Failed to recv, got 0 bytes. Connection was "
                    "likely closed. Did the remote server shutdown or crash?\n. This may indicate a possible "
                    "application crash on rank 0 or a network set up issue." % self.rank)
            iface = _pick_interface(log)
            if iface is None:
                raise self._nccl_error(log)
        name, address = iface
        log.INFO("Bootstrap: Using %s:%s<0>" % (name, address))
        log.INFO("cudaDriverVersion %d" % CUDA_DRIVER_VERSION)
        log.INFO("NCCL version %s" % NCCL_VERSION)
        log.INFO("Comm config Blocking set to 1")
        log.INFO("NET/Plugin: Could not find: libnccl-net.so")
        network, ndev = self._pick_network(log, name, address)
        # Everyone has set up its network before the channels connect (NCCL's bootstrap allgather).
        self._gather({"ready": True})
        self._channels(log, network, ndev)
        log.INFO("Connected all rings, use ring PXN 0 GDR 0")
        link = float(sc.faults().get("slow_link_gbps") or DEFAULT_LINK_GBPS) / 8.0
        self.nccl = {"log": log, "network": network, "GBps": link if network == "IB" else min(link, SOCKET_BUSBW_GBPS)}

    def _pick_network(self, log, iface, address):
        """(network, devices): IB if enabled and an HCA is found, else Socket; the lines of
        src/transport/net_ib.cc and src/plugin/net.cc, in the order of tests/fixtures/nccl/hca-missing.nccl.log."""
        if (os.environ.get("NCCL_IB_DISABLE") or "0").strip() != "1":
            # src/transport/net_ib.cc:677 returns before this when NCCL_IB_DISABLE=1.
            wanted = [h.split(":")[0] for h in (os.environ.get("NCCL_IB_HCA") or "").lstrip("=^").split(",") if h]
            if os.environ.get("NCCL_IB_HCA"):
                log.INFO("NCCL_IB_HCA set to %s" % os.environ["NCCL_IB_HCA"])
            missing = sc.faults().get("hca_missing")
            hcas = [h for h in (wanted or SPARK_HCAS)
                    if not (missing is True or (isinstance(missing, list) and h in missing))]
            if hcas:
                # src/transport/net_ib.cc: `NET/IB : Using%s %s; OOB %s:%s` with ` [%d]%s:%d/%s` per device.
                log.INFO("NET/IB : Using%s [RO]; OOB %s:%s<0>"
                         % ("".join(" [%d]%s:1/RoCE" % (i, h) for i, h in enumerate(hcas)), iface, address))
                log.INFO("Initialized NET plugin IB")
                log.INFO("Assigned NET plugin IB to comm")
                log.INFO("Using network IB")
                return "IB", len(hcas)
            log.INFO("NET/IB : No device found.")
            log.INFO("NET/IB : Using [RO]; OOB %s:%s<0>" % (iface, address))
        log.INFO("Failed to initialize NET plugin IB")
        log.INFO("NET/Socket : Using [0]%s:%s<0>" % (iface, address))
        log.INFO("Initialized NET plugin Socket")
        log.INFO("Assigned NET plugin Socket to comm")
        log.INFO("Using network Socket")
        return "Socket", 1

    def _channels(self, log, network, ndev):
        """A ring over the hosts, two channels spread over the network devices (tests/fixtures/nccl/socket.nccl.log)."""
        prev, nxt = (self.rank - 1) % self.world, (self.rank + 1) % self.world
        for c in range(2):
            log.INFO("Channel %02d/0 : %d[0] -> %d[0] [receive] via NET/%s/%d" % (c, prev, self.rank, network, c % ndev))
        for c in range(2):
            log.INFO("Channel %02d/0 : %d[0] -> %d[0] [send] via NET/%s/%d" % (c, self.rank, nxt, network, c % ndev))

    # ---- collectives through rank 0

    def _gather(self, item):
        """Rank 0 collects one item from everyone and answers each with the list; a dead peer hangs it."""
        try:
            if self.rank == 0:
                items = {0: item}
                for r, peer in self.peers.items():
                    items[r] = peer.recv()
                everything = [items[r] for r in range(self.world)]
                for peer in self.peers.values():
                    peer.send(everything)
                return everything
            self.peers[0].send(item)
            return self.peers[0].recv()
        except (EOFError, OSError):
            # A rank died: NCCL waits on its sockets forever; so does this stand-in.
            while True:
                time.sleep(3600)

    def all_reduce(self, tensor, op):
        if self.nccl is None:
            self._init_nccl()
        started = time.perf_counter()
        nbytes = tensor.numel() * tensor.element_size()
        items = self._gather({"v": tensor.item(), "GBps": self.nccl["GBps"]})
        tensor.fill_(_REDUCE[op]([i["v"] for i in items]))
        # The operation takes what the slowest link needs for the bus traffic, or the exchange's own
        # time where that is longer (small sizes: latency-bound, as real ones are).
        slowest = min(i["GBps"] for i in items)
        wire = nbytes * 2.0 * (self.world - 1) / self.world / (slowest * 1e9)
        time.sleep(max(0.0, wire - (time.perf_counter() - started)))

    def close(self):
        for peer in self.peers.values():
            peer.close()
        if self.server:
            self.server.close()


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    global _pg
    if _pg is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if (backend or "nccl") != "nccl":
        raise ValueError("the stand-in torch.distributed has the nccl backend only, not %r" % backend)
    init_method = init_method or "env://"
    if init_method == "env://":
        addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        rank = int(os.environ["RANK"]) if rank == -1 else rank
        world_size = int(os.environ["WORLD_SIZE"]) if world_size == -1 else world_size
    elif init_method.startswith("tcp://"):
        addr, _, port = init_method[len("tcp://"):].rpartition(":")
        addr, port = addr.strip("[]"), int(port)
    else:
        raise ValueError("the stand-in supports tcp:// and env:// init methods, not %r" % init_method)
    seconds = (timeout or timedelta(minutes=10)).total_seconds()
    _pg = _Group(int(rank), int(world_size), addr, port, int(seconds))


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    _group().all_reduce(tensor, op)


def barrier(group=None, async_op=False, device_ids=None):
    from torch import ones
    _group().all_reduce(ones(1), ReduceOp.SUM)


def destroy_process_group(group=None):
    global _pg
    if _pg is not None:
        _pg.close()
        _pg = None
