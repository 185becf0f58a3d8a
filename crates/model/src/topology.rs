//! Where a client is, for topology rules (docs/topology.md): the compiled
//! regions and rule places ([`Matcher`]s), and the classification of
//! client addresses that finds, per query, which of them hold a client.
//!
//! Every network any matcher names cuts the address space into intervals
//! in which the same networks hold every address: a *class*. A query's
//! address is classed once (a binary search over the intervals); each
//! class lists, per matcher, the network members that hold it, longest
//! first. Countries and continents come from the client's GeoIP place.
//! The interval around the address gives the widest block no network
//! splits: the ECS scope an answer decided by networks can carry.

use std::{collections::HashMap, net::IpAddr};

use crate::{
    node::Network,
    place::{Continent, Country, Place, Subdivision},
};

/// A place a matcher holds or excludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Leaf {
    /// An index into [`Topology::networks`].
    Network(u32),
    Country(Country),
    Continent(Continent),
    Subdivision(Subdivision),
    /// An autonomous system, by its number.
    Asn(u32),
}

/// One way a client is in a matcher: `leaf` holds it and none of
/// `excluded` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub leaf: Leaf,
    pub excluded: Box<[Leaf]>,
}

/// A compiled client place: a named region, or the one place a rule
/// names (`10.20.0.0/16`, `country:US`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    /// `region:NAME`, `10.20.0.0/16`, `country:US`, `continent:EU`.
    pub name: String,
    pub terms: Box<[Term]>,
}

/// How closely a client matched: a network's prefix beats a
/// subdivision, a subdivision a country, a country a continent. Compared
/// within one address family only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Closeness {
    Continent,
    Country,
    Subdivision,
    Asn,
    Network(u8),
}

impl Closeness {
    pub fn describe(self) -> String {
        match self {
            Self::Continent => "by continent".into(),
            Self::Country => "by country".into(),
            Self::Subdivision => "by subdivision".into(),
            Self::Asn => "by AS number".into(),
            Self::Network(p) => format!("by a /{p} network"),
        }
    }
}

/// Whether matching looked at the client's country or continent: in an
/// exclusion of a network member, or in a member or exclusion of a
/// country or continent one. An answer that depended on them is scoped to
/// the GeoIP database's network too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Consulted {
    pub by_exclusion: bool,
    pub by_place: bool,
}

/// What classing a client address found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    pub id: u32,
    /// The shortest prefix whose block around the address no network of
    /// any matcher splits.
    pub block: u8,
}

/// The networks that hold one class of addresses, and per matcher the
/// terms with a network leaf among them (sorted by matcher, then longest
/// prefix first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ClassInfo {
    nets: Box<[u32]>,
    held: Box<[(u32, u8, u32)]>,
}

/// One address family's intervals: each start (an IPv4 address widened)
/// and its class, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Intervals {
    starts: Box<[u128]>,
    classes: Box<[u32]>,
    /// With many intervals: per value of an address's top 16 bits, the
    /// first interval starting there or after (65,537 entries), so that a
    /// lookup searches only the intervals of its bucket (a 100,000-network
    /// list searched 3 MiB, missing the cache at each step).
    buckets: Box<[u32]>,
    /// The shift that leaves an address's top 16 bits: 16 for IPv4, 112
    /// for IPv6.
    shift: u32,
}

impl Intervals {
    /// Intervals from `(start, class)` sorted by start, for a family of
    /// `width` bits.
    fn of(list: Vec<(u128, u32)>, width: u32) -> Self {
        let starts: Box<[u128]> = list.iter().map(|(s, _)| *s).collect();
        let shift = width - 16;
        let buckets = if starts.len() > BUCKETED {
            // The entry after the last bucket is the end of the list:
            // `1 << 16` shifted into an IPv6 address's top bits is past
            // its 128 bits.
            (0..1u128 << 16)
                .map(|b| starts.partition_point(|s| *s < (b << shift)) as u32)
                .chain([starts.len() as u32])
                .collect()
        } else {
            Box::default()
        };
        Self {
            classes: list.iter().map(|(_, c)| *c).collect(),
            starts,
            buckets,
            shift,
        }
    }
}

