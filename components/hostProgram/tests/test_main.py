import io
import os
import re
import unittest
from contextlib import redirect_stderr
from unittest import mock

from spark_vllm import main

PACKAGE = os.path.dirname(main.__file__)


class Dispatch(unittest.TestCase):
    def test_the_header_lists_every_subcommand_and_nothing_else(self):
        with open(os.path.join(PACKAGE, "main.py")) as f:
            header = re.match(r"(?:#.*\n)+", f.read()).group(0)
        listed = re.findall(r"^#   ([a-z][a-z-]*) {2,}\S", header, re.M)
        self.assertEqual(listed, list(main.COMMANDS))

    def test_usage_names_every_subcommand(self):
        for argv in (["t"], ["t", "nosuch", "{}"], ["t", "preflight"]):
            err = io.StringIO()
            with redirect_stderr(err), self.assertRaises(SystemExit) as e:
                main.main(argv)
            self.assertEqual(e.exception.code, 1)
            self.assertEqual(err.getvalue(), "usage: spark_vllm_tools.py host-owner|preflight|image-transfer|weights|serve-weights|"
                                             "fabric-check|compat|flush-page-cache|memory-check|memory-after-load|ray-probe|ray-env|endpoint-probe|serving-proof|host-status|given-up|host-facts|supervise 'JSON'\n")

    def test_the_table_calls_the_subcommand_with_its_json(self):
        seen = []
        with mock.patch.dict(main.COMMANDS, {"compat": seen.append}):
            main.main(["t", "compat", '{"model": "org/m"}'])
        self.assertEqual(seen, [{"model": "org/m"}])


if __name__ == "__main__":
    unittest.main()
