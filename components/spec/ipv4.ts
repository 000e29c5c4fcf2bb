// Dotted IPv4 addresses: parsing and which ones cannot be a host's fabric address. Pure; used by parseSpec.ts and
// fabricConfig.ts (its own file so that neither imports the other).

/** The four octets of a dotted IPv4 address, or undefined. */
export function parseIPv4(s: string): number[] | undefined {
    const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
    if (!m) return undefined;
    const parts = m.slice(1).map(Number);
    return parts.every(p => p <= 255) && m.slice(1).every(p => p === "0" || !p.startsWith("0")) ? parts : undefined;
}

/**
 * Why an IPv4 address cannot be a host's fabric address (the address the other hosts reach it at), or
 * undefined. Ranges from the IANA special-purpose registry (RFC 6890): 0.0.0.0/8 "this network" (RFC 1122
 * 3.2.1.3; 0.0.0.0 binds every interface), 127.0.0.0/8 loopback, 224.0.0.0/4 multicast (RFC 5771), 240.0.0.0/4
 * reserved and 255.255.255.255 limited broadcast (RFC 919). Link-local 169.254.0.0/16 is accepted: two Sparks on one
 * cable reach each other on it (linkLocalNotes).
 */
export function unusableAddress(p: number[]): string | undefined {
    if (p[0] === 0) return p.every(x => x === 0) ? "0.0.0.0 means any address, not one host" : "in 0.0.0.0/8 (\"this network\"), not a host address";
    if (p[0] === 127) return "a loopback address: the other hosts cannot reach it";
    if (p[0] >= 224 && p[0] <= 239) return "a multicast address (224.0.0.0/4)";
    if (p.every(x => x === 255)) return "the broadcast address";
    if (p[0] >= 240) return "in the reserved range 240.0.0.0/4";
    return undefined;
}

/** 169.254.0.0/16, IPv4 link-local (RFC 3927). */
export const isLinkLocal = (p: number[]): boolean => p[0] === 169 && p[1] === 254;
