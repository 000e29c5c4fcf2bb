// Issue 17: the SDK's per-promise debug stacks are made without frames (components/debugStacks.ts), which were most
// of the program's CPU time at 64 hosts under `pulumi up` (docs/benchmarks.md); every other stack keeps its frames.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { dropPromiseStacks, withoutFrames } from "../../components/debugStacks";
import { manyHostConfig } from "../harness/many-hosts";
import { evaluateWithMocks } from "../harness/mocks";

// The SDK's own module (@pulumi/pulumi 3.276.0 runtime/debuggable.js): debuggablePromise stores `new Error().stack` on the promise.
type Debuggable = { debuggablePromise: <T>(p: Promise<T>, ctx: unknown) => Promise<T> };
const sdk = require("@pulumi/pulumi/runtime/debuggable") as Debuggable;
const stackOf = (p: Promise<unknown>) => String((p as { _debugStackTrace?: string })._debugStackTrace);
const framed = /\n\s+at /;
/** A copy of the module's exports, so the tests do not change the SDK this process shares. */
const copy = (): Debuggable => ({ debuggablePromise: sdk.debuggablePromise });

test("after dropPromiseStacks the SDK's debug stacks have no frames; other stacks keep theirs; the limit is unchanged", () => {
    const before = Error.stackTraceLimit;
    const module = copy();
    const outside = Promise.resolve(1);
    module.debuggablePromise(outside, "before");
    assert.match(stackOf(outside), framed);
    dropPromiseStacks(module);
    const inside = Promise.resolve(2);
    module.debuggablePromise(inside, "after");
    assert.equal(stackOf(inside), "Error");
    assert.equal(Error.stackTraceLimit, before);
    assert.match(String(new Error("a program error").stack), framed);
    // Idempotent: a second call does not wrap the wrapper.
    const once = module.debuggablePromise;
    dropPromiseStacks(module);
    assert.equal(module.debuggablePromise, once);
});

test("an SDK without the function is left as it is (only slower)", () => {
    const other = { debuggablePromise: undefined } as unknown as Debuggable;
    assert.doesNotThrow(() => dropPromiseStacks(other));
    assert.equal(other.debuggablePromise, undefined);
});

test("withoutFrames restores the limit, even on a throw, and the error keeps its message", () => {
    const before = Error.stackTraceLimit;
    assert.equal(withoutFrames(() => 7), 7);
    assert.throws(() => withoutFrames(() => { throw new Error("the message stays"); }), /the message stays/);
    assert.equal(Error.stackTraceLimit, before);
});

test("with PULUMI_DEBUG_PROMISE_LEAKS set (the one case the SDK prints those stacks) they keep their frames", () => {
    process.env.PULUMI_DEBUG_PROMISE_LEAKS = "1";
    try {
        const module = copy();
        dropPromiseStacks(module);
        assert.equal(module.debuggablePromise, sdk.debuggablePromise);
        const p = Promise.resolve(3);
        module.debuggablePromise(p, "debugging");
        assert.match(stackOf(p), framed);
    } finally {
        delete process.env.PULUMI_DEBUG_PROMISE_LEAKS;
    }
});

test("the program: none of the SDK's debug stacks hold frames, during construction or after (a few per resource)", () => {
    const e = evaluateWithMocks(manyHostConfig(8));
    assert.equal(e.error, undefined);
    const { total, withFrames } = e.debugStacks!;
    // Four per output property of every resource (rpc.js transferProperties), more in each registration's steps.
    assert.ok(total > 20 * e.resources.length, `${total} debug stacks for ${e.resources.length} resources`);
    // Only those the SDK made before the program started (its settings, the stack resource) may hold frames.
    assert.ok(withFrames < 20, `${withFrames} of ${total} debug stacks hold frames`);
});
