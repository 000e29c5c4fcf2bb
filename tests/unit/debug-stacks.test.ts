// Issue 17: the program builds its resources without the SDK's per-promise debug stacks (components/debugStacks.ts),
// which were most of its CPU time at 64 hosts under `pulumi up` (bench/evaluate/results.md).
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { withoutPromiseStacks } from "../../components/debugStacks";
import { manyHostConfig } from "../harness/many-hosts";
import { evaluateWithMocks } from "../harness/mocks";

// The SDK's own function (@pulumi/pulumi 3.276.0 runtime/debuggable.js): it stores `new Error().stack` on the promise.
const { debuggablePromise } = require("@pulumi/pulumi/runtime/debuggable") as { debuggablePromise: (p: Promise<unknown>, ctx: string) => Promise<unknown> };
const stackOf = (p: Promise<unknown>) => String((p as { _debugStackTrace?: string })._debugStackTrace);
const framed = /\n\s+at /;

test("inside withoutPromiseStacks the SDK's debug stack has no frames; the limit is restored after, even on a throw", () => {
    const before = Error.stackTraceLimit;
    const outside = Promise.resolve(1);
    debuggablePromise(outside, "outside");
    assert.match(stackOf(outside), framed);
    const inside = Promise.resolve(2);
    assert.equal(withoutPromiseStacks(() => (debuggablePromise(inside, "inside"), 7)), 7);
    assert.equal(stackOf(inside), "Error");
    assert.equal(Error.stackTraceLimit, before);
    assert.throws(() => withoutPromiseStacks(() => { throw new Error("the message stays"); }), /the message stays/);
    assert.equal(Error.stackTraceLimit, before);
});

test("with PULUMI_DEBUG_PROMISE_LEAKS set (the one case the SDK prints those stacks) they keep their frames", () => {
    process.env.PULUMI_DEBUG_PROMISE_LEAKS = "1";
    try {
        const p = Promise.resolve(3);
        withoutPromiseStacks(() => debuggablePromise(p, "debugging"));
        assert.match(stackOf(p), framed);
    } finally {
        delete process.env.PULUMI_DEBUG_PROMISE_LEAKS;
    }
});

test("the program: almost none of the SDK's debug stacks hold frames (only those taken after construction, a few per resource)", () => {
    const e = evaluateWithMocks(manyHostConfig(8));
    assert.equal(e.error, undefined);
    const { total, withFrames } = e.debugStacks!;
    // Four per output property of every resource are taken while SparkCluster is built (rpc.js transferProperties).
    assert.ok(total > 20 * e.resources.length, `${total} debug stacks for ${e.resources.length} resources`);
    assert.ok(withFrames < total / 5, `${withFrames} of ${total} debug stacks hold frames`);
});