/// Lists of more intervals than this are looked up by bucket.
const BUCKETED: usize = 1024;

/// The compiled regions and rule places of a configuration, and the
/// classification of client addresses by their networks: one per *rule
/// set* (the matchers of one list of rules: a domain's, or a record's
/// own), so that the block around a client is split only by the networks
/// the record's own rules name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    pub networks: Box<[Network]>,
    pub matchers: Box<[Matcher]>,
    /// Named regions: their name and matcher.
    pub regions: Box<[(String, u32)]>,
    /// Per matcher, its terms with an AS number, subdivision, country or
    /// continent leaf (term indexes), closest first.
    geo_terms: Box<[Box<[u32]>]>,
    /// One per rule set.
    classifiers: Box<[Classifier]>,
    /// Per rule set: whether a matcher of it names a subdivision, country
    /// or continent (a member or an exclusion), so that a client's GeoIP
    /// place is looked up for it at all.
    uses_place: Box<[bool]>,
    /// Per rule set: whether a matcher of it names an AS number, so that
    /// a client's ASN is looked up for it.
    uses_asn: Box<[bool]>,
}

/// The classes of the addresses for one rule set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Classifier {
    classes: Box<[ClassInfo]>,
    v4: Intervals,
    v6: Intervals,
}

/// An address as its family's bits.
#[derive(Clone, Copy)]
enum Bits {
    V4(u32),
    V6(u128),
}

fn bits(ip: IpAddr) -> Bits {
    match ip.to_canonical() {
        IpAddr::V4(v4) => Bits::V4(u32::from(v4)),
        IpAddr::V6(v6) => Bits::V6(u128::from(v6)),
    }
}

/// A network's first and last address, in its family's bits widened to
/// 128, and whether it is IPv4.
fn range(n: &Network) -> (bool, u128, u128) {
    match bits(n.addr) {
        Bits::V4(a) => {
            let host = u32::MAX.checked_shr(u32::from(n.prefix)).unwrap_or(0);
            (true, u128::from(a & !host), u128::from(a | host))
        }
        Bits::V6(a) => {
            let host = u128::MAX.checked_shr(u32::from(n.prefix)).unwrap_or(0);
            (false, a & !host, a | host)
        }
    }
}

impl Topology {
    /// Builds the classification of client addresses for each rule set
    /// of `sets` (the matchers of one list of rules). Linear in the
    /// networks (after sorting them) and the terms, per set.
    pub fn build(
        networks: Vec<Network>,
        matchers: Vec<Matcher>,
        regions: Vec<(String, u32)>,
        sets: &[Vec<u32>],
    ) -> Self {
        let mut geo_terms = Vec::with_capacity(matchers.len());
        for matcher in &matchers {
            let mut asns = Vec::new();
            let mut subdivisions = Vec::new();
            let mut countries = Vec::new();
            let mut continents = Vec::new();
            for (t, term) in matcher.terms.iter().enumerate() {
                match term.leaf {
                    Leaf::Network(_) => {}
                    Leaf::Asn(_) => asns.push(t as u32),
                    Leaf::Subdivision(_) => subdivisions.push(t as u32),
                    Leaf::Country(_) => countries.push(t as u32),
                    Leaf::Continent(_) => continents.push(t as u32),
                }
            }
            asns.extend(subdivisions);
            asns.extend(countries);
            asns.extend(continents);
            geo_terms.push(asns.into_boxed_slice());
        }
        let classifiers = sets
            .iter()
            .map(|set| Classifier::build(&networks, &matchers, set))
            .collect();
        let uses = |wanted: fn(&Leaf) -> bool| -> Box<[bool]> {
            sets.iter()
                .map(|set| {
                    set.iter()
                        .filter_map(|m| matchers.get(*m as usize))
                        .flat_map(|m| m.terms.iter())
                        .flat_map(|t| std::iter::once(&t.leaf).chain(t.excluded.iter()))
                        .any(wanted)
                })
                .collect()
        };
        let uses_place = uses(|l| !matches!(l, Leaf::Network(_) | Leaf::Asn(_)));
        let uses_asn = uses(|l| matches!(l, Leaf::Asn(_)));
        Self {
            networks: networks.into_boxed_slice(),
            matchers: matchers.into_boxed_slice(),
            regions: regions.into_boxed_slice(),
            geo_terms: geo_terms.into_boxed_slice(),
            classifiers,
            uses_place,
            uses_asn,
        }
    }

