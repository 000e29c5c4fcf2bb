// The sim image's pinned PyPI packages (tests/sim/image-wheels.ts): every tag's transformers and Ray have a lock, and
// the locks a tag layers over each other pin their shared packages alike. No network, no Docker.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { conflictingPins, lockFile, lockPins, wheelsKey } from "../../sim/image-wheels";
import { DEFAULT_RELEASES } from "../../sim/image";

test("every sim tag declares a transformers with pinned wheels, and its Ray lock agrees with it on shared packages", () => {
    for (const [tag, r] of Object.entries(DEFAULT_RELEASES)) {
        assert.ok(r.transformers, `${tag} declares a transformers version`);
        const tf = lockPins(lockFile("transformers", r.transformers!));
        assert.match(tf.get("transformers") ?? "", new RegExp(`^${r.transformers!.replace(/\./g, "\\.")} --hash=sha256:[0-9a-f]{64}$`), tag);
        for (const [name, pin] of tf) assert.match(pin, /^\S+ --hash=sha256:[0-9a-f]{64}$/, `${tag}: ${name} is pinned with its hash`);
        if (r.ray) assert.deepEqual(conflictingPins(lockFile("transformers", r.transformers!), lockFile("ray", r.ray)), [], tag);
    }
});

test("conflictingPins names a package two locks pin differently; wheelsKey follows the locks used", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sim-wheels-"));
    try {
        const a = path.join(dir, "a.txt"), b = path.join(dir, "b.txt");
        fs.writeFileSync(a, "# comment\nrequests==2.34.2 --hash=sha256:aa\nTyping_Extensions==4.16.0 --hash=sha256:bb\n");
        fs.writeFileSync(b, "requests==2.32.0 --hash=sha256:cc\ntyping-extensions==4.16.0 --hash=sha256:bb\n");
        assert.deepEqual(conflictingPins(a, b), ["requests: a.txt pins 2.34.2, b.txt pins 2.32.0"]);
        assert.deepEqual([...lockPins(a).keys()], ["requests", "typing-extensions"]);
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
    const both = wheelsKey([{ pkg: "transformers", version: "4.57.1" }, { pkg: "ray", version: "2.60.0" }]);
    assert.equal(both, wheelsKey([{ pkg: "ray", version: "2.60.0" }, { pkg: "transformers", version: "4.57.1" }, { pkg: "ray", version: null }]));
    assert.notEqual(both, wheelsKey([{ pkg: "transformers", version: "4.56.2" }, { pkg: "ray", version: "2.60.0" }]));
    assert.throws(() => lockFile("transformers", "0.0.1"), /no pinned wheels for transformers 0\.0\.1: add .*transformers-0\.0\.1\.txt/);
});
