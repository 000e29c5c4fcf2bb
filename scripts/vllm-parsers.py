"""Judges `vllm serve` argvs with the parser of the vLLM installed in this interpreter (a venv that
scripts/vllm-parsers.sh made).

stdin: {"argvs": [argv, ...], "options": [option, ...]}, each argv `["vllm", "serve", MODEL, ...]`. stdout: one JSON
object {"vllm": VERSION, "results": [{"ok": true, "set": [dest, ...]} | {"ok": false, "error": vLLM's message}],
"dests": {option: dest or null}}: `set` are the destinations the argv's options set (parsed a second time with every
default suppressed), `dests` the destination vLLM's serve parser gives each option string asked about (null: none).

The parser is built as `vllm serve` builds it (vllm/entrypoints/cli/main.py main(): a FlexibleArgumentParser with
subparsers; vllm/entrypoints/cli/serve.py ServeSubcommand.subparser_init: `subparsers.add_parser("serve", ...)`
then `make_arg_parser(serve_parser)` from vllm/entrypoints/openai/cli_args.py), and after parsing main() calls
`cmds[args.subparser].validate(args)`, which for serve is `validate_parsed_serve_args(args)`. cli/serve.py itself
is not imported: it pulls in the API server (FastAPI, uvloop, the engine), which the parser does not need.

Then `AsyncEngineArgs.from_cli_args(args)` (vllm/engine/arg_utils.py), the first thing `vllm serve` does with the
namespace: it builds the engine arguments without a GPU or the weights. With HF_HUB_OFFLINE set, EngineArgs.__post_init__
resolves the model id to its snapshot folder in the Hugging Face cache (vllm/transformers_utils/repo_utils.py
get_model_path, huggingface_hub snapshot_download(local_files_only=True)): the helper points HF_HUB_CACHE at a temporary
cache holding an empty snapshot folder per model id, so nothing is downloaded. `create_engine_config` is not called:
it reads the model's config.json and probes the platform.
"""
import argparse
import contextlib
import io
import json
import os
import sys
import tempfile

REQUEST = json.load(sys.stdin) if __name__ == "__main__" else {}
ARGVS = REQUEST.get("argvs", [])
HUB = tempfile.TemporaryDirectory(prefix="vllm-parsers-hub-")


def fake_snapshots(hub, argvs):
    """An empty snapshot folder per model id (`models--Org--Name/refs/main` + `snapshots/<rev>/`, the hub cache layout)."""
    for argv in argvs:
        model = argv[2] if len(argv) > 2 and not argv[2].startswith("-") else None
        if not model or "/" not in model:
            continue
        repo = os.path.join(hub, "models--" + model.replace("/", "--"))
        os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
        os.makedirs(os.path.join(repo, "snapshots", "0" * 40), exist_ok=True)
        with open(os.path.join(repo, "refs", "main"), "w") as f:
            f.write("0" * 40)


fake_snapshots(HUB.name, ARGVS)
# Nothing here may reach the network (huggingface_hub reads these when it is imported).
os.environ["HF_HUB_CACHE"] = HUB.name
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

import vllm  # noqa: E402


def use_cpu_platform_without_gpu():
    """Without a GPU the CUDA wheel's platform is "unspecified" and building the parser fails ("Failed to infer
    device type", vllm/config/device.py). vLLM's own CLI does this for `vllm bench` (vllm/entrypoints/cli/main.py:
    "use CPU instead of UnspecifiedPlatform by default"): the flags and their checks are the same; only
    platform-dependent defaults differ, which the argvs here never rely on.
    Done before the modules that bind `current_platform` at import are imported. UnspecifiedPlatform's device_type
    is "" (vllm/platforms/interface.py); 0.10 has no is_unspecified()."""
    from vllm import platforms
    if not platforms.current_platform.device_type:
        from vllm.platforms.cpu import CpuPlatform
        platforms.current_platform = platforms._current_platform = CpuPlatform()


use_cpu_platform_without_gpu()
from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: E402
from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args  # noqa: E402

try:  # vllm/utils/argparse_utils.py from 0.11.1 on; vllm/utils/__init__.py before
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser


def build_parser():
    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    serve = subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]")
    make_arg_parser(serve)
    return parser, serve


def explicit_parser():
    """The same parser with every default argparse.SUPPRESS: a parse then holds only what the argv itself set."""
    parser, serve = build_parser()
    for action in serve._actions:
        action.default = argparse.SUPPRESS
    return parser


def error_of(stderr_text, exc):
    """argparse prints `usage: ...` then `PROG: error: MESSAGE` and exits 2: keep the message line(s)."""
    lines = [l for l in stderr_text.strip().splitlines() if ": error: " in l]
    if lines:
        return lines[-1].split(": error: ", 1)[1]
    return stderr_text.strip() or "exit %s" % exc.code


def judge(parser, explicit, argv):
    if argv[:2] != ["vllm", "serve"]:
        return {"ok": False, "error": "not a `vllm serve` argv: %r" % argv[:2]}
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = parser.parse_args(argv[1:])
    except SystemExit as e:
        return {"ok": False, "error": error_of(err.getvalue(), e)}
    try:
        validate_parsed_serve_args(args)
    except Exception as e:  # vLLM raises TypeError/ValueError with its own message
        return {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    # ServeSubcommand.cmd: `if args.model_tag is not None: args.model = args.model_tag` (vllm/entrypoints/cli/serve.py)
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            AsyncEngineArgs.from_cli_args(args)
    except Exception as e:
        return {"ok": False, "error": "EngineArgs: %s: %s" % (type(e).__name__, e)}
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        given = explicit.parse_args(argv[1:])
    return {"ok": True, "set": sorted(k for k in vars(given) if k not in ("subparser", "model_tag"))}


def main():
    parser, serve = build_parser()
    explicit = explicit_parser()
    actions = serve._option_string_actions
    out = {"vllm": vllm.__version__, "results": [judge(parser, explicit, a) for a in ARGVS],
           "dests": {o: (actions[o].dest if o in actions else None) for o in REQUEST.get("options", [])},
           "optionsOf": {}}
    for o, dest in out["dests"].items():
        if dest:
            out["optionsOf"][dest] = sorted(s for s, a in actions.items() if a.dest == dest)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