    /// Whether no matcher names a network: every address is one class.
    pub fn is_empty(&self) -> bool {
        self.matchers.is_empty()
    }

    /// Whether the rules of set `set` read a client's GeoIP place.
    #[inline]
    pub fn uses_place(&self, set: u32) -> bool {
        self.uses_place.get(set as usize).copied().unwrap_or(false)
    }

    /// Whether the rules of set `set` read a client's AS number.
    #[inline]
    pub fn uses_asn(&self, set: u32) -> bool {
        self.uses_asn.get(set as usize).copied().unwrap_or(false)
    }

    /// The class of `ip` for rule set `set`, and the block around it no
    /// network of the set splits.
    #[inline]
    pub fn class(&self, set: u32, ip: IpAddr) -> Class {
        let Some(c) = self.classifiers.get(set as usize) else {
            return Class { id: 0, block: 0 };
        };
        c.class(ip)
    }

    /// How closely `matcher` holds a client of `class` (of rule set
    /// `set`) in `place`; `None` when it does not. `geo` says whether the
    /// client's country or continent was looked at, and where.
    #[inline]
    pub fn closeness(
        &self,
        matcher: u32,
        set: u32,
        class: u32,
        place: &Place,
        geo: &mut Consulted,
    ) -> Option<Closeness> {
        let info = self
            .classifiers
            .get(set as usize)?
            .classes
            .get(class as usize)?;
        self.closeness_in(matcher, info, place, geo)
    }

    fn closeness_in(
        &self,
        matcher: u32,
        info: &ClassInfo,
        place: &Place,
        geo: &mut Consulted,
    ) -> Option<Closeness> {
        let m = self.matchers.get(matcher as usize)?;
        let from = info.held.partition_point(|h| h.0 < matcher);
        for &(hm, prefix, term) in &info.held[from..] {
            if hm != matcher {
                break;
            }
            let Some(t) = m.terms.get(term as usize) else {
                continue;
            };
            if !self.excluded(t, info, place, &mut geo.by_exclusion) {
                return Some(Closeness::Network(prefix));
            }
        }
        let terms = self.geo_terms.get(matcher as usize)?;
        for &term in terms.iter() {
            let Some(t) = m.terms.get(term as usize) else {
                continue;
            };
            let (holds, closeness) = match t.leaf {
                Leaf::Subdivision(d) => (place.subdivision == Some(d), Closeness::Subdivision),
                Leaf::Country(c) => (place.country == Some(c), Closeness::Country),
                Leaf::Continent(k) => (place.continent == Some(k), Closeness::Continent),
                Leaf::Asn(n) => (place.asn == Some(n), Closeness::Asn),
                Leaf::Network(_) => (false, Closeness::Continent),
            };
            geo.by_place = true;
            if holds && !self.excluded(t, info, place, &mut geo.by_place) {
                return Some(closeness);
            }
        }
        None
    }

