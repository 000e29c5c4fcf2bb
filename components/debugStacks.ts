// The Pulumi SDK keeps a stack trace on every promise it makes: debuggablePromise stores `new Error().stack` on the
// promise (@pulumi/pulumi 3.276.0 runtime/debuggable.js), and every output property of every resource gets four such
// promises (runtime/rpc.js transferProperties). Those stacks are read only to print leaked promises when
// PULUMI_DEBUG_PROMISE_LEAKS is set (debuggable.js leakedPromises/promiseDebugString); under `pulumi up` each one is
// also formatted through source-map-support, which cmd/run loads first (cmd/run/index.js). At 64 hosts that was most
// of the program's CPU time. "Setting it to 0 will disable stack trace collection" (Error.stackTraceLimit,
// https://v8.dev/docs/stack-trace-api), and the SDK raises the limit itself where it needs frames: the source
// position of each resource (resource.js Resource.callsites sets it to Infinity and restores it).

/**
 * Runs `build` (constructing resources) with Error.stackTraceLimit at 0, then restores it. An error thrown inside
 * keeps its message, without frames. Untouched when PULUMI_DEBUG_PROMISE_LEAKS is set, the one case the SDK reads
 * those stacks.
 */
export function withoutPromiseStacks<T>(build: () => T): T {
    if (process.env.PULUMI_DEBUG_PROMISE_LEAKS) return build();
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
        return build();
    } finally {
        Error.stackTraceLimit = limit;
    }
}
