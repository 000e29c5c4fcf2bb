"""`vllm` command-line stand-in: --version, serve."""
import sys

import simcommon as sc


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        sc.out("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...")
        return 0
    if argv[0] in ("-v", "--version"):
        sc.out(sc.release().get("version", "0.0.0"))
        return 0
    if argv[0] == "serve":
        from vllm import _sim_serve
        return _sim_serve.serve(argv[1:])
    sc.err("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...")
    sc.err("vllm: error: argument subparser: invalid choice: '%s'" % argv[0])
    return 2
