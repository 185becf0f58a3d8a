//! IPv6 forms of IPv4 addresses, shared by the probe fence and the ECS
//! "private or unroutable" rule so both judge an address the same way.

use std::net::{Ipv4Addr, Ipv6Addr};

/// The IPv4 address an IPv6 address carries, where the packets go to it:
/// IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d` (deprecated,
/// but still routed by some stacks; `::` and `::1` are IPv6's own) and the
/// NAT64 well-known prefix `64:ff9b::/96` (RFC 6052), which a NAT64 gateway
/// translates to the IPv4 address.
pub fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let [a, b, c, d] = v6.octets()[12..] else {
        return None;
    };
    let v4 = Ipv4Addr::new(a, b, c, d);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(v4),
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, _, _] => Some(v4),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(v4),
        _ => None,
    }
}
