import contextlib
import io
import json
import unittest
from unittest import mock

from spark_vllm import ownership as own

OURS = {"project": "spark-vllm", "stack": "qwen"}


def container(name, project, stack, created, model="openai/gpt-oss-120b", served=None):
    labels = {own.LABELS["project"]: project, own.LABELS["stack"]: stack, own.LABELS["model"]: model, "spark-vllm.role": "head"}
    if served:  # only the endpoint proxy carries the served name
        labels[own.LABELS["servedName"]] = served
    return {"Name": "/" + name, "Created": created, "Config": {"Labels": labels}}


def docker(containers, ps_code=0):
    """A `run` that answers docker ps -aq --filter label=… and docker inspect as Docker would."""
    calls = []

    def run(argv, timeout=30):
        calls.append(argv)
        if argv[:2] == ["docker", "ps"]:
            return ps_code, "".join("%d\n" % i for i in range(len(containers))), "" if ps_code == 0 else "Cannot connect"
        if argv[:2] == ["docker", "inspect"]:
            return 0, json.dumps([containers[int(i)] for i in argv[2:]]), ""
        raise AssertionError(argv)
    run.calls = calls
    return run


class Holders(unittest.TestCase):
    def test_our_own_stacks_containers_are_fine(self):
        run = docker([container("spark-vllm-spark-a", "spark-vllm", "qwen", "2026-12-01T04:10:00.1Z")])
        self.assertEqual(own.ownership_problems("spark-a", OURS, run), [])
        self.assertEqual(run.calls[0], ["docker", "ps", "-aq", "--filter", "label=spark-vllm.stack"])

    def test_another_stack_of_the_project_is_named_with_its_model_since_and_fix(self):
        run = docker([
            container("spark-vllm.proxy", "spark-vllm", "gpt", "2026-12-01T04:12:30.5Z", served="gpt-oss"),
            container("spark-vllm-spark-a", "spark-vllm", "gpt", "2026-12-01T04:10:07.123456789Z"),
        ])
        [line] = own.ownership_problems("spark-a", OURS, run)
        self.assertEqual(line, "spark-a: held by stack gpt (model openai/gpt-oss-120b, served as gpt-oss) since "
                               "2026-12-01 04:10:07 UTC (containers spark-vllm-spark-a, spark-vllm.proxy): run "
                               "`pulumi destroy -s gpt` first to switch this host to stack qwen, or give stack qwen other hosts")

    def test_without_the_proxy_the_served_name_is_left_out(self):
        [line] = own.ownership_problems("h", OURS, docker([container("x", "spark-vllm", "gpt", "2026-12-01T00:00:00Z")]))
        self.assertIn("held by stack gpt (model openai/gpt-oss-120b) since", line)

    def test_a_stack_of_another_project_names_the_project(self):
        run = docker([container("x", "other", "qwen", "2026-11-30T10:00:00Z")])
        [line] = own.ownership_problems("spark-b", OURS, run)
        self.assertIn("held by stack qwen of project other", line)
        self.assertIn("run `pulumi destroy -s qwen` in project other first", line)

    def test_two_other_stacks_each_get_a_line_oldest_first(self):
        run = docker([container("b", "spark-vllm", "new", "2026-12-01T00:00:00Z"),
                      container("a", "spark-vllm", "old", "2026-11-01T00:00:00Z")])
        lines = own.ownership_problems("h", OURS, run)
        self.assertEqual([l.split(" (")[0] for l in lines], ["h: held by stack old", "h: held by stack new"])

    def test_no_docker_means_no_verdict_here(self):
        self.assertEqual(own.ownership_problems("h", OURS, docker([], ps_code=1)), [])

    def test_no_labelled_containers_no_inspect(self):
        run = docker([])
        self.assertEqual(own.ownership_problems("h", OURS, run), [])
        self.assertEqual(len(run.calls), 1)


class HostOwner(unittest.TestCase):
    def test_refuses_with_exit_1_and_the_lines_on_stderr(self):
        run = docker([container("spark-vllm-h", "spark-vllm", "gpt", "2026-12-01T04:10:00Z")])
        err = io.StringIO()
        with mock.patch.object(own, "run", run), contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
            own.host_owner({"host": "h", "owner": OURS})
        self.assertEqual(e.exception.code, 1)
        self.assertIn("h: held by stack gpt", err.getvalue())

    def test_passes_and_says_who_we_are(self):
        out = io.StringIO()
        with mock.patch.object(own, "run", docker([])), contextlib.redirect_stdout(out):
            own.host_owner({"host": "h", "owner": OURS})
        self.assertEqual(json.loads(out.getvalue()), {"host": "h", "owner": "spark-vllm/qwen"})


if __name__ == "__main__":
    unittest.main()
