// The Pulumi SDK keeps a stack trace on every promise it makes: debuggablePromise stores `new Error().stack` on the
// promise (@pulumi/pulumi 3.276.0 runtime/debuggable.js), and every output property of every resource gets four such
// promises (runtime/rpc.js transferProperties), every RPC one more (runtime/settings.js rpcKeepAlive), and each
// asynchronous step of a registration others (runtime/resource.js). Those stacks are read only to print leaked
// promises when PULUMI_DEBUG_PROMISE_LEAKS is set (debuggable.js leakedPromises/promiseDebugString); under
// `pulumi up` each one is also formatted through source-map-support, which cmd/run loads first (cmd/run/index.js).
// At 64 hosts that was most of the program's CPU time (docs/benchmarks.md).
//
// "Setting it to 0 will disable stack trace collection" (Error.stackTraceLimit, https://v8.dev/docs/stack-trace-api).
// Every SDK module calls the function through the module's exports (`debuggable_1.debuggablePromise(...)`, 30 call
// sites in 3.276.0), so replacing the export reaches them all: the SDK's promises are made at a limit of 0, and
// nothing else is: every error keeps its frames, and the SDK's source positions (resource.js Resource.callsites,
// which sets its own limit) are untouched.

type DebuggablePromise = <T>(p: Promise<T>, ctx: unknown) => Promise<T>;
interface DebuggableModule { debuggablePromise: DebuggablePromise }

const FRAMELESS = Symbol.for("spark-vllm.framelessDebuggablePromise");

/** Runs `f` with Error.stackTraceLimit at 0 (no frames collected), then restores it, even on a throw. */
export function withoutFrames<T>(f: () => T): T {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
        return f();
    } finally {
        Error.stackTraceLimit = limit;
    }
}

/** The SDK's debuggable module; undefined where an SDK does not have it (nothing to drop: only slower). */
function sdkDebuggable(): DebuggableModule | undefined {
    try {
        return require("@pulumi/pulumi/runtime/debuggable") as DebuggableModule;
    } catch {
        return undefined;
    }
}

/**
 * Makes the SDK's per-promise debug stacks frameless for the rest of the process (idempotent). Untouched when
 * PULUMI_DEBUG_PROMISE_LEAKS is set, the one case the SDK reads them. `sdk` is the SDK's debuggable module (tests).
 */
export function dropPromiseStacks(sdk: DebuggableModule | undefined = sdkDebuggable()): void {
    if (process.env.PULUMI_DEBUG_PROMISE_LEAKS || !sdk) return;
    const original = sdk.debuggablePromise as DebuggablePromise & { [FRAMELESS]?: true };
    if (typeof original !== "function" || original[FRAMELESS]) return;
    const frameless = (<T>(p: Promise<T>, ctx: unknown) => withoutFrames(() => original(p, ctx))) as DebuggablePromise & { [FRAMELESS]?: true };
    frameless[FRAMELESS] = true;
    sdk.debuggablePromise = frameless;
}