    /// Whether an exclusion of `t` holds the client; `geo` set when one
    /// that is a country or continent was looked at.
    fn excluded(&self, t: &Term, info: &ClassInfo, place: &Place, geo: &mut bool) -> bool {
        t.excluded.iter().any(|x| match *x {
            Leaf::Network(n) => info.nets.binary_search(&n).is_ok(),
            Leaf::Country(c) => {
                *geo = true;
                place.country == Some(c)
            }
            Leaf::Continent(k) => {
                *geo = true;
                place.continent == Some(k)
            }
            Leaf::Subdivision(d) => {
                *geo = true;
                place.subdivision == Some(d)
            }
            Leaf::Asn(n) => {
                *geo = true;
                place.asn == Some(n)
            }
        })
    }

    /// The matcher of the named region `name`.
    pub fn region(&self, name: &str) -> Option<u32> {
        self.regions
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, m)| *m)
    }
}

impl Classifier {
    /// The classes of addresses by the networks the terms of `set`'s
    /// matchers name (members and exclusions).
    fn build(networks: &[Network], matchers: &[Matcher], set: &[u32]) -> Self {
        // Per network, the (matcher, term) pairs whose leaf it is; and
        // every network the set names.
        let mut leaf_of: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
        let mut named: Vec<u32> = Vec::new();
        for &m in set {
            let Some(matcher) = matchers.get(m as usize) else {
                continue;
            };
            for (t, term) in matcher.terms.iter().enumerate() {
                if let Leaf::Network(n) = term.leaf {
                    leaf_of.entry(n).or_default().push((m, t as u32));
                    named.push(n);
                }
                named.extend(term.excluded.iter().filter_map(|x| match x {
                    Leaf::Network(n) => Some(*n),
                    _ => None,
                }));
            }
        }
        named.sort_unstable();
        named.dedup();
        let mut classes: Vec<ClassInfo> = vec![ClassInfo::default()];
        let mut interned: HashMap<Box<[u32]>, u32> = HashMap::new();
        interned.insert(Box::default(), 0);
        let mut class_of = |nets: Vec<u32>| -> u32 {
            if let Some(&id) = interned.get(nets.as_slice()) {
                return id;
            }
            let mut held: Vec<(u32, u8, u32)> = nets
                .iter()
                .flat_map(|n| {
                    let prefix = networks.get(*n as usize).map_or(0, |x| x.prefix);
                    leaf_of
                        .get(n)
                        .into_iter()
                        .flatten()
                        .map(move |&(m, t)| (m, prefix, t))
                })
                .collect();
            held.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
            let id = classes.len() as u32;
            classes.push(ClassInfo {
                nets: nets.clone().into_boxed_slice(),
                held: held.into_boxed_slice(),
            });
            interned.insert(nets.into_boxed_slice(), id);
            id
        };
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for &i in &named {
            let Some(n) = networks.get(i as usize) else {
                continue;
            };
            let (is_v4, first, last) = range(n);
            let list = if is_v4 { &mut v4 } else { &mut v6 };
            list.push((first, last, i));
        }
        let v4 = sweep(&mut v4, u128::from(u32::MAX), &mut class_of);
        let v6 = sweep(&mut v6, u128::MAX, &mut class_of);
        Self {
            classes: classes.into_boxed_slice(),
            v4: Intervals::of(v4, 32),
            v6: Intervals::of(v6, 128),
        }
    }

    #[inline]
    fn class(&self, ip: IpAddr) -> Class {
        match bits(ip) {
            Bits::V4(a) => {
                let a = u128::from(a);
                let (id, first, last) = locate(&self.v4, a, u128::from(u32::MAX));
                Class {
                    id,
                    block: block(a, first, last, 32),
                }
            }
            Bits::V6(a) => {
                let (id, first, last) = locate(&self.v6, a, u128::MAX);
                Class {
                    id,
                    block: block(a, first, last, 128),
                }
            }
        }
    }
}

