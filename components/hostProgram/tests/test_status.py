import io
import json
import os
import shutil
import tarfile
import unittest
from unittest import mock

from spark_vllm import preflight as pf
from spark_vllm import status
from spark_vllm import supervise as sv
from tests import scratch_dir


class HostStatus(unittest.TestCase):
    def setUp(self):
        self.dir = scratch_dir(self)
        self.addCleanup(shutil.rmtree, self.dir)
        self.proc = os.path.join(self.dir, "proc")
        self.pid_file = os.path.join(self.dir, "vllm-serve.pid")
        self.log = os.path.join(self.dir, "vllm-serve.log")
        self.write(os.path.join(self.proc, "meminfo"), "MemTotal:       127601240 kB\nMemFree:  1 kB\nMemAvailable:   62914560 kB\n")
        self.write(os.path.join(self.proc, "uptime"), "5000.50 100.00\n")

    def write(self, path, text, mode="w"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, mode) as f:
            f.write(text)

    def args(self, **extra):
        return dict({"host": "spark-a", "pidFile": self.pid_file, "log": self.log}, **extra)

    def vllm_process(self, pid, start_ticks, argv):
        self.write(os.path.join(self.proc, str(pid), "stat"),
                   "%d (vllm) S 1 %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 1 1\n" % (pid, pid, pid, start_ticks))
        self.write(os.path.join(self.proc, str(pid), "cmdline"), ("\0".join(argv) + "\0").encode(), "wb")
        self.write(self.pid_file, "%d %d\n" % (pid, start_ticks))

    def test_a_running_vllm_reports_uptime_and_served_model(self):
        ticks = os.sysconf("SC_CLK_TCK")
        self.vllm_process(42, 1000 * ticks, ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "Qwen/Qwen3-8B",
                                             "--served-model-name", "qwen3-8b", "--port", "8000"])
        out = status.host_status(self.args(), self.proc)
        self.assertEqual(out["vllm"], {"state": "running", "pid": 42, "uptimeSeconds": 4000, "servedModel": "qwen3-8b"})
        self.assertEqual(out["memory"], {"availableGiB": 60.0, "totalGiB": 121.7})

    def test_the_served_model_falls_back_to_the_positional_model(self):
        self.vllm_process(42, 10, ["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8000"])
        self.assertEqual(status.served_model(42, self.proc), "Qwen/Qwen3-8B")

    def test_a_dead_vllm_reports_the_root_cause_from_its_log(self):
        self.write(self.pid_file, "42 10\n")
        self.write(self.log, "INFO starting\nValueError: No available memory for the cache blocks. Try increasing "
                             "`gpu_memory_utilization` when initializing the engine.\n")
        out = status.host_status(self.args(), self.proc)
        self.assertEqual(out["vllm"]["state"], "exited")
        self.assertEqual(out["vllm"]["diagnosis"]["kind"], "no-cache-memory")

    def test_no_launch_yet(self):
        self.assertEqual(status.host_status(self.args(), self.proc)["vllm"], {"state": "no pid file", "pid": None})

    def test_the_ray_node_is_asked_of_the_cluster(self):
        answers = {"ok": (0, '["198.18.0.2", "198.18.0.3"]\n', ""), "down": (1, "", "ConnectionError: could not reach GCS\n")}
        with mock.patch.object(status, "run", side_effect=lambda argv, timeout: answers[self.case]):
            self.case = "ok"
            out = status.host_status(self.args(ray={"address": "198.18.0.2:6379", "node": "198.18.0.3"}), self.proc)
            self.assertEqual((out["raylet"], out.get("rayError")), (True, None))
            out = status.host_status(self.args(ray={"address": "198.18.0.2:6379", "node": "198.18.0.9"}), self.proc)
            self.assertEqual(out["raylet"], False)
            self.case = "down"
            out = status.host_status(self.args(ray={"address": "198.18.0.2:6379", "node": "198.18.0.3"}), self.proc)
            self.assertEqual((out["raylet"], out["rayError"]), (None, "ConnectionError: could not reach GCS"))

    def test_health_is_the_status_code_or_none_when_nothing_listens(self):
        out = status.host_status(self.args(healthUrl="http://127.0.0.1:9/health"), self.proc)
        self.assertIsNone(out["health"])


# Issue 47, as owners' Sparks showed it: /proc/meminfo on 7.0.0-1019-nvidia (MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#259),
# the driver's out-of-memory line (NVIDIA/dgx-spark-playbooks#116) and an Xid line in the driver's format, in
# `journalctl -k -b -o short-monotonic` form; the same text as test_preflight's.
MEMINFO_1019 = "MemTotal:       127601452 kB\nMemFree:        92274688 kB\nCmaTotal:              0 kB\nCmaFree:          940604 kB\n"
NVRM_OOM = ("[  812.402081] NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned "
            "from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1359")
