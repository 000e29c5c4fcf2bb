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
    kernel = {"release": "6.17.0-1032-nvidia", "cmaTotalBytes": 0, "cmaFreeBytes": 0}
    kernel_log = {"readable": True, "nvrmNoMemory": 0, "nvrmNoMemoryLines": [], "xid": 0, "xidLines": []}

    def run_preflight(self, args, gpus, docker, iface):
        # test_cache_chain.py calls this with self None: the healthy kernel then.
        kernel, kernel_log = (self or Preflight).kernel, (self or Preflight).kernel_log
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.object(pf, "gpu_facts", return_value=gpus), \
                mock.patch.object(pf, "docker_facts", return_value=docker), \
                mock.patch.object(pf, "iface_facts", return_value=iface), \
                mock.patch.object(pf.platform, "machine", return_value="aarch64"), \
                mock.patch.object(pf, "kernel_facts", return_value=kernel), \
                mock.patch.object(pf, "kernel_log_facts", return_value=kernel_log), \
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


# Issue 47: what owners' Sparks reported in 2026 (components/knowledge/diagnosis.ts KNOWN_BAD_KERNELS).
# /proc/meminfo as MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#259 quotes it on 7.0.0-1019-nvidia.
MEMINFO_1019 = "MemTotal:       127601452 kB\nMemFree:        92274688 kB\nCmaTotal:              0 kB\nCmaFree:          940604 kB\n"
# NVIDIA/dgx-spark-playbooks#116's line (one line in the kernel log), and an Xid line in the driver's format.
NVRM_OOM = ("[  812.402081] NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned "
            "from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359")


class HostKernel(unittest.TestCase):
    def test_cma_lines_in_bytes_and_absent_without_cma(self):
        self.assertEqual(pf.parse_cma(MEMINFO_1019), {"cmaTotalBytes": 0, "cmaFreeBytes": 940604 * 1024})
        self.assertEqual(pf.parse_cma("MemTotal: 1 kB\n"), {"cmaTotalBytes": None, "cmaFreeBytes": None})

    def test_kernel_log_counts_driver_oom_and_xid(self):
        text = "\n".join(["[    1.0] usb 1-4: new device", NVRM_OOM, NVRM_OOM,
                         "[  900.1] NVRM: Xid (PCI:000f:01:00): 31, pid=4242, name=python3, Ch 00000008"])
        log = pf.parse_kernel_log(text)
        self.assertEqual((log["nvrmNoMemory"], log["xid"]), (2, 1))
        self.assertEqual(log["nvrmNoMemoryLines"][0], NVRM_OOM.strip())
        self.assertEqual(pf.parse_kernel_log("nothing\n")["nvrmNoMemory"], 0)

    def test_7_0_0_1019_with_cma_free_above_total_is_refused_naming_host_and_fix(self):
        kernel = dict(release="7.0.0-1019-nvidia", **pf.parse_cma(MEMINFO_1019))
        problems, warnings = pf.host_kernel_problems("spark-b", kernel, {"readable": True, "nvrmNoMemory": 0})
        self.assertEqual(warnings, [])
        self.assertEqual(len(problems), 1)
        p = problems[0]
        self.assertTrue(p.startswith("spark-b: kernel 7.0.0-1019-nvidia with CmaFree 940604 kB larger than CmaTotal 0 kB: "), p)
        for word in ("ibv_reg_mr_iova2", "kho=off", "kexec_crash_size", "6.17.0-1032-nvidia", "#259"):
            self.assertIn(word, p)

    def test_7_0_0_1019_without_the_tell_only_warns_and_other_kernels_pass(self):
        kernel = {"release": "7.0.0-1019-nvidia", "cmaTotalBytes": 32 << 20, "cmaFreeBytes": 0}
        problems, warnings = pf.host_kernel_problems("spark-a", kernel, {"readable": True, "nvrmNoMemory": 0})
        self.assertEqual(problems, [])
        self.assertEqual(len(warnings), 1)
        self.assertIn("may not bite", warnings[0])
        for kernel in ({"release": "6.17.0-1032-nvidia", "cmaTotalBytes": 0, "cmaFreeBytes": 940604 * 1024},
                       {"release": "7.0.0-1019-nvidia", "cmaTotalBytes": None, "cmaFreeBytes": None}):
            problems, _ = pf.host_kernel_problems("spark-a", kernel, {"readable": False})
            self.assertEqual(problems, [], kernel)

    def test_the_table_comes_from_the_typescript_catalog(self):
        table = pf.data()["diagnosis"]["knownBadKernels"]
        self.assertEqual([k["release"] for k in table], ["7.0.0-1019-nvidia"])
        self.assertEqual(table[0]["kind"], "rdma-kernel-regression")

    def test_driver_oom_since_boot_refuses_with_reboot_this_host_first(self):
        log = pf.parse_kernel_log(NVRM_OOM + "\n")
        problems, _ = pf.host_kernel_problems("spark-b", {"release": "6.17.0-1032-nvidia"}, log, table=[])
        self.assertEqual(len(problems), 1)
        self.assertTrue(problems[0].startswith("spark-b: the GPU driver ran out of memory since boot (1 NVRM NV_ERR_NO_MEMORY"))
        self.assertTrue(problems[0].endswith("reboot this host first"))

    def test_preflight_reports_the_kernel_facts_and_refuses_a_bad_kernel(self):
        with tempfile.TemporaryDirectory() as cache:
            args = {"host": "spark-b", "platform": "linux/arm64", "gpus": 1, "cacheDir": cache,
                    "fabric": {"interface": "enp1s0f1np1", "address": "192.168.100.11", "hcas": []}}
            iface = {"name": "enp1s0f1np1", "exists": True, "up": True, "addresses": ["192.168.100.11"], "hasAddress": True}
            run = Preflight("run_preflight")
            run.kernel = dict(release="7.0.0-1019-nvidia", **pf.parse_cma(MEMINFO_1019))
            code, facts, err = run.run_preflight(args, ([{"name": "NVIDIA GB10"}], None), ("28.5.1", True, None), iface)
        self.assertEqual(code, 1)
        self.assertEqual(facts["kernel"]["release"], "7.0.0-1019-nvidia")
        self.assertEqual(facts["kernel"]["cmaFreeBytes"], 940604 * 1024)
        self.assertEqual(facts["kernelLog"]["nvrmNoMemory"], 0)
        self.assertEqual(len(err), 1)
        self.assertIn("kho=off", err[0])


if __name__ == "__main__":
    unittest.main()
