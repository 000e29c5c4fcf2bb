// The program evaluated under mocks (tests/harness/mocks.ts: tsx, pulumi.runtime.setMocks, every registration
// recorded), as issue 17's first figures were taken ("64 hosts 24 s and 780 MiB under mocks"): for comparison with
// those only; bench/evaluate.ts measures what `pulumi preview` runs. `node --import tsx bench/mocks.ts HOSTS RUNS`
// prints one JSON line per run: resources, wall seconds (spawn to exit), CPU seconds and peak RSS of the evaluating
// process, and the load average.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { evaluateWithMocks } from "../tests/harness/mocks";
import { manyHostConfig } from "../tests/harness/many-hosts";

const [hosts, runs] = [Number(process.argv[2] ?? 64), Number(process.argv[3] ?? 1)];
for (let run = 1; run <= runs; run++) {
    const measureOut = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "spark-vllm-mocks-")), "measure.json");
    const t0 = process.hrtime.bigint();
    const e = evaluateWithMocks(manyHostConfig(hosts), { stack: "bench", measureOut });
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    if (e.error) throw new Error(`evaluation of ${hosts} hosts under mocks failed: ${e.error}`);
    const m = JSON.parse(fs.readFileSync(measureOut, "utf8")) as { maxRssKiB: number; userMicros: number; systemMicros: number };
    fs.rmSync(path.dirname(measureOut), { recursive: true, force: true });
    console.log(JSON.stringify({ hosts, run, resources: e.resources.length, wallSeconds: +wall.toFixed(2), cpuSeconds: +((m.userMicros + m.systemMicros) / 1e6).toFixed(2),
        peakRssMiB: +(m.maxRssKiB / 1024).toFixed(1), loadAverage: +os.loadavg()[0].toFixed(2) }));
}
