"""Pure parts of spark_vllm/fabric.py over the real NCCL logs in tests/fixtures/nccl/.

Run from the repository root:
  python3 -m unittest discover -s components/hostProgram/tests -t components/hostProgram
fabric.py is loaded by path, so this needs neither torch nor the package layout.
"""
import importlib.util
import json
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "nccl")

_spec = importlib.util.spec_from_file_location("spark_vllm_fabric_under_test",
                                               os.path.join(HERE, "..", "spark_vllm", "fabric.py"))
fabric = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fabric)


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def last_json(name):
    return json.loads(fixture(name).strip().splitlines()[-1])


HCAS = {"NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1"}


class ParseRealLogs(unittest.TestCase):
    def test_p2p_run(self):
        facts = fabric.parse_nccl_log(fixture("p2p.nccl.log"))
        self.assertEqual(facts["version"], "2.28.9+cuda13.0")
        self.assertEqual(facts["transport"], "P2P")
        self.assertEqual(facts["transports"], {"P2P/CUMEM": 24})
        # NCCL names its network even when every channel is P2P on one host.
        self.assertEqual(facts["network"], "Socket")
        self.assertEqual(facts["ibNoDevice"], "vm:641:641 [0] NCCL INFO NET/IB : No device found.")
        self.assertEqual(facts["warnings"], [])
        self.assertIsNone(facts["bootstrapError"])

    def test_socket_runs(self):
        for name in ("socket.nccl.log", "socket-lo.nccl.log", "hca-missing-net.nccl.log"):
            facts = fabric.parse_nccl_log(fixture(name))
            self.assertEqual(facts["transport"], "NET/Socket", name)
            self.assertEqual(facts["transports"], {"NET/Socket/0": 4}, name)
            directions = sorted(c["direction"] for c in facts["channels"])
            self.assertEqual(directions, ["receive", "receive", "send", "send"], name)
        lo = fabric.parse_nccl_log(fixture("socket-lo.nccl.log"))
        self.assertIn("NET/Socket : Using [0]lo:127.0.0.1<0>", " ".join(lo["socketLines"]))

    def test_hca_missing(self):
        facts = fabric.parse_nccl_log(fixture("hca-missing.nccl.log"))
        self.assertEqual(facts["ibHcaLine"], "vm:941:941 [0] NCCL INFO NCCL_IB_HCA set to rocep1s0f1,roceP2p1s0f1")
        self.assertEqual(facts["ibPluginFailed"], "vm:941:941 [0] NCCL INFO Failed to initialize NET plugin IB")
        self.assertEqual(fabric.key_lines(facts), [
            "vm:941:941 [0] NCCL INFO NCCL_IB_HCA set to rocep1s0f1,roceP2p1s0f1",
            "vm:941:941 [0] NCCL INFO NET/IB : No device found.",
            "vm:941:941 [0] NCCL INFO Failed to initialize NET plugin IB",
            "vm:941:941 [0] NCCL INFO Using network Socket",
        ])

    def test_bootstrap_failure(self):
        facts = fabric.parse_nccl_log(fixture("iface-missing.nccl.log"))
        self.assertEqual(facts["bootstrapError"],
                         "[2026-11-30 21:39:41] vm:1140:1140 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found")
        self.assertIsNone(facts["transport"])
        self.assertEqual(facts["channels"], [])

    def test_transport_class(self):
        self.assertEqual(fabric.transport_class("NET/IB/0/GDRDMA"), "NET/IB")
        self.assertEqual(fabric.transport_class("NET/Socket/1"), "NET/Socket")
        self.assertEqual(fabric.transport_class("P2P/CUMEM"), "P2P")
        self.assertEqual(fabric.transport_class("SHM/direct/direct"), "SHM")
        self.assertEqual(fabric.summarise_transport({"P2P": 2, "NET/IB": 2}), "NET/IB+P2P")
        self.assertIsNone(fabric.summarise_transport({}))