/// The class of `a` among `iv` and its interval's first and last address
/// (`max`: the family's last address).
#[inline]
fn locate(iv: &Intervals, a: u128, max: u128) -> (u32, u128, u128) {
    let bucket = (a >> iv.shift) as usize;
    let i = match (iv.buckets.get(bucket), iv.buckets.get(bucket + 1)) {
        (Some(&lo), Some(&hi)) => {
            let (lo, hi) = (lo as usize, hi as usize);
            lo + iv
                .starts
                .get(lo..hi)
                .map_or(0, |s| s.partition_point(|s| *s <= a))
        }
        _ => iv.starts.partition_point(|s| *s <= a),
    };
    let Some(i) = i.checked_sub(1) else {
        // Never so: the sweep starts at 0.
        return (0, a, a);
    };
    let last = iv.starts.get(i + 1).map_or(max, |next| next - 1);
    (iv.classes.get(i).copied().unwrap_or(0), iv.starts[i], last)
}

/// The shortest prefix whose block around `a` lies within `first..=last`
/// (in a `width`-bit family).
#[inline]
fn block(a: u128, first: u128, last: u128, width: u8) -> u8 {
    let fits = |p: u8| {
        let host = if p >= width {
            0
        } else {
            (u128::MAX >> (128 - u32::from(width))) >> u32::from(p)
        };
        (a & !host) >= first && (a | host) <= last
    };
    // Longer prefixes make smaller blocks: the first that fits.
    let (mut lo, mut hi) = (0u8, width);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// Cuts `0..=max` into intervals by the networks `nets` (first, last,
/// index), each with the class of the networks that hold it.
fn sweep(
    nets: &mut [(u128, u128, u32)],
    max: u128,
    class_of: &mut impl FnMut(Vec<u32>) -> u32,
) -> Vec<(u128, u32)> {
    // Every point where the set of holding networks may change.
    let mut cuts: Vec<u128> = Vec::with_capacity(nets.len() * 2 + 1);
    cuts.push(0);
    for (first, last, _) in nets.iter() {
        cuts.push(*first);
        if *last < max {
            cuts.push(last + 1);
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    // Networks by first address; those open at a cut are kept on a stack
    // of nested ranges (networks nest or are apart).
    nets.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut out: Vec<(u128, u32)> = Vec::with_capacity(cuts.len());
    let mut open: Vec<(u128, u32)> = Vec::new();
    let mut next = 0;
    for cut in cuts {
        open.retain(|(last, _)| *last >= cut);
        while let Some(&(first, last, i)) = nets.get(next) {
            if first > cut {
                break;
            }
            if last >= cut {
                open.push((last, i));
            }
            next += 1;
        }
        let mut held: Vec<u32> = open.iter().map(|(_, i)| *i).collect();
        held.sort_unstable();
        held.dedup();
        let class = class_of(held);
        if out.last().is_some_and(|(_, c)| *c == class) {
            continue;
        }
        out.push((cut, class));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(text: &str) -> Network {
        Network::try_from(text.to_string()).unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn term(leaf: Leaf, excluded: &[Leaf]) -> Term {
        Term {
            leaf,
            excluded: excluded.into(),
        }
    }

    /// Two matchers: `a` holds 10.0.0.0/8 but not 10.1.0.0/16, and DE;
    /// `b` holds 10.1.2.0/24 and the continent EU but not FR.
    fn topology() -> Topology {
        let networks = vec![net("10.0.0.0/8"), net("10.1.0.0/16"), net("10.1.2.0/24")];
        let de = Country::parse("DE").unwrap();
        let fr = Country::parse("FR").unwrap();
        let matchers = vec![
            Matcher {
                name: "region:a".into(),
                terms: Box::new([
                    term(Leaf::Network(0), &[Leaf::Network(1)]),
                    term(Leaf::Country(de), &[]),
                ]),
            },
            Matcher {
                name: "region:b".into(),
                terms: Box::new([
                    term(Leaf::Network(2), &[]),
                    term(Leaf::Continent(Continent::Eu), &[Leaf::Country(fr)]),
                ]),
            },
        ];
        Topology::build(
            networks,
            matchers,
            vec![("a".into(), 0), ("b".into(), 1)],
            &[vec![0, 1], vec![1], Vec::new()],
        )
    }

    fn closeness(t: &Topology, m: u32, addr: &str, place: Place) -> Option<Closeness> {
        let class = t.class(0, ip(addr));
        t.closeness(m, 0, class.id, &place, &mut Consulted::default())
    }

    #[test]
    fn an_as_number_holds_closer_than_a_subdivision_and_less_than_a_network() {
        let de = Country::parse("DE").unwrap();
        let by = Subdivision::parse("DE-BY").unwrap();
        let matchers = vec![Matcher {
            name: "region:carriers".into(),
            terms: Box::new([
                term(Leaf::Network(0), &[]),
                term(Leaf::Subdivision(by), &[]),
                term(Leaf::Asn(64500), &[Leaf::Country(de)]),
                term(Leaf::Asn(64501), &[]),
            ]),
        }];
        let t = Topology::build(
            vec![net("10.0.0.0/8")],
            matchers,
            vec![("carriers".into(), 0)],
            &[vec![0]],
        );
        assert!(t.uses_asn(0) && t.uses_place(0));
        let at = |asn: Option<u32>, country: &str, sub: Option<Subdivision>| Place {
            asn,
            country: Country::parse(country),
            subdivision: sub,
            ..Place::default()
        };
        let by_asn = |addr, place| closeness(&t, 0, addr, place);
        assert_eq!(
            by_asn("10.1.1.1", at(Some(64501), "DE", Some(by))),
            Some(Closeness::Network(8)),
            "a network first"
        );
        assert_eq!(
            by_asn("192.0.2.1", at(Some(64501), "DE", Some(by))),
            Some(Closeness::Asn),
            "then the AS number, before the subdivision"
        );
        assert_eq!(
            by_asn("192.0.2.1", at(Some(64500), "DE", Some(by))),
            Some(Closeness::Subdivision),
            "AS64500 is excluded in DE: the subdivision holds"
        );
        assert_eq!(
            by_asn("192.0.2.1", at(Some(64500), "FR", None)),
            Some(Closeness::Asn)
        );
        assert_eq!(by_asn("192.0.2.1", at(Some(64999), "FR", None)), None);
        assert!(Closeness::Network(0) > Closeness::Asn && Closeness::Asn > Closeness::Subdivision);
        // A rule set without AS numbers never looks one up.
        assert!(!topology().uses_asn(0));
    }

    #[test]
    fn networks_exclusions_and_places_hold_clients_as_written() {
        let t = topology();
        let nowhere = Place::default();
        let de = Place {
            country: Country::parse("DE"),
            continent: Some(Continent::Eu),
            subdivision: Subdivision::parse("DE-BY"),
            ..Place::default()
        };
        let fr = Place {
            country: Country::parse("FR"),
            continent: Some(Continent::Eu),
            subdivision: None,
            ..Place::default()
        };
        assert_eq!(
            closeness(&t, 0, "10.9.9.9", nowhere),
            Some(Closeness::Network(8))
        );
        // Excluded by 10.1.0.0/16, and not in DE.
        assert_eq!(closeness(&t, 0, "10.1.9.9", nowhere), None);
        assert_eq!(closeness(&t, 0, "10.1.9.9", de), Some(Closeness::Country));
        assert_eq!(closeness(&t, 0, "192.0.2.1", de), Some(Closeness::Country));
        assert_eq!(closeness(&t, 0, "192.0.2.1", nowhere), None);
        assert_eq!(
            closeness(&t, 1, "10.1.2.3", nowhere),
            Some(Closeness::Network(24))
        );
        assert_eq!(
            closeness(&t, 1, "192.0.2.1", de),
            Some(Closeness::Continent)
        );
        assert_eq!(closeness(&t, 1, "192.0.2.1", fr), None, "FR is excluded");
    }

    #[test]
    fn the_block_around_a_client_is_the_widest_no_network_splits() {
        let t = topology();
        let block = |set: u32, a: &str| t.class(set, ip(a)).block;
        // In 10.0.0.0/8 outside 10.1.0.0/16: the block stops short of it.
        assert_eq!(block(0, "10.9.9.9"), 13);
        assert_eq!(block(0, "10.200.0.1"), 9);
        // In the /24: the /24.
        assert_eq!(block(0, "10.1.2.200"), 24);
        // Outside every network.
        assert_eq!(block(0, "192.0.2.1"), 1);
        assert_eq!(block(0, "11.0.0.1"), 8);
        // IPv6: no network, one block.
        assert_eq!(block(0, "2001:db8::1"), 0);
        // The same class on both sides of a network another class cuts out.
        assert_eq!(
            t.class(0, ip("10.0.0.1")).id,
            t.class(0, ip("10.200.0.1")).id
        );
        // A set of b alone: its /24. A set with no network: one block.
        assert_eq!(block(1, "10.1.2.9"), 24);
        assert_eq!(block(2, "10.1.2.9"), 0);
    }

    #[test]
    fn a_hundred_thousand_networks_class_each_address_by_its_own() {
        let networks: Vec<Network> = (0..100_000u32)
            .map(|i| Network::of(IpAddr::V4((0x0a00_0000 + (i << 8)).into()), 24))
            .collect();
        let matchers = vec![Matcher {
            name: "region:many".into(),
            terms: (0..100_000u32)
                .map(|i| term(Leaf::Network(i), &[]))
                .collect(),
        }];
        let t = Topology::build(networks, matchers, vec![("many".into(), 0)], &[vec![0]]);
        let nowhere = Place::default();
        for i in [0u32, 1, 4_999, 99_999] {
            let a = IpAddr::V4((0x0a00_0000 + (i << 8) + 7).into());
            let class = t.class(0, a);
            assert_eq!(class.block, 24, "{a}");
            assert_eq!(
                t.closeness(0, 0, class.id, &nowhere, &mut Consulted::default()),
                Some(Closeness::Network(24))
            );
        }
        // The bucketed lookup finds what a search of every interval finds.
        let c = &t.classifiers[0];
        assert!(!c.v4.buckets.is_empty());
        let mut x: u32 = 0x9e37_79b9;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let a = u128::from(x % 0x0c00_0000);
            let plain = c.v4.starts.partition_point(|s| *s <= a) - 1;
            let (class, first, _) = locate(&c.v4, a, u128::from(u32::MAX));
            assert_eq!(
                (class, first),
                (c.v4.classes[plain], c.v4.starts[plain]),
                "{a:#x}"
            );
        }
        // IPv6 too, to its last bucket (ffff::/16).
        let v6: Vec<Network> = (0..2_000u128)
            .map(|i| Network::of(IpAddr::V6((0x2001_0db8_u128 << 96 | i << 64).into()), 64))
            .chain([Network::of("ffff:1::".parse().unwrap(), 32)])
            .collect();
        let n = v6.len() as u32;
        let t6 = Topology::build(
            v6,
            vec![Matcher {
                name: "region:v6".into(),
                terms: (0..n).map(|i| term(Leaf::Network(i), &[])).collect(),
            }],
            Vec::new(),
            &[vec![0]],
        );
        assert!(!t6.classifiers[0].v6.buckets.is_empty());
        for (a, prefix) in [("2001:db8:0:7::1", 64), ("ffff:1:2::1", 32)] {
            let class = t6.class(0, ip(a));
            assert_eq!(
                t6.closeness(0, 0, class.id, &nowhere, &mut Consulted::default()),
                Some(Closeness::Network(prefix)),
                "{a}"
            );
        }
        assert_eq!(
            t6.closeness(
                0,
                0,
                t6.class(0, ip("ffff:2::1")).id,
                &nowhere,
                &mut Consulted::default()
            ),
            None
        );
        let past = IpAddr::V4((0x0a00_0000 + (100_000 << 8)).into());
        assert_eq!(
            t.closeness(
                0,
                0,
                t.class(0, past).id,
                &nowhere,
                &mut Consulted::default()
            ),
            None
        );
    }
}
