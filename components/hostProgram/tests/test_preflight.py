import contextlib
import io
import json
import os
import tempfile
import unittest
from unittest import mock

from spark_vllm import preflight as pf


class Parsing(unittest.TestCase):
    def test_gpus_from_nvidia_smi_csv(self):
        self.assertEqual(pf.parse_gpus("NVIDIA GB10, 122502, 580.95.05, 12.1\n"),
                         [{"name": "NVIDIA GB10", "memoryMiB": "122502", "driver": "580.95.05", "computeCap": "12.1"}])
        self.assertEqual(pf.parse_gpus("H200, 143771, 570.1\nshort, row\n"),
                         [{"name": "H200", "memoryMiB": "143771", "driver": "570.1", "computeCap": None}])
        self.assertEqual(pf.parse_gpus(""), [])

    def test_interface_from_ip_json(self):
        link = [{"operstate": "UP", "flags": ["UP"], "addr_info": [
            {"family": "inet", "local": "192.168.100.10"}, {"family": "inet6", "local": "fe80::1"}]}]
        self.assertEqual(pf.parse_iface("enp1s0f1np1", "192.168.100.10", json.dumps(link)),
                         {"name": "enp1s0f1np1", "exists": True, "up": True, "state": "up",
                          "addresses": ["192.168.100.10"], "hasAddress": True})
        other = pf.parse_iface("enp1s0f1np1", "192.168.100.11", json.dumps(link))
        self.assertFalse(other["hasAddress"])

    def test_unknown_operstate_is_up_only_with_carrier(self):
        lo = [{"operstate": "UNKNOWN", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "addr_info": []}]
        self.assertTrue(pf.parse_iface("lo", "127.0.0.1", json.dumps(lo))["up"])
        lo[0]["flags"] = ["UP"]
        self.assertFalse(pf.parse_iface("lo", "127.0.0.1", json.dumps(lo))["up"])

    def test_missing_interface(self):
        for out in (None, "", "[]", "not json"):
            self.assertEqual(pf.parse_iface("nosuch0", "10.0.0.1", out), {"name": "nosuch0", "exists": False})

    def test_meminfo_in_bytes(self):
        text = "MemTotal:       127601012 kB\nMemFree:  1 kB\nMemAvailable:   120000000 kB\nHugePages_Total:       0\n"
        self.assertEqual(pf.parse_meminfo(text), {"totalBytes": 127601012 * 1024, "availableBytes": 120000000 * 1024})
        self.assertEqual(pf.parse_meminfo(""), {"totalBytes": None, "availableBytes": None})

    def test_hcas_from_sysfs(self):
        with tempfile.TemporaryDirectory() as root:
            for hca, state, gid, netdev in (("rocep1s0f1", "4: ACTIVE", "0000:0000:0000:0000:0000:ffff:c0a8:640a", "enp1s0f1np1"),
                                            ("roceP2p1s0f1", "1: DOWN", None, None)):
                port = os.path.join(root, hca, "ports", "1")
                for d in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
                    os.makedirs(os.path.join(port, d))
                files = {"state": state, "link_layer": "Ethernet", "gids/0": "fe80:0000:0000:0000:0000:0000:0000:0001",
                         "gid_attrs/types/0": "RoCE v2"}
                if gid:
                    files.update({"gids/3": gid, "gid_attrs/types/3": "RoCE v2", "gid_attrs/ndevs/3": netdev,
                                  "gids/2": gid, "gid_attrs/types/2": "IB/RoCE v1"})
                for name, text in files.items():
                    with open(os.path.join(port, name), "w") as f:
                        f.write(text + "\n")
            facts = pf.hca_facts(["rocep1s0f1", "roceP2p1s0f1", "mlx5_9"], root=root)
            self.assertEqual(facts[0], {"name": "rocep1s0f1", "exists": True, "active": True, "linkLayer": "Ethernet",
                                        "roceV2Ipv4": [{"port": 1, "index": 3, "address": "192.168.100.10", "netdev": "enp1s0f1np1"}],
                                        "netdev": "enp1s0f1np1"})
            self.assertEqual((facts[1]["active"], facts[1]["roceV2Ipv4"]), (False, []))
            self.assertEqual(facts[2]["exists"], False)
            problems, warnings = pf.hca_problems("spark-a", facts, mtu=lambda netdev: 1500)
            self.assertEqual(problems, [
                "spark-a: HCA roceP2p1s0f1 is not ACTIVE: check the fabric link",
                "spark-a: HCA roceP2p1s0f1 has no RoCE v2 GID with an IPv4 address, so NCCL cannot use it: give its netdev an "
                "IPv4 address (ibdev2netdev shows which netdev)",
                "spark-a: HCA mlx5_9 not found: check spark-vllm:hosts[].fabric.hcas (ibdev2netdev)"])
            self.assertEqual(warnings, ["spark-a: enp1s0f1np1 (rocep1s0f1) has MTU 1500; NVIDIA recommends 9000 for the Spark fabric"])

    def test_twins_on_one_subnet_are_refused(self):
        twin = lambda name, ip: {"name": name, "exists": True, "active": True, "linkLayer": "Ethernet", "netdev": name + "-nd",
                                 "roceV2Ipv4": [{"port": 1, "index": 3, "address": ip, "netdev": name + "-nd"}]}
        problems, _ = pf.hca_problems("spark-a", [twin("rocep1s0f1", "192.168.100.10"), twin("roceP2p1s0f1", "192.168.100.11")],
                                      mtu=lambda n: 9000)
        self.assertEqual(problems, ["spark-a: HCAs rocep1s0f1 and roceP2p1s0f1 both sit on 192.168.100.0/24: put each "
                                    "ConnectX-7 twin on its own subnet (NVIDIA's multi-Spark guide)"])
        problems, _ = pf.hca_problems("spark-a", [twin("rocep1s0f1", "192.168.100.10"), twin("roceP2p1s0f1", "192.168.101.10")],
                                      mtu=lambda n: 9000)
        self.assertEqual(problems, [])


