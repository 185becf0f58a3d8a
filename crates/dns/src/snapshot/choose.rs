//! Choosing an answer per query: the client's place group and the
//! balance variant (random, round-robin, weighted, persist).

use super::*;

/// Who asks: the source address and the client subnet a resolver sent.
#[derive(Debug, Clone, Copy)]
pub struct Client {
    pub src: IpAddr,
    pub ecs: Option<Ecs>,
}

/// What a client is placed by.
#[derive(Debug, Clone, Copy)]
pub(super) struct Placement {
    /// The address placed (and hashed by persist); none for ECS /0.
    pub(super) addr: Option<IpAddr>,
    /// The ECS source prefix, when the answer's scope must be told.
    pub(super) source: Option<u8>,
    /// The ECS address is private or otherwise unplaceable.
    pub(super) private: bool,
}

impl Client {
    /// The address a client is placed by. ECS with a source prefix of 0
    /// means "do not use my address". A private ECS address places nowhere
    /// (spec §3: default records), but its answer must still be scoped to
    /// that subnet: a resolver would otherwise serve it to every client.
    pub(super) fn placement(&self) -> Placement {
        match self.ecs {
            Some(e) if e.source_prefix == 0 => Placement {
                addr: None,
                source: None,
                private: false,
            },
            Some(e) => Placement {
                addr: Some(e.address),
                source: Some(e.source_prefix),
                private: is_private(e.address),
            },
            None => Placement {
                addr: Some(self.src),
                source: None,
                private: false,
            },
        }
    }
}

/// Which answer a client gets, and the ECS scope it depended on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub group: usize,
    pub variant: usize,
    pub scope: u8,
    /// The topology rule that decided the answer (its index among the
    /// record's rules), or [`NO_RULE`].
    pub rule: u32,
}

/// [`Choice::rule`] when no topology rule decided.
pub const NO_RULE: u32 = u32::MAX;

/// The numbers balance algorithms draw from: a round-robin counter and a
/// random sequence, one per answering thread. Seeded, so the fast and
/// general paths can be compared on the same draws.
#[derive(Debug, Clone)]
pub struct Draw {
    pub(super) counter: u64,
    pub(super) state: u64,
}

impl Draw {
    pub fn new(seed: u64) -> Self {
        Self {
            counter: seed,
            state: mix(seed) | 1,
        }
    }

    pub(super) fn next_counter(&mut self) -> u64 {
        self.counter = self.counter.wrapping_add(1);
        self.counter
    }