class Policy(unittest.TestCase):
    def test_fallback_fails_when_hcas_configured(self):
        for name in ("hca-missing.nccl.log", "hca-missing-net.nccl.log"):
            facts = fabric.parse_nccl_log(fixture(name))
            lines = fabric.socket_fallback_problem(facts, fabric.configured_hcas(HCAS), HCAS, "spark-b")
            text = "\n".join(lines)
            self.assertTrue(lines[0].startswith("spark-b: NCCL used TCP sockets although HCAs are configured"))
            self.assertIn("NCCL INFO NET/IB : No device found.", text)
            self.assertIn("NCCL INFO Using network Socket", text)
            self.assertIn("rocep1s0f1, roceP2p1s0f1", text)
        net = fabric.socket_fallback_problem(fabric.parse_nccl_log(fixture("hca-missing-net.nccl.log")),
                                             ["rocep1s0f1"], HCAS, "spark-b")
        self.assertIn("[receive] via NET/Socket/0", "\n".join(net))

    def test_no_failure_without_hcas_or_with_ib(self):
        facts = fabric.parse_nccl_log(fixture("socket.nccl.log"))
        self.assertIsNone(fabric.socket_fallback_problem(facts, [], {}, "spark-a"))
        ib = {"network": "IB", "transportClasses": {"NET/IB": 4}}
        self.assertIsNone(fabric.socket_fallback_problem(ib, ["rocep1s0f1"], HCAS, "spark-a"))

    def test_ib_disable_named(self):
        facts = fabric.parse_nccl_log(fixture("hca-missing-net.nccl.log"))
        env = dict(HCAS, NCCL_IB_DISABLE="1")
        self.assertIn("NCCL_IB_DISABLE=1", "\n".join(fabric.socket_fallback_problem(facts, ["x"], env, "h")))

    def test_configured_hcas(self):
        self.assertEqual(fabric.configured_hcas(HCAS), ["rocep1s0f1", "roceP2p1s0f1"])
        self.assertEqual(fabric.configured_hcas({"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1"}), ["mlx5_0", "mlx5_1"])
        self.assertEqual(fabric.configured_hcas({"NCCL_IB_HCA": "^mlx5_1"}), [])
        self.assertEqual(fabric.configured_hcas({}), [])
        self.assertEqual(fabric.configured_hcas(HCAS, []), [])

    def test_bootstrap_failure_lines(self):
        cfg = {"host": "spark-a", "rank": 0, "worldSize": 2, "masterAddr": "192.168.100.10", "masterPort": 29551,
               "timeoutSeconds": 30, "env": {"NCCL_SOCKET_IFNAME": "enp1s0f1np1"}}
        facts = fabric.parse_nccl_log(fixture("iface-missing.nccl.log"))
        lines = fabric.failure_lines(facts, fixture("iface-missing.rank.log"), cfg, False)
        text = "\n".join(lines)
        self.assertIn("NCCL WARN Bootstrap : no socket interface found", text)
        self.assertIn("NCCL_SOCKET_IFNAME=enp1s0f1np1 matches no interface", text)
        self.assertIn("exception: torch.distributed.DistBackendError: NCCL error in:", text)

    def test_peer_of_failed_master(self):
        cfg = {"host": "spark-b", "rank": 1, "worldSize": 2, "masterAddr": "192.168.100.10", "masterPort": 29551,
               "timeoutSeconds": 30, "env": {}}
        facts = fabric.parse_nccl_log("")
        lines = fabric.failure_lines(facts, fixture("iface-missing-rank1.rank.log"), cfg, False)
        self.assertIn("rank 0 (on the master, 192.168.100.10:29551) failed before it shared NCCL's unique id", lines[0])

    def test_timeout_lines(self):
        cfg = {"host": "spark-b", "rank": 1, "worldSize": 2, "masterAddr": "192.168.100.10", "masterPort": 29551,
               "timeoutSeconds": 30, "env": {}}
        lines = fabric.failure_lines(fabric.parse_nccl_log(""), "", cfg, True)
        self.assertIn("did not finish within 30 s", lines[0])