class Preflight(unittest.TestCase):
    def run_preflight(self, args, gpus, docker, iface):
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(pf, "gpu_facts", return_value=gpus), \
                mock.patch.object(pf, "docker_facts", return_value=docker), \
                mock.patch.object(pf, "iface_facts", return_value=iface), \
                mock.patch.object(pf.platform, "machine", return_value="aarch64"), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                pf.preflight(args)
                code = 0
            except SystemExit as e:
                code = e.code
        return code, json.loads(out.getvalue().splitlines()[-1]), err.getvalue().splitlines()

    def test_a_good_host_prints_its_facts(self):
        with tempfile.TemporaryDirectory() as cache:
            args = {"host": "spark-a", "platform": "linux/arm64", "gpus": 1, "cacheDir": cache,
                    "fabric": {"interface": "enp1s0f1np1", "address": "192.168.100.10", "hcas": []}}
            iface = {"name": "enp1s0f1np1", "exists": True, "up": True, "addresses": ["192.168.100.10"], "hasAddress": True}
            code, facts, err = self.run_preflight(args, ([{"name": "NVIDIA GB10"}], None), ("28.5.1", True, None), iface)
        self.assertEqual((code, err), (0, []))
        self.assertEqual(facts["platform"], "linux/arm64")
        self.assertEqual(facts["docker"], "28.5.1")
        self.assertEqual(facts["disk"]["path"], cache)

    def test_every_problem_is_one_line_naming_the_host_and_the_fix(self):
        args = {"host": "spark-b", "platform": "linux/amd64", "gpus": 2, "cacheDir": "/nonexistent/cache",
                "fabric": {"interface": "enp1s0f1np1", "address": "192.168.100.11", "hcas": []}}
        iface = {"name": "enp1s0f1np1", "exists": True, "up": True, "addresses": ["10.0.0.5"], "hasAddress": False}
        code, facts, err = self.run_preflight(args, ([{"name": "NVIDIA GB10"}], None), ("28.5.1", False, None), iface)
        self.assertEqual(code, 1)
        self.assertIsNone(facts["disk"])
        self.assertEqual(err, [
            "spark-b: CPU architecture is aarch64 (linux/arm64) but spark-vllm:hosts[].platform says linux/amd64: set it to linux/arm64",
            "spark-b: 1 GPU(s) visible but spark-vllm:hosts[].gpus says 2",
            "spark-b: NVIDIA container runtime not found: install nvidia-container-toolkit",
            "spark-b: interface enp1s0f1np1 carries 10.0.0.5, not 192.168.100.11: fix spark-vllm:hosts[].fabric.address or the netplan",
            "spark-b: model cache directory /nonexistent/cache does not exist: create it (mkdir -p) or fix spark-vllm:model.cacheDir",
        ])


if __name__ == "__main__":
    unittest.main()
