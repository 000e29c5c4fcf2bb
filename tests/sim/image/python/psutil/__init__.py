# spark-vllm sim: the part of psutil that vLLM's start-up check and the memory gate read on a GB10
# (psutil.virtual_memory().available, vllm/utils/mem_utils.py MemorySnapshot.measure), as the simulated
# unified memory sees it (tests/sim/image/python/simcommon.py). The sim image has no real psutil.
import collections

import simcommon as sc

svmem = collections.namedtuple("svmem", "total available percent used free")


def virtual_memory():
    m = sc.gpu_memory()
    gib = 1024 ** 3
    total, available, free = m["total_gib"] * gib, sc.mem_available_gib() * gib, m["free_gib"] * gib
    return svmem(int(total), int(available), round(100.0 * (total - available) / total, 1), int(total - available), int(free))