class Bandwidth(unittest.TestCase):
    def test_formula(self):
        # nccl-tests doc/PERFORMANCE.md: busbw = algbw * 2(n-1)/n for AllReduce.
        algbw, busbw = fabric.bus_bandwidth(1e9, 1.0, 2)
        self.assertEqual((algbw, busbw), (1.0, 1.0))
        self.assertAlmostEqual(fabric.bus_bandwidth(1e9, 1.0, 4)[1], 1.5)
        self.assertEqual(fabric.bus_bandwidth(1, 0, 2), (None, None))

    def test_real_results(self):
        p2p = last_json("p2p.out")
        self.assertEqual(p2p["transport"], "P2P")
        self.assertEqual(p2p["ncclVersion"], "2.28.9+cuda13.0")
        self.assertEqual(p2p["torchVersion"], "2.11.0+cu130")
        self.assertEqual(set(p2p["busbwGBps"]), {"1MiB", "16MiB", "256MiB"})
        for r in p2p["results"]:
            _, busbw = fabric.bus_bandwidth(r["bytes"], r["timeUs"] / 1e6, 2)
            self.assertAlmostEqual(busbw, r["busbwGBps"], delta=r["busbwGBps"] * 0.01)
        sock = last_json("socket.out")
        self.assertEqual(sock["transport"], "NET/Socket")
        # NVLink vs sockets on the same two GPUs: two orders of magnitude.
        self.assertGreater(p2p["busbwGBps"]["256MiB"], 50 * sock["busbwGBps"]["256MiB"])

    def test_warning(self):
        sock = last_json("socket.out")["results"]
        warn = fabric.bandwidth_warning(sock, 200, 0.25, "spark-a")
        self.assertIn("spark-a: all-reduce bus bandwidth 4.20 GB/s at 256MiB is below 25% of the fabric link's line "
                      "rate (200 Gb/s = 25.0 GB/s)", warn)
        self.assertIsNone(fabric.bandwidth_warning(last_json("p2p.out")["results"], 200, 0.25, "spark-a"))
        self.assertIsNone(fabric.bandwidth_warning(sock, None, 0.25, "spark-a"))

    def test_size_label(self):
        self.assertEqual([fabric.size_label(n) for n in (1 << 20, 256 << 20, 1 << 30, 4096, 100)],
                         ["1MiB", "256MiB", "1GiB", "4KiB", "100B"])

    def test_link_from_sysfs(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "enp1s0f1np1"))
            with open(os.path.join(root, "enp1s0f1np1", "speed"), "w") as f:
                f.write("200000\n")
            os.makedirs(os.path.join(root, "veth0"))
            with open(os.path.join(root, "veth0", "speed"), "w") as f:
                f.write("-1\n")
            self.assertEqual(fabric.link_gbps_from_sysfs("enp1s0f1np1", root), 200.0)
            self.assertIsNone(fabric.link_gbps_from_sysfs("veth0", root))
            self.assertIsNone(fabric.link_gbps_from_sysfs("nope", root))
            self.assertIsNone(fabric.link_gbps_from_sysfs("", root))


