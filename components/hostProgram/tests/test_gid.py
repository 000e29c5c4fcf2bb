"""spark_vllm/gid.py: NCCL_IB_GID_INDEX from a fake sysfs tree laid out as the kernel's IB core shows it
(Documentation/ABI/testing/sysfs-class-infiniband: ports/N/gids/M, ports/N/gid_attrs/types/M)."""
import io
import os
import tempfile
import unittest
from contextlib import redirect_stderr

from spark_vllm import gid as gidmod


def mapped(address):
    a, b, c, d = (int(x) for x in address.split("."))
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % (a, b, c, d)


def write_hca(root, hca, table, port=1):
    """TABLE: index -> (gid text, type), as `cat gids/N` and `cat gid_attrs/types/N` print them."""
    base = os.path.join(root, hca, "ports", str(port))
    for sub in ("gids", "gid_attrs/types"):
        os.makedirs(os.path.join(base, sub), exist_ok=True)
    for index, (text, kind) in table.items():
        with open(os.path.join(base, "gids", str(index)), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(base, "gid_attrs", "types", str(index)), "w") as f:
            f.write(kind + "\n")


def kernel_table(address, at, extra=None):
    """A port's table as the kernel fills it: the default link-local pair (RoCE v1, v2) at 0 and 1, then a pair per
    address, so ADDRESS's RoCE v2 GID lands at AT (3 or 5) with other GIDs in between; EXTRA: (index, address) more."""
    table = {0: ("fe80:0000:0000:0000:5a00:00ff:fe00:0001", "IB/RoCE v1"),
             1: ("fe80:0000:0000:0000:5a00:00ff:fe00:0001", "RoCE v2")}
    if at == 5:  # an IPv6 global address came first
        table[2] = ("2001:0db8:0000:0000:5a00:00ff:fe00:0001", "IB/RoCE v1")
        table[3] = ("2001:0db8:0000:0000:5a00:00ff:fe00:0001", "RoCE v2")
    table[at - 1] = (mapped(address), "IB/RoCE v1")
    table[at] = (mapped(address), "RoCE v2")
    for index, other in extra or []:
        table[index] = (mapped(other), "RoCE v2")
    return table


class Choice(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_the_index_of_the_fabric_address_on_its_hca(self):
        for at in (3, 5):
            with self.subTest(at=at):
                write_hca(self.root, "rocep1s0f1", kernel_table("192.168.100.10", at))
                c = gidmod.gid_choice(["rocep1s0f1"], "192.168.100.10", self.root)
                self.assertEqual(c["index"], at)
                self.assertEqual(c["fabricGid"], {"hca": "rocep1s0f1", "port": 1, "index": at, "address": "192.168.100.10"})
                self.assertIsNone(c["problem"])

    def test_the_fabric_address_not_nccls_first_ipv4_gid(self):
        # A link-local address sits below the fabric address: NCCL unset would take index 3, the fabric GID is 5.
        table = kernel_table("169.254.100.10", 3, extra=[(5, "192.168.100.10")])
        write_hca(self.root, "rocep1s0f1", table)
        c = gidmod.gid_choice(["rocep1s0f1"], "192.168.100.10", self.root)
        self.assertEqual(c["index"], 5)
        self.assertEqual(c["perHca"], [{"hca": "rocep1s0f1", "index": 5, "address": "192.168.100.10", "ncclFirst": 3}])

    def test_twins_at_the_same_index_set_it(self):
        write_hca(self.root, "rocep1s0f1", kernel_table("192.168.100.10", 3))
        write_hca(self.root, "roceP2p1s0f1", kernel_table("192.168.101.10", 3))
        c = gidmod.gid_choice(["rocep1s0f1", "roceP2p1s0f1"], "192.168.100.10", self.root)
        self.assertEqual(c["index"], 3)
        self.assertIsNone(c["note"])

    def test_twins_at_different_indexes_leave_it_to_nccl(self):
        write_hca(self.root, "rocep1s0f1", kernel_table("192.168.100.10", 3))
        write_hca(self.root, "roceP2p1s0f1", kernel_table("192.168.101.10", 5))
        c = gidmod.gid_choice(["rocep1s0f1", "roceP2p1s0f1"], "192.168.100.10", self.root)
        self.assertIsNone(c["index"])
        self.assertEqual([(h["hca"], h["index"], h["address"]) for h in c["perHca"]],
                         [("rocep1s0f1", 3, "192.168.100.10"), ("roceP2p1s0f1", 5, "192.168.101.10")])
        self.assertIn("rocep1s0f1 3, roceP2p1s0f1 5", c["note"])
        self.assertNotIn("not the fabric address's", c["note"])
        # The fabric HCA's first IPv4 GID is another address: NCCL's own pick misses it, and the note says so.
        write_hca(self.root, "rocep1s0f1", kernel_table("169.254.100.10", 3, extra=[(7, "192.168.100.10")]))
        c = gidmod.gid_choice(["rocep1s0f1", "roceP2p1s0f1"], "192.168.100.10", self.root)
        self.assertIsNone(c["index"])
        self.assertIn("on rocep1s0f1 that is index 3, not the fabric address's 7", c["note"])

    def test_no_match(self):
        write_hca(self.root, "roceP2p1s0f1", kernel_table("192.168.101.10", 3))
        c = gidmod.gid_choice(["roceP2p1s0f1", "rocep9s9f9"], "192.168.100.10", self.root)
        self.assertIsNone(c["index"])
        self.assertIn("no RoCE v2 GID carries the fabric address 192.168.100.10 on roceP2p1s0f1, rocep9s9f9", c["problem"])
        self.assertIn("roceP2p1s0f1: index 3 = 192.168.101.10; rocep9s9f9: no RoCE v2 IPv4 GID", c["problem"])
        # Only a RoCE v1 GID with the address: not a match.
        write_hca(self.root, "rocep1s0f1", {2: (mapped("192.168.100.10"), "IB/RoCE v1")})
        self.assertIsNone(gidmod.gid_choice(["rocep1s0f1"], "192.168.100.10", self.root)["fabricGid"])

    def test_exec_sets_the_variable_or_leaves_it_unset(self):
        write_hca(self.root, "rocep1s0f1", kernel_table("192.168.100.10", 5))
        ran = []
        err = io.StringIO()
        with redirect_stderr(err):
            gidmod.nccl_gid_exec({"address": "192.168.100.10", "hcas": ["rocep1s0f1"]}, ["ray", "start"], self.root,
                                 {"NCCL_IB_GID_INDEX": "0", "PATH": "/bin"}, lambda f, a, e: ran.append((f, a, e)))
        self.assertEqual(ran, [("ray", ["ray", "start"], {"NCCL_IB_GID_INDEX": "5", "PATH": "/bin"})])
        self.assertIn("NCCL_IB_GID_INDEX=5: rocep1s0f1 port 1 GID 5 is RoCE v2 with the fabric address 192.168.100.10", err.getvalue())
        ran.clear()
        with redirect_stderr(io.StringIO()) as err:
            gidmod.nccl_gid_exec({"address": "10.0.0.1", "hcas": ["rocep1s0f1"]}, ["vllm", "serve"], self.root,
                                 {"NCCL_IB_GID_INDEX": "0"}, lambda f, a, e: ran.append(e))
        self.assertEqual(ran, [{}], "no match: NCCL's own choice, the variable unset")
        self.assertIn("NCCL_IB_GID_INDEX not set: no RoCE v2 GID carries the fabric address 10.0.0.1", err.getvalue())


if __name__ == "__main__":
    unittest.main()
