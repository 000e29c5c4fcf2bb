// `spark-vllm plan` with spark-vllm:fabric.setup on: each host's planned drop-in and addresses, said to be applied by
// hand (nothing writes it yet), in the text and in --json; nothing of it with setup off.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as yaml from "js-yaml";

const ROOT = path.join(__dirname, "..", "..", "..");

/** Pulumi.spark.yaml with its hosts' fabric removed and `fabric` as spark-vllm:fabric; plan's result. */
function planWith(fabric: Record<string, unknown> | undefined, json: boolean) {
    const doc = yaml.load(fs.readFileSync(path.join(ROOT, "Pulumi.spark.yaml"), "utf8")) as { config: Record<string, any> };
    if (fabric) {
        for (const h of doc.config["spark-vllm:hosts"]) delete h.fabric;
        doc.config["spark-vllm:fabric"] = fabric;
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "plan-fabric-"));
    try {
        fs.writeFileSync(path.join(dir, "Pulumi.fab.yaml"), yaml.dump(doc));
        return spawnSync(process.execPath, [path.join(ROOT, "bin", "spark-vllm.js"), "plan", "--stack", "fab", "--dir", dir, ...(json ? ["--json"] : [])], { cwd: ROOT, encoding: "utf8" });
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}

test("setup on: plan shows each host's drop-in, its path and mode, and the pairs' twins, and says it is not applied", () => {
    const r = planWith({ setup: true, subnets: ["10.50.0.0/24", "10.51.0.0/24"] }, false);
    assert.equal(r.status, 0, r.stderr);
    for (const expected of [
        "== fabric setup (spark-vllm:fabric.setup): NOT applied by spark-vllm yet; apply each drop-in by hand (docs/deploy.md)",
        "  spark-b: /etc/netplan/60-spark-vllm-fabric.yaml (mode 0600), then `sudo netplan apply`",
        "    network:\n      version: 2\n      ethernets:\n        enp1s0f1np1:\n          dhcp4: false\n          addresses:\n            - 10.50.0.11/24\n          mtu: 9000\n",
        "  spark-a <-> spark-b: 10.50.0.0/24 (spark-a enp1s0f1np1 10.50.0.10, spark-b enp1s0f1np1 10.50.0.11); 10.51.0.0/24 (spark-a enP2p1s0f1np1 10.51.0.10, spark-b enP2p1s0f1np1 10.51.0.11)",
        // The planned addresses are the hosts' fabric everywhere else in the plan.
        "spark-a (head) ssh nvidia@spark-a.local:22, 1 GPU, fabric enp1s0f1np1 10.50.0.10, HCAs rocep1s0f1, roceP2p1s0f1",
        "spark-b: ray start --address=10.50.0.10:6379 --node-ip-address=10.50.0.11",
    ]) assert.ok(r.stdout.includes(expected), `missing:\n${expected}\nin:\n${r.stdout}`);
});

test("setup on, --json: fabricSetup holds each host's drop-in text (what netplan reads back as the planned addresses), applied false", () => {
    const r = planWith({ setup: true, topology: "direct", port: 0, mtu: 4000 }, true);
    assert.equal(r.status, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.equal(report.fabricSetup.applied, false);
    assert.deepEqual(report.fabricSetup.hosts.map((h: { host: string; path: string; mode: string }) => `${h.host} ${h.path} ${h.mode}`),
        ["spark-a /etc/netplan/60-spark-vllm-fabric.yaml 0600", "spark-b /etc/netplan/60-spark-vllm-fabric.yaml 0600"]);
    assert.deepEqual(yaml.load(report.fabricSetup.hosts[0].yaml), { network: { version: 2, ethernets: {
        enp1s0f0np0: { dhcp4: false, addresses: ["192.168.100.10/24"], mtu: 4000 },
        enP2p1s0f0np0: { dhcp4: false, addresses: ["192.168.101.10/24"], mtu: 4000 },
    } } });
    assert.deepEqual(report.hosts.map((h: { fabric: { address: string } }) => h.fabric.address), ["192.168.100.10", "192.168.100.11"]);
});

test("setup off (every committed stack's shape): no fabric setup section, no fabricSetup key", () => {
    const text = planWith(undefined, false);
    assert.equal(text.status, 0, text.stderr);
    assert.ok(!text.stdout.includes("fabric setup"));
    const json = planWith(undefined, true);
    assert.equal(JSON.parse(json.stdout).fabricSetup, undefined);
});