class Arguments(unittest.TestCase):
    def test_explicit(self):
        cfg, problems = fabric.resolve({"rank": 1, "worldSize": 2, "masterAddr": "192.168.100.10",
                                        "masterPort": 29551, "linkGbps": 200}, dict(HCAS, NCCL_SOCKET_IFNAME="enp1s0f1np1"))
        self.assertEqual(problems, [])
        self.assertEqual(cfg["initMethod"], "tcp://192.168.100.10:29551")
        self.assertEqual(cfg["hcas"], ["rocep1s0f1", "roceP2p1s0f1"])
        self.assertEqual(cfg["env"], dict(HCAS, NCCL_SOCKET_IFNAME="enp1s0f1np1"))
        self.assertEqual(cfg["sizes"], fabric.DEFAULT_SIZES)

    def test_torchrun_env(self):
        env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
        cfg, problems = fabric.resolve({}, env)
        self.assertEqual(problems, [])
        self.assertEqual((cfg["rank"], cfg["worldSize"], cfg["device"], cfg["initMethod"]), (1, 2, 1, "env://"))

    def test_problems(self):
        _, problems = fabric.resolve({}, {})
        self.assertEqual(len(problems), 2)
        _, problems = fabric.resolve({"rank": 2, "worldSize": 2, "masterAddr": "a", "masterPort": 1, "sizes": [6]}, {})
        self.assertEqual(len(problems), 2)


if __name__ == "__main__":
    unittest.main()


class KeptVerdict(unittest.TestCase):
    """A passed check keeps its verdict in logDir (an update of the rank's command prints it again); a failed one none."""

    def check(self, log_dir, rank_log, code):
        import contextlib
        import io
        saved = fabric._spawn_rank, fabric._wait

        def spawn(cfg, out_log, nccl_log):
            with open(out_log, "w") as f:
                f.write(rank_log)
            with open(nccl_log, "w") as f:
                f.write(fixture("socket.nccl.log"))
            return 0
        fabric._spawn_rank, fabric._wait = spawn, lambda pid, out_log, deadline: code
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                fabric.fabric_check({"rank": 0, "worldSize": 2, "masterAddr": "127.0.0.1", "masterPort": 29501, "host": "spark-a",
                                     "hcas": [], "logDir": log_dir, "timeoutSeconds": 5, "linkGbps": None}, env={})
            return out.getvalue()
        finally:
            fabric._spawn_rank, fabric._wait = saved

    def test_passed_then_failed(self):
        with tempfile.TemporaryDirectory() as d:
            out = self.check(d, fixture("socket.rank.log"), 0)
            path = fabric.verdict_path(d, 0)
            self.assertEqual(path, os.path.join(d, "fabric-rank0.json"))
            with open(path) as f:
                kept = f.read()
            self.assertEqual(kept, out.strip().splitlines()[-1] + "\n", "the verdict printed last, as one line")
            self.assertEqual(json.loads(kept)["transport"], "NET/Socket")
            self.assertEqual(sorted(os.listdir(d)), ["fabric-rank0.json", "fabric-rank0.log", "fabric-rank0.nccl.log"])
            with self.assertRaises(SystemExit):
                self.check(d, "no result\n", 1)
            self.assertFalse(os.path.exists(path), "a failed check leaves no verdict to report again")


# NCCL's lines over RoCE, in the formats the patterns above cite (src/init.cc, src/transport/net.cc, net_ib.cc); the
# fixtures' real runs had no HCA.
IB_LOG = "\n".join("spark-b:7:7 [0] NCCL INFO " + m for m in [
    "Using network IB",
    "NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1234 mtu 5 GID 5 (0/A64C6AC0FFFF0000) fifoRkey=0x1 fifoLkey=0x2",
    "Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0",
    "Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0"]) + "\n"


