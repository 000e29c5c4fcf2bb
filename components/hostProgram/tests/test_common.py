import io
import os
import tempfile
import unittest
from contextlib import redirect_stderr

from spark_vllm import common


class Common(unittest.TestCase):
    def test_run_returns_code_and_output_and_never_raises(self):
        self.assertEqual(common.run(["sh", "-c", "echo out; echo err >&2; exit 3"]), (3, "out\n", "err\n"))
        code, out, err = common.run(["/nonexistent/binary"])
        self.assertEqual((code, out), (127, ""))
        self.assertIn("/nonexistent/binary", err)
        self.assertEqual(common.run(["sleep", "5"], timeout=0.2)[0], 127)

    def test_fail_prints_each_line_to_stderr_and_exits_1(self):
        err = io.StringIO()
        with redirect_stderr(err), self.assertRaises(SystemExit) as e:
            common.fail(["one", "two"])
        self.assertEqual(e.exception.code, 1)
        self.assertEqual(err.getvalue(), "one\ntwo\n")

    def test_read_file_strips_or_gives_none(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("  123\n")
        self.addCleanup(os.remove, f.name)
        self.assertEqual(common.read_file(f.name), "123")
        self.assertIsNone(common.read_file("/nonexistent/file"))


if __name__ == "__main__":
    unittest.main()