XID = "[  900.100000] NVRM: Xid (PCI:000f:01:00): %d, pid=4242, name=python3, Ch 00000008"


class HostFacts(unittest.TestCase):
    """The preflight's own readers under a fake /proc, /sys and kernel log (its `read_file`, `platform.release` and `run`,
    the seams it reads through), so these fail if status stops using them or words its problems its own way."""

    def setUp(self):
        self.dir = scratch_dir(self)
        self.addCleanup(shutil.rmtree, self.dir)
        self.proc, self.sys = os.path.join(self.dir, "proc"), os.path.join(self.dir, "sys")
        self.release = "6.17.0-1032-nvidia"
        self.write(os.path.join(self.proc, "meminfo"), "MemTotal: 127601452 kB\nCmaTotal: 65536 kB\nCmaFree: 1024 kB\n")
        self.journal, self.dmesg = (0, "[    1.0] usb 1-4: new device\n", ""), (0, "", "")
        self.nvidia_smi = (127, "", "[Errno 2] No such file or directory: 'nvidia-smi'")
        self.mtu = 9000
        self.calls = []
        read = pf.read_file
        for patch in (mock.patch.object(pf, "read_file", side_effect=lambda path: read(path.replace("/proc/", self.proc + "/", 1))),
                      mock.patch.object(pf.platform, "release", side_effect=lambda: self.release),
                      mock.patch.object(pf, "run", side_effect=self.answer)):
            patch.start()
            self.addCleanup(patch.stop)

    def answer(self, argv, timeout=30):
        self.calls.append(argv[0])
        if argv[0] == "ip":
            return 0, json.dumps([{"ifname": argv[-1], "mtu": self.mtu}]), ""
        return {"journalctl": self.journal, "dmesg": self.dmesg, "nvidia-smi": self.nvidia_smi}[argv[0]]

    def write(self, path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def hca(self, name, netdev, gids):
        """An HCA as the kernel's IB core shows it (Documentation/ABI/testing/sysfs-class-infiniband); GIDS: index -> IPv4."""
        port = os.path.join(self.sys, "class/infiniband", name, "ports/1")
        self.write(os.path.join(port, "state"), "4: ACTIVE\n")
        self.write(os.path.join(port, "link_layer"), "Ethernet\n")
        self.write(os.path.join(port, "gids/0"), "fe80:0000:0000:0000:0000:0000:0000:0001\n")
        self.write(os.path.join(port, "gid_attrs/types/0"), "RoCE v2\n")
        for index, ip in gids.items():
            words = ["%02x" % int(n) for n in ip.split(".")]
            self.write(os.path.join(port, "gids/%d" % index), "0000:0000:0000:0000:0000:ffff:%s%s:%s%s\n" % tuple(words))
            self.write(os.path.join(port, "gid_attrs/types/%d" % index), "RoCE v2\n")
            self.write(os.path.join(port, "gid_attrs/ndevs/%d" % index), netdev + "\n")

    def facts(self, hcas=("rocep1s0f1", "roceP2p1s0f1")):
        return status.host_facts({"host": "spark-b", "fabric": {"address": "192.168.100.11", "hcas": list(hcas)}}, self.sys)

    def twins(self):
        # The RoCE v2 GID of the fabric address at index 3 on one twin; the other twin on its own subnet.
        self.hca("rocep1s0f1", "enp1s0f1np1", {3: "192.168.100.11"})
        self.hca("roceP2p1s0f1", "enP2p1s0f1np1", {3: "192.168.101.11"})

    def test_a_healthy_host_shows_kernel_cma_driver_log_counts_and_the_gid_index_of_its_fabric_address(self):
        self.twins()
        self.write(os.path.join(self.sys, "module/nvidia/version"), "580.95.05\n")
        f = self.facts()
        self.assertEqual(f["kernel"], {"release": "6.17.0-1032-nvidia", "cmaTotalBytes": 65536 * 1024, "cmaFreeBytes": 1024 * 1024})
        self.assertEqual(f["driver"], {"version": "580.95.05", "source": self.sys + "/module/nvidia/version"})
        self.assertEqual(f["kernelLog"], {"readable": True, "nvrmNoMemory": {"count": 0}, "xid": {"count": 0}})
        self.assertEqual(f["fabricAddress"], "192.168.100.11")
        self.assertEqual([(h["name"], h["active"], h["fabricGidIndex"], h["roceV2Ipv4"]) for h in f["hcas"]], [
            ("rocep1s0f1", True, 3, [{"index": 3, "address": "192.168.100.11"}]),
            ("roceP2p1s0f1", True, None, [{"index": 3, "address": "192.168.101.11"}])])
        self.assertEqual((f["problems"], f["warnings"]), ([], []))
        self.assertNotIn("nvidia-smi", self.calls, "the module's version is read without asking the GPU")

    def test_a_bad_kernel_and_a_driver_oom_are_refused_in_the_preflights_words_with_the_last_xid_line(self):
        self.twins()
        self.release = "7.0.0-1019-nvidia"
        self.write(os.path.join(self.proc, "meminfo"), MEMINFO_1019)
        self.journal = (0, "\n".join(["[    1.0] usb 1-4: new device", NVRM_OOM, XID % 31, XID % 43]) + "\n", "")
        f = self.facts()
        self.assertEqual((f["kernel"]["cmaTotalBytes"], f["kernel"]["cmaFreeBytes"]), (0, 940604 * 1024))
        self.assertEqual(f["kernelLog"]["nvrmNoMemory"], {"count": 1, "line": NVRM_OOM, "which": "last"})
        self.assertEqual(f["kernelLog"]["xid"], {"count": 2, "line": XID % 43, "which": "last"})
        self.assertEqual(len(f["problems"]), 2, f["problems"])
        self.assertTrue(f["problems"][0].startswith("spark-b: kernel 7.0.0-1019-nvidia with CmaFree 940604 kB larger than CmaTotal 0 kB: "))
        for word in ("ibv_reg_mr_iova2", "kho=off", "6.17.0-1032-nvidia"):
            self.assertIn(word, f["problems"][0])
        self.assertTrue(f["problems"][1].startswith("spark-b: the GPU driver ran out of memory since boot (1 NVRM NV_ERR_NO_MEMORY lines"))
        self.assertTrue(f["problems"][1].endswith("reboot this host first"))
        # The very words the preflight refuses with: one source.
        self.assertEqual(f["problems"], pf.host_kernel_problems("spark-b", f["kernel"], pf.parse_kernel_log(self.journal[1]))[0])

    def test_the_bad_kernel_without_its_tell_and_a_small_mtu_are_warnings(self):
        self.twins()
        self.release, self.mtu = "7.0.0-1019-nvidia", 1500
        f = self.facts()
        self.assertEqual(f["problems"], [])
        self.assertEqual(len(f["warnings"]), 3, f["warnings"])
        self.assertIn("may not bite", f["warnings"][0])
        self.assertEqual(f["warnings"][1], "spark-b: enp1s0f1np1 (rocep1s0f1) has MTU 1500; NVIDIA recommends 9000 for the Spark fabric")

    def test_past_the_lines_the_reader_keeps_the_first_is_given_and_said_to_be_the_first(self):
        self.journal = (0, "\n".join(XID % n for n in range(pf.KERNEL_LOG_SHOWN + 2)) + "\n", "")
        log = self.facts(hcas=())["kernelLog"]
        self.assertEqual(log["xid"], {"count": pf.KERNEL_LOG_SHOWN + 2, "line": XID % 0, "which": "first"})

    def test_dmesg_when_journalctl_fails_and_unreadable_when_both_do(self):
        self.journal, self.dmesg = (1, "", "No journal files were found."), (0, NVRM_OOM + "\n", "")
        self.assertEqual(self.facts(hcas=())["kernelLog"]["nvrmNoMemory"]["count"], 1)
        self.dmesg = (1, "", "dmesg: read kernel buffer failed: Operation not permitted")
        self.assertEqual(self.facts(hcas=())["kernelLog"], {"readable": False})

    def test_the_driver_from_nvidia_smi_without_the_module_file_and_why_not_without_either(self):
        self.nvidia_smi = (0, "NVIDIA GB10, [N/A], 580.95.05, 12.1\n", "")
        self.assertEqual(self.facts(hcas=())["driver"], {"version": "580.95.05", "source": "nvidia-smi"})
        self.nvidia_smi = (127, "", "[Errno 2] No such file or directory: 'nvidia-smi'")
        self.assertEqual(self.facts(hcas=())["driver"], {"version": None, "why": "[Errno 2] No such file or directory: 'nvidia-smi'"})

    def test_an_hca_without_a_roce_gid_or_missing_is_refused_in_the_preflights_words(self):
        self.hca("rocep1s0f1", "enp1s0f1np1", {})
        f = self.facts()
        self.assertEqual([(h["name"], h["exists"], h["fabricGidIndex"]) for h in f["hcas"]],
                         [("rocep1s0f1", True, None), ("roceP2p1s0f1", False, None)])
        self.assertEqual(f["problems"], [
            "spark-b: HCA rocep1s0f1 has no RoCE v2 GID with an IPv4 address, so NCCL cannot use it: give its netdev an IPv4 "
            "address (ibdev2netdev shows which netdev)",
            "spark-b: HCA roceP2p1s0f1 not found: check spark-vllm:hosts[].fabric.hcas (ibdev2netdev)"])

    def test_the_subcommand_prints_one_json_line_and_reads_the_real_sys_by_default(self):
        with mock.patch.object(status, "say") as say:
            status.host_facts_command({"host": "spark-b", "fabric": {"address": "192.168.100.11", "hcas": []}})
        said = json.loads(say.call_args[0][0])
        self.assertEqual((said["kernel"]["release"], said["hcas"]), ("6.17.0-1032-nvidia", []))


class GivenUp(unittest.TestCase):
    """The supervisor's own give_up writes the markers; they come back through a tar as `docker cp DIR -` streams it."""

    def setUp(self):
        self.root = scratch_dir(self)
        self.addCleanup(shutil.rmtree, self.root)
        self.dir = os.path.join(self.root, "launches")
        os.makedirs(self.dir)
        self.sup = sv.Supervisor(self.dir)
        self.log = os.path.join(self.root, "vllm-serve.log")
        quiet = mock.patch.object(sv, "log")
        quiet.start()
        self.addCleanup(quiet.stop)

    def record(self, name, **extra):
        rec = dict({"name": name, "argv": ["vllm", "serve", "m"], "log": self.log}, **extra)
        with open(os.path.join(self.dir, name + ".json"), "w") as f:
            f.write(json.dumps(rec) + "\n")
        return rec, sv.read_launch_record(self.dir, name)[1]

    def archive(self):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as tar:
            tar.add(self.dir, arcname="launches")
        out.seek(0)
        return out

    def test_a_launch_the_supervisor_gave_up_on_with_its_diagnosis_log_and_time(self):
        with open(self.log, "w") as f:
            f.write("INFO starting\nValueError: No available memory for the cache blocks. Try increasing "
                    "`gpu_memory_utilization` when initializing the engine.\n")
        rec, digest = self.record("vllm")
        self.sup.give_up("vllm", rec, digest, sv.MAX_FAILURES)
        os.utime(os.path.join(self.dir, "vllm.failed"), (1764590400, 1764590400))
        self.record("ray")  # running fine: no marker
        [found] = status.given_up(status.records_from_tar(self.archive()))
        self.assertEqual((found["name"], found["failures"], found["log"], found["markedAt"]),
                         ("vllm", sv.MAX_FAILURES, self.log, "2025-12-01T12:00:00Z"))
        self.assertEqual(found["diagnosis"]["kind"], "no-cache-memory")
        self.assertIn("gpu_memory_utilization", found["diagnosis"]["line"])
        self.assertTrue(found["diagnosis"]["hint"])

    def test_the_give_up_line_points_at_the_replace_status_prints_not_at_the_launch_alone(self):
        # Replacing vLLM's launch alone would not run the memory gates (a page cache that fails the start-up check
        # comes back): the line names the memory gates, and the status command that prints their URNs.
        rec, digest = self.record("vllm")
        self.sup.give_up("vllm", rec, digest, 5)
        said = sv.log.call_args[0][0]
        self.assertIn("`spark-vllm status` prints", said)
        self.assertIn("every host's memory gate", said)

    def test_no_diagnosis_is_reported_as_null(self):
        rec, digest = self.record("ray")
        self.sup.give_up("ray", rec, digest, 5)
        [found] = status.given_up(status.records_from_tar(self.archive()))
        self.assertEqual((found["name"], found["diagnosis"]), ("ray", None))

    def test_a_stale_marker_from_an_older_launch_is_ignored_as_the_supervisor_ignores_it(self):
        rec, digest = self.record("vllm")
        self.sup.give_up("vllm", rec, digest, 5)
        _, new_digest = self.record("vllm", argv=["vllm", "serve", "other"])
        self.assertFalse(self.sup.marked("vllm", "failed", new_digest), "the supervisor would relaunch this record")
        self.assertEqual(status.given_up(status.records_from_tar(self.archive())), [])

    def test_a_marker_without_its_record_is_ignored(self):
        rec, digest = self.record("vllm")
        self.sup.give_up("vllm", rec, digest, 5)
        os.remove(os.path.join(self.dir, "vllm.json"))
        self.assertEqual(status.given_up(status.records_from_tar(self.archive())), [])

    def test_no_records_directory_nothing_on_stdin_or_not_a_tar_is_nothing_given_up(self):
        self.assertEqual(status.records_from_tar(io.BytesIO(b"")), {})
        self.assertEqual(status.records_from_tar(io.BytesIO(b"Error response from daemon: Could not find the file")), {})

    def test_the_subcommand_prints_one_json_line(self):
        rec, digest = self.record("vllm")
        self.sup.give_up("vllm", rec, digest, 5)
        stdin = mock.Mock(buffer=self.archive())
        with mock.patch.object(status.sys, "stdin", stdin), mock.patch.object(status, "say") as say:
            status.given_up_command({})
        self.assertEqual([g["name"] for g in json.loads(say.call_args[0][0])], ["vllm"])


if __name__ == "__main__":
    unittest.main()