class GidIndex(unittest.TestCase):
    """Each rank runs with NCCL_IB_GID_INDEX from its own host's table and says which, in progress and verdict."""

    def setUp(self):
        from tests.test_gid import kernel_table, write_hca
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        write_hca(self.root, "rocep1s0f1", kernel_table("192.168.100.10", 5))

    def tearDown(self):
        self.tmp.cleanup()

    def run_check(self, log_dir, address, hcas):
        import contextlib
        import io
        saved = fabric._spawn_rank, fabric._wait
        seen = {}

        def spawn(cfg, out_log, nccl_log):
            seen["gidIndex"] = cfg["gidIndex"]
            with open(out_log, "w") as f:
                f.write(fixture("socket.rank.log"))
            with open(nccl_log, "w") as f:
                f.write(IB_LOG)
            return 0
        fabric._spawn_rank, fabric._wait = spawn, lambda pid, out_log, deadline: 0
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    fabric.fabric_check({"rank": 1, "worldSize": 2, "masterAddr": "127.0.0.1", "masterPort": 29501,
                                         "host": "spark-b", "address": address, "hcas": hcas, "logDir": log_dir,
                                         "timeoutSeconds": 5, "linkGbps": None}, env={"NCCL_IB_GID_INDEX": "0"},
                                        sysfs=self.root)
                except SystemExit:
                    pass
            return out.getvalue(), err.getvalue(), seen
        finally:
            fabric._spawn_rank, fabric._wait = saved

    def test_the_rank_uses_and_reports_its_hosts_index(self):
        with tempfile.TemporaryDirectory() as d:
            out, _, seen = self.run_check(d, "192.168.100.10", ["rocep1s0f1"])
        self.assertEqual(seen, {"gidIndex": 5})
        self.assertIn("fabric: spark-b: NCCL_IB_GID_INDEX=5 (rocep1s0f1 port 1 GID 5 is RoCE v2 with the fabric address "
                      "192.168.100.10 in spark-b's table)", out)
        verdict = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(verdict["gid"]["index"], 5)
        self.assertEqual(verdict["gid"]["table"], {"hca": "rocep1s0f1", "port": 1, "index": 5, "type": "RoCE v2",
                                                   "address": "192.168.100.10"})
        self.assertEqual(verdict["env"]["NCCL_IB_GID_INDEX"], "5", "the container's own value replaced")
        self.assertEqual(verdict["gid"]["ncclUsed"], [5], "NCCL's own queue-pair line")
        self.assertEqual(verdict["transport"], "NET/IB")

    def test_no_gid_with_the_fabric_address_fails_before_the_rank(self):
        with tempfile.TemporaryDirectory() as d:
            out, err, seen = self.run_check(d, "10.9.9.9", ["rocep1s0f1"])
        self.assertEqual(seen, {}, "no rank started")
        self.assertIn("spark-b: no RoCE v2 GID carries the fabric address 10.9.9.9 on rocep1s0f1", err)
        self.assertIn("fix: the fabric address's RoCE v2 GID must be on one of the configured HCAs", err)

    def test_no_hca_no_gid(self):
        with tempfile.TemporaryDirectory() as d:
            out, _, seen = self.run_check(d, "192.168.100.10", [])
        self.assertEqual(seen, {"gidIndex": None})
        self.assertIsNone(json.loads(out.strip().splitlines()[-1])["gid"])
        self.assertNotIn("NCCL_IB_GID_INDEX=", out.replace("NCCL_IB_GID_INDEX=0", ""))

    def test_nccls_own_queue_pair_line(self):
        # src/transport/net_ib.cc, the RoCE branch of the connection's info logging.
        line = ("spark-a:1:2 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1234 mtu 5 GID 5 (0/A64C6AC0FFFF0000) "
                "fifoRkey=0x1 fifoLkey=0x2")
        facts = fabric.parse_nccl_log(line + "\n" + line.replace("IbDev 0", "IbDev 1").replace("GID 5", "GID 3"))
        self.assertEqual(facts["gidIndexes"], [5, 3])
        self.assertEqual(facts["ibLines"], [], "one per queue pair: not among the quoted lines")
        # NCCL 2.30 (src/transport/net_ib/connect.cc): the function's name first, qp_num.
        line = ("spark-a:1:2 [0] NCCL INFO NET/IB: ncclIbConnectImpl: NCCL Dev 0 IbDev 0 Port 1 qp_num 1234 mtu 5 GID 3 "
                "(0/A64C6AC0FFFF0000) ctsFifoRkey=0x1 ctsFifoLkey=0x2")
        self.assertEqual(fabric.parse_nccl_log(line + "\n")["gidIndexes"], [3])
