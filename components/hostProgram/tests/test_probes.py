import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from spark_vllm import probes
from tests import FIXTURE_LOGS
from tests import scratch_dir


class ProcessState(unittest.TestCase):
    def setUp(self):
        self.dir = scratch_dir(self)
        self.addCleanup(shutil.rmtree, self.dir)
        self.proc = os.path.join(self.dir, "proc")
        self.pid_file = os.path.join(self.dir, "vllm.pid")

    def write(self, path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def test_the_state_letter_follows_the_last_parenthesis(self):
        self.assertEqual(probes.stat_state("456 (vllm) S 1 456"), "S")
        self.assertEqual(probes.stat_state("456 (a) Z (b)) R 1 456"), "R")

    def test_running_exited_zombie_and_no_pid_file(self):
        self.assertEqual(probes.process_state(self.pid_file, self.proc), (None, "no pid file"))
        self.write(self.pid_file, "garbage\n")
        self.assertEqual(probes.process_state(self.pid_file, self.proc), (None, "no pid file"))
        self.write(self.pid_file, "456\n")
        self.assertEqual(probes.process_state(self.pid_file, self.proc), (456, "exited"))
        self.write(os.path.join(self.proc, "456", "stat"), "456 (python3) S 1 456 456 0 -1\n")
        self.assertEqual(probes.process_state(self.pid_file, self.proc), (456, "running"))
        for state in ("Z", "X"):
            self.write(os.path.join(self.proc, "456", "stat"), "456 (python3) %s 1 456\n" % state)
            self.assertEqual(probes.process_state(self.pid_file, self.proc), (456, "exited"))

    def test_this_process_is_running(self):
        self.write(self.pid_file, str(os.getpid()))
        self.assertEqual(probes.process_state(self.pid_file), (os.getpid(), "running"))

    def test_a_reused_pid_with_another_start_time_is_not_the_launched_process(self):
        stat = "456 (vllm serve (x)) S 1 456 456 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 1\n"
        self.write(os.path.join(self.proc, "456", "stat"), stat)
        self.assertEqual(probes.stat_start_time(stat), "987654")
        self.write(self.pid_file, "456 987654\n")
        self.assertEqual(probes.process_state(self.pid_file, self.proc), (456, "running"))
        self.write(self.pid_file, "456 111\n")
        self.assertEqual(probes.process_state(self.pid_file, self.proc), (456, "exited"))


class Logs(unittest.TestCase):
    def test_last_progress_is_the_latest_known_step(self):
        log = ("(APIServer pid=1) INFO 11-29 22:44:49 [loader.py:1] Loading weights took 41.20 seconds\n"
               "(EngineCore_DP0 pid=3) INFO 11-29 22:45:09 [gpu.py:2] Available KV cache memory: 12.40 GiB\n"
               "something else\n")
        self.assertEqual(probes.last_progress(log), "Available KV cache memory: 12.40 GiB")
        self.assertIsNone(probes.last_progress("nothing here\n"))

    def test_read_log_of_a_missing_file_is_empty(self):
        self.assertEqual(probes.read_log("/nonexistent/vllm.log"), "")

    def test_failure_report_with_a_diagnosis(self):
        with open(os.path.join(FIXTURE_LOGS, "port-in-use.log")) as f:
            log = f.read()
        lines = probes.failure_report({"host": "spark-a", "log": "/var/tmp/spark-vllm/vllm-serve.log"}, "vllm serve exited", log)
        self.assertEqual(lines[:3], ["vllm serve exited", "kind: port-in-use", "root cause: OSError: [Errno 98] Address already in use"])
        self.assertTrue(lines[3].startswith("hint: Another process already listens on the port."))
        self.assertEqual(lines[4:6], ["full log: spark-a:/var/tmp/spark-vllm/vllm-serve.log", "context:"])
        self.assertTrue(all(line.startswith("  ") for line in lines[6:]) and 1 < len(lines[6:]) <= 15)

    def test_exit_headline_says_whether_vllm_died_before_the_probe(self):
        self.assertEqual(probes.exit_headline("spark-a", 41, 0.3, True),
                         "vllm serve on spark-a is not running (pid 41): it had exited before this probe's first check")
        self.assertEqual(probes.exit_headline("spark-a", 41, 6.7, False), "vllm serve on spark-a exited 6 s after the probe started (pid 41)")

    def test_the_memory_guards_marker_is_read_only_when_the_guard_wrote_it(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        marker = os.path.join(d, "vllm.failed")
        diagnosis = {"kind": "memory-guard", "line": "MemAvailable 3.5 GiB < floor 4.0 GiB", "hint": "lower it"}
        with open(marker, "w") as f:
            f.write("digest\n" + json.dumps({"failures": 0, "guard": {"memAvailableBytes": 1, "floorBytes": 2, "at": 3},
                                                "diagnosis": diagnosis}) + "\n")
        self.assertEqual(probes.guard_stop(marker), diagnosis)
        with open(marker, "w") as f:
            f.write("digest\n" + json.dumps({"failures": 5, "diagnosis": {"kind": "cuda-oom", "line": "x", "hint": "y"}}) + "\n")
        self.assertIsNone(probes.guard_stop(marker), "a crash loop's marker is not the guard's")
        self.assertIsNone(probes.guard_stop(os.path.join(d, "absent")))
        self.assertIsNone(probes.guard_stop(None))

    def test_the_endpoint_probe_names_the_memory_guard_when_it_stopped_vllm(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        marker, pid_file, log = (os.path.join(d, n) for n in ("vllm.failed", "vllm.pid", "vllm-serve.log"))
        with open(marker, "w") as f:
            f.write("digest\n" + json.dumps({"failures": 0, "guard": {"memAvailableBytes": 1, "floorBytes": 2, "at": 3},
                                                "diagnosis": {"kind": "memory-guard", "line": "MemAvailable 3.5 GiB < floor 4.0 GiB",
                                                              "hint": "lower spark-vllm:vllm.gpuMemoryUtilization"}}) + "\n")
        with open(pid_file, "w") as f:
            f.write("999999999 1\n")  # no such process: vLLM has exited
        with open(log, "w") as f:
            f.write("INFO Loading weights\n")
        args = {"host": "spark-a", "port": 9, "scheme": "http", "servedName": "m", "log": log, "pidFile": pid_file,
                "timeoutSeconds": 5, "intervalSeconds": 0.1, "guardMarker": marker}
        r = subprocess.run([sys.executable, "-c", "import json, sys; from spark_vllm import probes; probes.endpoint_probe(json.loads(sys.argv[1]))",
                            json.dumps(args)], input="key\n", capture_output=True, text=True, timeout=30,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("vllm serve on spark-a is not running (pid 999999999): it had exited before this probe's first check: "
                      "the memory guard stopped it", r.stderr)
        self.assertIn("root cause: MemAvailable 3.5 GiB < floor 4.0 GiB", r.stderr)

    def test_relaunch_advice_names_the_plan_s_command(self):
        cmd = "pulumi up -s day2 --replace 'urn:pulumi:day2::spark-vllm::a$b::spark-spark-a-memory'"
        self.assertEqual(probes.relaunch_advice({"relaunch": cmd}),
                         ["a plain `pulumi up` runs only this probe again and does not relaunch vLLM; once the cause is fixed, "
                          "relaunch it (memory check and page cache drop on every host first) with:", "  " + cmd])
        self.assertEqual(probes.relaunch_advice({}), [])

    def test_failure_report_without_one_shows_the_last_fifteen_lines(self):
        log = "\n".join("step %d" % i for i in range(40)) + "\n\n"
        lines = probes.failure_report({"host": "spark-a", "log": "/l"}, "timed out", log)
        self.assertEqual(lines[:3], ["timed out", "no known root cause found in the log; full log: spark-a:/l", "last lines:"])
        self.assertEqual(lines[3:], ["  step %d" % i for i in range(25, 40)])


class Http(unittest.TestCase):
    def test_a_refused_connection_has_no_status(self):
        status, text = probes.http("GET", "http://127.0.0.1:1/health", timeout=2)
        self.assertIsNone(status)
        self.assertIn("refused", text.lower())


if __name__ == "__main__":
    unittest.main()


class ConcurrentCompletions(unittest.TestCase):
    def test_two_completions_are_in_flight_at_once(self):
        import http.server
        import threading
        from spark_vllm.probes import concurrent_completions
        both = threading.Barrier(2, timeout=5)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    both.wait()  # answers only once both requests have arrived
                    code = 200
                except threading.BrokenBarrierError:
                    code = 504
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b'{"choices": []}')

            def log_message(self, *a):
                pass
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        results = concurrent_completions("http://127.0.0.1:%d" % server.server_address[1], "k", "m", 2)
        self.assertEqual([status for status, _ in results], [200, 200])


class CertificatePin(unittest.TestCase):
    """The probe pins the proxy's certificate: the one served on the port must be the one in the file."""

    def setUp(self):
        import socket
        import ssl
        import subprocess
        import threading
        self.dir = scratch_dir(self)
        self.addCleanup(shutil.rmtree, self.dir)
        for name in ("served", "other"):
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                            "-days", "1", "-subj", "/CN=" + name, "-keyout", os.path.join(self.dir, name + ".key"),
                            "-out", os.path.join(self.dir, name + ".crt")], check=True, capture_output=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(self.dir, "served.crt"), os.path.join(self.dir, "served.key"))
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(4)
        self.addCleanup(self.server.close)
        self.port = self.server.getsockname()[1]

        def serve():
            while True:
                try:
                    conn, _ = self.server.accept()
                except OSError:
                    return
                try:
                    with ctx.wrap_socket(conn, server_side=True):
                        pass
                except (OSError, ssl.SSLError):
                    pass
        threading.Thread(target=serve, daemon=True).start()

    def test_the_served_certificate_matches_its_own_file_only(self):
        ok, _ = probes.served_certificate_matches(self.port, os.path.join(self.dir, "served.crt"))
        self.assertTrue(ok)
        ok, detail = probes.served_certificate_matches(self.port, os.path.join(self.dir, "other.crt"))
        self.assertFalse(ok)
        self.assertIn("served sha256", detail)
        ok, detail = probes.served_certificate_matches(self.port, os.path.join(self.dir, "missing.crt"))
        self.assertEqual((ok, detail), (False, os.path.join(self.dir, "missing.crt") + " holds no certificate"))

    def test_a_given_chain_is_pinned_by_its_first_certificate(self):
        # endpoint.tls "given" writes the whole chain (the server's certificate, then its issuers) into tls.crt.
        def chain(*names):
            path = os.path.join(self.dir, "-".join(names) + ".pem")
            with open(path, "w") as out:
                for name in names:
                    with open(os.path.join(self.dir, name + ".crt")) as f:
                        out.write(f.read())
            return path
        ok, detail = probes.served_certificate_matches(self.port, chain("served", "other"))
        self.assertTrue(ok, detail)
        ok, _ = probes.served_certificate_matches(self.port, chain("other", "served"))
        self.assertFalse(ok)