    /// xorshift64*: fast, and plenty for spreading answers.
    pub(super) fn next_random(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Picks the group by the client's place (its topology rules, then its
/// place table) and the variant by the balance algorithm.
pub fn choose(
    answer: &RrsetAnswer,
    topology: &Topology,
    geo: &Geo,
    client: &Client,
    draw: &mut Draw,
) -> Choice {
    let placement = client.placement();
    let Placed {
        group,
        mut scope,
        rule,
        ..
    } = place_client(answer, topology, geo, &placement);
    let g = &answer.groups[group];
    let n = g.wire.len();
    let variant = if n <= 1 {
        0
    } else {
        match answer.balance {
            Balance::RoundRobin => (draw.next_counter() % n as u64) as usize,
            Balance::Random => (draw.next_random() % n as u64) as usize,
            Balance::Priority => 0,
            Balance::Weighted => {
                let cumulative = g.cumulative();
                let total = cumulative.last().copied().unwrap_or(1).max(1);
                let r = draw.next_random() % total;
                cumulative.partition_point(|&c| c <= r)
            }
            Balance::Persist => persist_variant(g, n, &placement, &mut scope),
        }
    };
    Choice {
        group,
        variant,
        scope,
        rule: rule.map_or(NO_RULE, |r| u32::try_from(r.rule).unwrap_or(NO_RULE)),
    }
}

/// Where a client is answered from: the group, the ECS scope that
/// depended on, where GeoIP placed it (`None` when the record's answer
/// does not depend on place, or the client asked not to be placed), and
/// the topology rule or the nearest datacenter that answered, if one did.
pub(super) struct Placed {
    group: usize,
    scope: u8,
    located: Option<Located>,
    rule: Option<RuleChoice>,
    nearest: Option<NearChoice>,
    /// The client's AS number, when the record's rules read it.
    asn: Option<u32>,
}

/// Places a client for `answer`: by its topology rules (docs/topology.md),
/// else by the nearest datacenter, else by its place table, else the
/// default group.
#[inline]
fn place_client(
    answer: &RrsetAnswer,
    topology: &Topology,
    geo: &Geo,
    placement: &Placement,
) -> Placed {
    let Placement {
        addr,
        source,
        private,
    } = *placement;
    let default = Placed {
        group: answer.default_group(),
        scope: 0,
        located: None,
        rule: None,
        nearest: None,
        asn: None,
    };
    let Some(ip) = addr else {
        return default;
    };
    let rules = answer.rules();
    let near = answer.nearest();
    let places = answer.places();
    if rules.is_empty() && near.is_empty() && places.is_empty() {
        return default;
    }
    // The widest block around the client that no network of the record's
    // rules splits: the scope of what networks decided.
    let set = answer.rule_set();
    let class = if rules.is_empty() {
        gtm_model::topology::Class { id: 0, block: 0 }
    } else {
        topology.class(set, ip)
    };
    // Looked up only when a rule, the nearest datacenter or the place
    // table reads the place.
    let reads_place =
        (!rules.is_empty() && topology.uses_place(set)) || !near.is_empty() || !places.is_empty();
    let located = reads_place.then(|| geo.locate(ip));
    let (asn, asn_prefix) = if !rules.is_empty() && topology.uses_asn(set) {
        geo.asn(ip)
    } else {
        (None, 0)
    };
    let place = client_place(located, asn);
    let mut geo_used = false;
    let chosen = if rules.is_empty() {
        None
    } else {
        rule_for(rules, topology, set, class.id, &place, &mut geo_used)
    };
    let nearest = match chosen {
        None if !near.is_empty() => {
            geo_used = true;
            place.location.and_then(|at| nearest_for(near, at))
        }
        _ => None,
    };
    let group = match (chosen, nearest) {
        (Some(choice), _) => choice.group,
        (None, Some(n)) => n.group,
        (None, None) if places.is_empty() => answer.default_group(),
        (None, None) => {
            geo_used = true;
            place_group(places, answer.default_group(), &place)
        }
    };
    let width = decided_width(class.block, geo_used, located, asn_prefix);
    let scope = source.map_or(0, |src| {
        if private && chosen.is_none() && geo_used {
            src
        } else {
            width.min(src)
        }
    });
    Placed {
        group,
        scope,
        located,
        rule: chosen,
        nearest,
        asn,
    }
}

/// Where a client is as rules and views read it: its GeoIP place, and
/// its AS number when one was looked up.
#[inline]
pub(super) fn client_place(located: Option<Located>, asn: Option<u32>) -> gtm_model::place::Place {
    gtm_model::place::Place {
        asn,
        ..located.map(|l| l.place).unwrap_or_default()
    }
}

/// The width of the block an answer decided by a classification of
/// client addresses depended on: the `block` no network splits, and when
/// the client's place was read (`geo_used`) at least the GeoIP and AS
/// networks' prefixes.
#[inline]
pub(super) fn decided_width(
    block: u8,
    geo_used: bool,
    located: Option<Located>,
    asn_prefix: u8,
) -> u8 {
    if geo_used {
        block.max(located.map_or(0, |l| l.prefix)).max(asn_prefix)
    } else {
        block
    }
}

/// The scope an answer depending on the client's `width`-bit network
/// carries: that width capped at the source prefix, or the whole source
/// prefix for a private subnet (no resolver may share it further).
#[inline]
pub(super) fn cover(private: bool, width: u8, src: u8) -> u8 {
    if private { src } else { width.min(src) }
}

/// Persist's variant of group `g` (of `n` variants) for a client, raising
/// `scope` to the subnet it kept.
#[inline]
fn persist_variant(g: &Group, n: usize, placement: &Placement, scope: &mut u8) -> usize {
    let Some(ip) = placement.addr else {
        return 0;
    };
    let (subnet, width) = persist_subnet(ip);
    if let Some(src) = placement.source {
        *scope = (*scope).max(cover(placement.private, width, src));
    }
    let keys = g.keys();
    (0..n)
        .max_by_key(|&i| mix(subnet ^ keys.get(i).copied().unwrap_or(0)))
        .unwrap_or(0)
}

/// What [`choose`] does for one client, without drawing: for `explain`.
#[derive(Debug, Clone)]
pub struct Chosen {
    /// The address the client is placed by: the ECS network's, else the
    /// source's; `None` for ECS with source prefix 0.
    pub placed_by: Option<IpAddr>,
    /// The ECS source prefix, when the client sent one.
    pub source: Option<u8>,
    /// The ECS address is private: placed nowhere.
    pub private: bool,
    /// Where GeoIP placed it; `None` when the answer does not depend on
    /// place (or there was no address to place).
    pub located: Option<Located>,
    /// The table entry it matched (`None`: the default answer, or a rule's).
    pub entry: Option<PlaceKey>,
    /// The topology rule that answered it, if one did.
    pub rule: Option<RuleChoice>,
    /// The datacenter that answered it by distance, if one did.
    pub nearest: Option<NearChoice>,
    /// Its AS number, when the record's rules read one.
    pub asn: Option<u32>,
    pub group: usize,
    /// The ECS scope of the answer.
    pub scope: u8,
    /// The variants of the group the client can get, each with its weight
    /// among them (1 each but for weighted balance): one for priority,
    /// persist and a single answer.
    pub variants: Vec<(usize, u64)>,
}

/// The group and the variants [`choose`] picks among for `client`: the
/// same placement, table lookup and balance rule, listing the variants a
/// draw would pick from instead of drawing.
pub fn explain_choice(
    answer: &RrsetAnswer,
    topology: &Topology,
    geo: &Geo,
    client: &Client,
) -> Chosen {
    let placement = client.placement();
    let Placed {
        group,
        mut scope,
        located,
        rule,
        nearest,
        asn,
    } = place_client(answer, topology, geo, &placement);
    let entry = match (rule, nearest) {
        (Some(_), _) | (_, Some(_)) => None,
        (None, None) => located
            .as_ref()
            .and_then(|l| place_entry(answer.places(), &l.place).map(|(k, _)| k)),
    };
    let g = &answer.groups[group];
    let n = g.wire.len();
    let variants = if n <= 1 {
        vec![(0, 1)]
    } else {
        match answer.balance {
            Balance::RoundRobin | Balance::Random => (0..n).map(|v| (v, 1)).collect(),
            Balance::Priority => vec![(0, 1)],
            Balance::Weighted => {
                let cumulative = g.cumulative();
                (0..n)
                    .filter_map(|v| {
                        let below = v
                            .checked_sub(1)
                            .and_then(|p| cumulative.get(p).copied())
                            .unwrap_or(0);
                        let w = cumulative.get(v)?.saturating_sub(below);
                        (w > 0).then_some((v, w))
                    })
                    .collect()
            }
            Balance::Persist => vec![(persist_variant(g, n, &placement, &mut scope), 1)],
        }
    };
    Chosen {
        placed_by: placement.addr,
        source: placement.source,
        private: placement.private,
        located,
        entry,
        rule,
        nearest,
        asn,
        group,
        scope,
        variants,
    }
}

/// The subnet that keeps a persist answer: /24 for IPv4, /56 for IPv6.
pub(super) fn persist_subnet(ip: IpAddr) -> (u64, u8) {
    match ip {
        IpAddr::V4(v4) => (mix(u64::from(u32::from(v4) & 0xFFFF_FF00)), 24),
        IpAddr::V6(v6) => (mix((u128::from(v6) >> 72) as u64), 56),
    }
}
