"""Importable `ray` stand-in: init / nodes / cluster_resources / available_resources / shutdown.

Talks to the GCS stand-in started by `ray start` (tests/sim/image/python/ray/_sim_gcs.py)."""
import sys as _sys

import simcommon as _sc

__version__ = _sc.ray_version()
__commit__ = "sim"

_address = None


class _Exceptions:
    class RaySystemError(Exception):
        pass

    class GetTimeoutError(TimeoutError):
        pass


exceptions = _Exceptions


def _log(msg):
    _sys.stderr.write("%s\tINFO worker.py:1832 -- %s\n" % (_sc.ray_ts(), msg))
    _sys.stderr.flush()


def is_initialized():
    return _address is not None


def init(address=None, ignore_reinit_error=False, **kwargs):
    """Connect to an existing (simulated) cluster. address: None | "auto" | "IP:PORT" | "ray://IP:PORT"."""
    global _address
    if _address is not None:
        if ignore_reinit_error:
            return _Context(_address)
        raise RuntimeError("Maybe you called ray.init twice by accident? This error can be suppressed by "
                           "passing in 'ignore_reinit_error=True' or by calling 'ray.shutdown()' prior to "
                           "'ray.init()'.")
    if address in (None, "auto", "local"):
        addr = _sc.current_cluster_address()
    else:
        addr = address.replace("ray://", "").split("/")[0]
    if not addr:
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to "
                              "by setting `--address` flag or `RAY_ADDRESS` environment variable.")
    _log("Connecting to existing Ray cluster at address: %s..." % addr)
    try:
        _sc.gcs_call(addr, "/api/cluster", timeout=3)
    except _sc.GcsAuthError as e:
        # ray.init(address=...) against a token cluster without its token raises ConnectionError
        # (python/ray/tests/authentication/test_token_auth_integration.py test_connect_without_token_raises_error)
        raise ConnectionError("Failed to connect to GCS at %s: %s" % (addr, e))
    except _sc.GcsUnavailable:
        raise ConnectionError("Unable to connect to GCS at %s. Check that (1) Ray GCS with matching version "
                              "started successfully at the specified address, and (2) there is no firewall "
                              "setting preventing access." % addr)
    _address = addr
    _log("Connected to Ray cluster.")
    return _Context(addr)


class _Context(dict):
    def __init__(self, addr):
        super().__init__(address_info={"gcs_address": addr, "address": addr}, dashboard_url="")
        self.address_info = self["address_info"]
        self.dashboard_url = ""

    def __enter__(self):
        return self

    def __exit__(self, *a):
        shutdown()


def _require():
    if _address is None:
        raise _Exceptions.RaySystemError("Ray has not been started yet. You can start Ray with 'ray.init()'.")


def _snapshot():
    _require()
    try:
        _, snap = _sc.gcs_call(_address, "/api/cluster", timeout=3)
    except _sc.GcsUnavailable as e:
        raise ConnectionError("Failed to get cluster state from GCS at %s: %s" % (_address, e))
    return snap


def nodes():
    """List of node dicts like the real ray.nodes() (dead nodes included, Alive False)."""
    return _snapshot()["nodes"]


def cluster_resources():
    out = {}
    for n in _snapshot()["nodes"]:
        if n["Alive"]:
            for k, v in n["Resources"].items():
                out[k] = out.get(k, 0.0) + v
    return out


def available_resources():
    snap = _snapshot()
    out = {}
    for n in snap["nodes"]:
        if n["Alive"]:
            for k, v in n["Resources"].items():
                out[k] = out.get(k, 0.0) + v
    for pg in snap["placement_groups"]:
        if pg.get("state") == "CREATED":
            for b in pg["bundles"]:
                for k, v in b.items():
                    if k in out and not k.startswith("node:"):
                        out[k] -= v
    return out


def get_gcs_address():
    _require()
    return _address


def shutdown():
    global _address
    _address = None
