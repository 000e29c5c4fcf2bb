import copy
import os
import unittest

from spark_vllm import data as data_module
from spark_vllm.diagnosis import context_around, diagnose, normalise_log
from tests import FIXTURE_LOGS


def fixture(name):
    with open(os.path.join(FIXTURE_LOGS, name), errors="replace") as f:
        return f.read()


class FixtureLogs(unittest.TestCase):
    def test_every_failure_fixture_gives_its_kind_on_a_whole_log_line(self):
        names = sorted(n for n in os.listdir(FIXTURE_LOGS) if n.endswith(".log") and n != "clean-startup.log")
        self.assertGreaterEqual(len(names), 19)
        for name in names:
            with self.subTest(name):
                log = fixture(name)
                found = diagnose(log)
                self.assertIsNotNone(found)
                self.assertEqual(found["kind"], name[:-len(".log")])
                self.assertTrue(any(line.strip().endswith(found["line"]) for line in normalise_log(log)), found["line"])
                self.assertTrue(found["hint"])

    def test_known_root_causes(self):
        self.assertTrue(diagnose(fixture("arch-unsupported.log"))["line"].startswith(
            "ValueError: Model architectures ['Qwen3_5MoeForConditionalGeneration'] are not supported for now."))
        self.assertEqual(diagnose(fixture("cuda-oom.log"))["line"].split(" Tried")[0],
                         "torch.OutOfMemoryError: CUDA out of memory.")
        self.assertTrue(diagnose(fixture("unknown-engine-failure.log"))["line"].startswith(
            "AssertionError: expert map has 0 local experts on rank 1"))

    def test_nccl_socket_fallback_needs_a_socket_channel_or_asked_for_hcas(self):
        nccl = os.path.join(os.path.dirname(FIXTURE_LOGS), "nccl")

        def log(name):
            with open(os.path.join(nccl, name), errors="replace") as f:
                return f.read()
        self.assertIsNone(diagnose(log("p2p.nccl.log")))
        for name in ("socket.nccl.log", "hca-missing.nccl.log", "hca-missing-net.nccl.log"):
            self.assertEqual(diagnose(log(name))["kind"], "nccl-socket-fallback", name)

    def test_ray_placement_group_lines_of_current_vllm_and_the_autoscaler(self):
        for line in ("ValueError: Cannot provide a placement group requiring 2.0 GPUs (placement_group_specs=[{'GPU': 1.0}, "
                     "{'GPU': 1.0}]) within 1800 seconds.",
                     "(autoscaler +1m2s) Error: No available node types can fulfill resource request {'GPU': 1.0}. "
                     "Add suitable node types to this cluster to resolve this issue."):
            self.assertEqual(diagnose("INFO start\n" + line + "\n")["kind"], "ray-placement-group", line)

    def test_a_clean_startup_has_no_root_cause(self):
        self.assertIsNone(diagnose(fixture("clean-startup.log")))
        self.assertIsNone(diagnose(""))


class Reading(unittest.TestCase):
    def test_normalise_strips_escapes_prefixes_and_repeats(self):
        text = ("\x1b[36m(EngineCore_DP0 pid=312)\x1b[0m (RayWorkerWrapper pid=311, ip=192.168.100.11) "
                "INFO 11-29 22:45:21 [x.py:1] hi [repeated 2x across cluster]\r\n[rank0]:   indented  \rlast")
        self.assertEqual(normalise_log(text), ["INFO 11-29 22:45:21 [x.py:1] hi", "  indented", "last"])

    def test_source_lines_under_a_frame_are_not_causes(self):
        log = ('  File "/x/_http.py", line 426, in hf_raise_for_status\n'
               "    raise _format(GatedRepoError, message, response) from e\n"
               "huggingface_hub.errors.GatedRepoError: 401 Client Error.\n")
        self.assertEqual(diagnose(log)["line"], "huggingface_hub.errors.GatedRepoError: 401 Client Error.")

    def test_the_wrapper_points_at_the_last_exception_before_it(self):
        log = ("(EngineCore_DP0 pid=3) ERROR 11-29 22:45:10 [core.py:708] AssertionError: expert map is empty\n"
               "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above.\n")
        self.assertEqual(diagnose(log)["kind"], "unknown-engine-failure")
        self.assertEqual(diagnose(log)["line"], "AssertionError: expert map is empty")
        alone = "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above.\n"
        self.assertEqual(diagnose(alone)["line"], "RuntimeError: Engine core initialization failed. See root cause above.")

    def test_weak_patterns_only_when_nothing_firm_matches(self):
        self.assertEqual(diagnose("NCCL WARN something\n")["kind"], "nccl-error")
        self.assertEqual(diagnose("NCCL WARN something\nOSError: [Errno 98] Address already in use\n")["kind"], "port-in-use")

    def test_context_is_ten_lines_before_and_four_after(self):
        log = "\n".join("line %d" % i for i in range(30)) + "\nOSError: [Errno 98] x\n" + "\n".join("after %d" % i for i in range(9))
        ctx = context_around(log, "OSError: [Errno 98] x")
        self.assertEqual(ctx[0], "line 20")
        self.assertEqual(ctx[10], "OSError: [Errno 98] x")
        self.assertEqual(ctx[-1], "after 3")
        self.assertEqual(context_around(log, "not there"), [])


class LineCap(unittest.TestCase):
    def setUp(self):
        self.saved = list(data_module._loaded)
        capped = copy.deepcopy(data_module.data())
        capped["diagnosis"]["maxLineChars"] = 40
        data_module._loaded[:] = [capped]

    def tearDown(self):
        data_module._loaded[:] = self.saved

    def test_lines_are_cut_at_max_line_chars_before_matching(self):
        self.assertEqual(normalise_log("x" * 100), ["x" * 40])
        self.assertIsNone(diagnose("x" * 50 + " CUDA out of memory\n"))
        self.assertEqual(diagnose("CUDA out of memory " + "x" * 50)["line"], "CUDA out of memory " + "x" * 21)


if __name__ == "__main__":
    unittest.main()
