# Issue 41 item 3 (host half): model.cacheDir is mounted into the vLLM container, whose root loads code from under it
# (VLLM_CACHE_ROOT, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR under <cacheDir>/spark-vllm-compile, and with HF_HOME =
# cacheDir the hub's files and transformers' remote-code modules). The preflight applies the logDir chain rule
# (components/plan/hostCommands.ts logDirChainCheck) to it and to those code caches, before anything is pulled or created.
import os
import re
import unittest

from spark_vllm import preflight as pf
from tests import ROOT, scratch_dir

ME, OTHER = 1000, 65534
NAMES = {0: "root", ME: "nvidia", OTHER: "nobody"}


def members(gid):
    """Group members as a host's /etc/group and /etc/passwd would list them: 1000 is nvidia's private group."""
    return {0: {"root"}, ME: {"nvidia"}, 100: {"nvidia", "mallory"}}.get(gid)


class CacheChain(unittest.TestCase):
    def setUp(self):
        self.top = scratch_dir(self)
        os.chmod(self.top, 0o755)
        self.cache = os.path.join(self.top, "hf")
        os.makedirs(self.cache)
        os.chown(self.cache, ME, ME)
        os.chmod(self.cache, 0o755)

    def problems(self, cache=None):
        return pf.cache_dir_problems("spark-b", cache or self.cache, me=ME, group_members=members, user_name=NAMES.get)

    def make(self, rel, owner=0, group=0, mode=0o755, content=None):
        path = os.path.join(self.cache, rel)
        if content is None:
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(content)
        os.chown(path, owner, group)
        os.chmod(path, mode)
        return path

    def test_a_cache_of_the_ssh_user_with_root_made_code_caches_passes(self):
        for d in ("spark-vllm-compile/vllm", "spark-vllm-compile/triton/abc", "spark-vllm-compile/inductor", "modules/transformers_modules"):
            self.make(d)
        self.make("spark-vllm-compile/triton/abc/launcher.so", content=b"\x7fELF", mode=0o644)
        self.make("hub/models--org--m/blobs", owner=ME, group=ME)
        self.make("hub/models--org--m/snapshots/" + "a" * 40, owner=ME, group=ME)
        blob = self.make("hub/models--org--m/blobs/" + "b" * 64, owner=ME, group=ME, mode=0o644, content=b"{}")
        os.symlink("../../blobs/" + "b" * 64, os.path.join(self.cache, "hub/models--org--m/snapshots", "a" * 40, "config.json"))
        self.assertTrue(os.path.isfile(blob))
        self.assertEqual(self.problems(), [])

    def test_a_group_that_only_its_owner_is_in_may_write(self):
        # Ubuntu's umask for a user with a private group is 002 (login.defs USERGROUPS_ENAB): mkdir gives 775.
        os.chmod(self.cache, 0o775)
        self.make("hub", owner=ME, group=ME, mode=0o775)
        self.assertEqual(self.problems(), [])
        os.chown(self.cache, ME, 100)  # a group with another member
        problems = self.problems()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("%s is writable by group 100 (members besides root and nvidia: mallory)" % self.cache, problems[0])

    def test_a_cache_dir_someone_else_made_first_is_refused_naming_the_key_owner_mode_and_fix(self):
        os.chown(self.cache, OTHER, OTHER)
        self.assertEqual(self.problems(), [
            "spark-b: spark-vllm:model.cacheDir: %s is owned by uid %d (nobody), mode drwxr-xr-x: only root or nvidia may own "
            "model.cacheDir and the directories above it, since root in the vLLM container loads code from under it "
            "(VLLM_CACHE_ROOT, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, HF_HOME); fix: sudo chown nvidia %s && "
            "sudo chmod go-w %s, or set spark-vllm:model.cacheDir to a directory of your own" % (self.cache, OTHER, self.cache, self.cache)])

    def test_a_world_writable_cache_dir_is_refused_even_with_the_sticky_bit(self):
        for mode in (0o777, 0o1777, 0o757):
            os.chmod(self.cache, mode)
            problems = self.problems()
            self.assertEqual(len(problems), 1, oct(mode))
            self.assertTrue(problems[0].startswith("spark-b: spark-vllm:model.cacheDir: %s is writable by others" % self.cache), problems[0])
            self.assertIn("anyone could put code there for root in the vLLM container to load", problems[0])

    def test_a_directory_above_that_others_may_write_is_refused_unless_sticky(self):
        os.chmod(self.top, 0o777)
        problems = self.problems()
        self.assertEqual(len(problems), 1, problems)
        self.assertTrue(problems[0].startswith("spark-b: spark-vllm:model.cacheDir: %s (above model.cacheDir %s) is writable by others "
                                               "(owner root, mode drwxrwxrwx) without the sticky bit" % (self.top, self.cache)), problems[0])
        os.chmod(self.top, 0o1777)  # /tmp, /var/tmp: only an entry's owner may rename it; the entry is checked itself
        self.assertEqual(self.problems(), [])
        os.chown(self.top, OTHER, OTHER)
        os.chmod(self.top, 0o755)
        self.assertIn("%s (above model.cacheDir %s) is owned by uid %d (nobody)" % (self.top, self.cache, OTHER), self.problems()[0])

    def test_a_link_on_the_way_counts_where_it_sits_and_where_it_leads(self):
        elsewhere = os.path.join(self.top, "open")
        os.makedirs(os.path.join(elsewhere, "hf"))
        os.chmod(elsewhere, 0o777)
        os.chown(os.path.join(elsewhere, "hf"), ME, ME)
        link = os.path.join(self.top, "link")
        os.symlink(os.path.join(elsewhere, "hf"), link)
        problems = self.problems(link)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("%s (above model.cacheDir %s) is writable by others" % (elsewhere, os.path.join(elsewhere, "hf")), problems[0])

    def test_a_code_cache_planted_by_someone_else_is_refused_with_its_removal_as_the_fix(self):
        self.make("spark-vllm-compile", mode=0o755)
        self.make("spark-vllm-compile/triton", owner=OTHER, group=OTHER, mode=0o755)
        launcher = self.make("spark-vllm-compile/triton/x/launcher.so", owner=OTHER, group=OTHER, mode=0o644, content=b"evil")
        problems = self.problems()
        self.assertEqual(problems, [
            "spark-b: spark-vllm:model.cacheDir: %s/spark-vllm-compile/triton is owned by uid %d (nobody), mode drwxr-xr-x: root in the vLLM "
            "container loads code from this cache (TRITON_CACHE_DIR); fix: sudo rm -rf %s/spark-vllm-compile (a cache: it is made again)"
            % (self.cache, OTHER, self.cache),
            "spark-b: spark-vllm:model.cacheDir: %s is owned by uid %d (nobody), mode -rw-r--r--: root in the vLLM container loads code "
            "from this cache (TRITON_CACHE_DIR); fix: sudo rm -rf %s/spark-vllm-compile (a cache: it is made again)" % (launcher, OTHER, self.cache)])

    def test_a_writable_file_or_folder_in_a_code_cache_is_refused(self):
        self.make("spark-vllm-compile/inductor/ab", mode=0o777)
        self.make("modules/transformers_modules/m.py", content=b"import os", mode=0o666)
        problems = self.problems()
        self.assertEqual(len(problems), 2, problems)
        self.assertIn("%s/spark-vllm-compile/inductor/ab is writable by others (owner root, mode drwxrwxrwx)" % self.cache, problems[0])
        self.assertIn("(TORCHINDUCTOR_CACHE_DIR)", problems[0])
        self.assertIn("%s/modules/transformers_modules/m.py is writable by others (owner root, mode -rw-rw-rw-)" % self.cache, problems[1])
        self.assertIn("(HF_HOME modules: remote code, with trustRemoteCode)", problems[1])

    def test_links_in_a_code_cache_must_stay_inside_it(self):
        self.make("hub/models--org--m/snapshots/" + "a" * 40, owner=ME, group=ME)
        self.make("spark-vllm-compile/vllm")
        os.symlink("/tmp/evil.py", os.path.join(self.cache, "hub/models--org--m/snapshots", "a" * 40, "modeling.py"))
        os.symlink(self.top, os.path.join(self.cache, "spark-vllm-compile", "vllm", "out"))
        problems = self.problems()
        self.assertEqual(len(problems), 2, problems)
        self.assertIn("%s/hub/models--org--m/snapshots/%s/modeling.py is a link out of %s/hub (to /tmp/evil.py)" % (self.cache, "a" * 40, self.cache), problems[1])
        self.assertIn("%s/spark-vllm-compile/vllm/out is a link out of %s/spark-vllm-compile (to %s)" % (self.cache, self.cache, self.top), problems[0])

    def test_a_hub_entry_of_someone_else_names_the_model_folder(self):
        self.make("hub/models--org--m/blobs", owner=OTHER, group=OTHER)
        problems = self.problems()
        self.assertEqual(len(problems), 1, problems)
        self.assertTrue(problems[0].endswith(
            "root in the vLLM container loads the model's files and, with trustRemoteCode, its code from the hub cache (HF_HOME); "
            "fix: sudo rm -rf %s/hub/models--org--m and fetch the model again, or sudo chown -R nvidia %s/hub/models--org--m && "
            "sudo chmod -R go-w %s/hub/models--org--m if you trust what is there" % (self.cache, self.cache, self.cache)), problems[0])

    def test_many_problems_are_capped(self):
        for i in range(30):
            self.make("spark-vllm-compile/triton/%02d" % i, mode=0o777)
        problems = self.problems()
        self.assertEqual(len(problems), pf.CACHE_PROBLEMS_SHOWN + 1)
        self.assertEqual(problems[-1], "spark-b: spark-vllm:model.cacheDir: and %d more like these" % (30 - pf.CACHE_PROBLEMS_SHOWN))

    def test_the_code_caches_are_where_the_plan_points_the_container(self):
        with open(os.path.join(ROOT, "components", "plan", "containers.ts")) as f:
            plan = f.read()
        env = dict(re.findall(r'\["((?:VLLM_CACHE_ROOT|TRITON_CACHE_DIR|TORCHINDUCTOR_CACHE_DIR))", `\$\{spec\.model\.cacheDir\}/([^`]+)`\]', plan))
        self.assertEqual(env, {name: rel for rel, name in pf.COMPILE_CACHES.items()})
        self.assertIn('["HF_HOME", spec.model.cacheDir]', plan)


class InPreflight(unittest.TestCase):
    def test_the_preflight_refuses_a_cache_dir_others_may_write(self):
        from tests.test_preflight import Preflight
        cache = scratch_dir(self)
        os.chmod(cache, 0o777)
        args = {"host": "spark-a", "platform": "linux/arm64", "gpus": 1, "cacheDir": cache,
                "fabric": {"interface": "enp1s0f1np1", "address": "192.168.100.10", "hcas": []}}
        iface = {"name": "enp1s0f1np1", "exists": True, "up": True, "addresses": ["192.168.100.10"], "hasAddress": True}
        code, _, err = Preflight.run_preflight(None, args, ([{"name": "NVIDIA GB10"}], None), ("28.5.1", True, None), iface)
        self.assertEqual(code, 1)
        self.assertEqual(len(err), 1, err)
        self.assertTrue(err[0].startswith("spark-a: spark-vllm:model.cacheDir: %s is writable by others" % cache), err)


if __name__ == "__main__":
    unittest.main()
