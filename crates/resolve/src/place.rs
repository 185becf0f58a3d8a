//! Topological selection (spec §2 step 3; seed 002 "Place"): the answer for
//! each place a client can be in, decided ahead of any query.
//!
//! Only the places some address or datacenter names can get an answer of
//! their own; every other client gets the default. So the table is small,
//! and the DNS path finds a client's answer with one GeoIP lookup and a
//! short scan.

use super::{Answer, Narrowed, PlaceStep, balance_filter, no_candidate_answer};
use gtm_model::{
    compile::{DcId, DcSpec, ModeSpec, RuleTarget, Steering},
    place::{Continent, Coordinates, Country, Place},
    topology::{Closeness, Consulted, Topology},
};

/// A place that has an answer of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlaceKey {
    Country(Country),
    Continent(Continent),
}

/// The answer of a record for every place, deduplicated. Boxed slices at
/// their length: the engine holds one per steered record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceAnswers {
    pub groups: Box<[Answer]>,
    pub default: usize,
    /// Its place table and topology rules, absent when it has neither
    /// (most records): the engine holds one per steered record.
    pub steer: Option<Box<Steer>>,
}

/// What picks a record's group by the client's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steer {
    /// The group of each place with an answer of its own.
    pub places: Box<[(PlaceKey, usize)]>,
    /// The record's topology rules, in the order written, each with the
    /// group it answers from (`None`: none of its target's addresses is a
    /// candidate now, so the rule is skipped).
    pub rules: Box<[RuleAnswer]>,
    /// The rule set the rules are of: which classification of client
    /// addresses they read.
    pub rule_set: u32,
    /// With `nearest = true`: each datacenter of the record with a
    /// location, in configuration order, with its group (`None`: no
    /// candidate there now).
    pub nearest: Box<[NearAnswer]>,
}

impl Steer {
    /// The parts boxed, or `None` when all are empty.
    pub fn of(
        places: Box<[(PlaceKey, usize)]>,
        rules: Box<[RuleAnswer]>,
        rule_set: u32,
        nearest: Box<[NearAnswer]>,
    ) -> Option<Box<Self>> {
        (!places.is_empty() || !rules.is_empty() || !nearest.is_empty()).then(|| {
            Box::new(Self {
                places,
                rules,
                rule_set,
                nearest,
            })
        })
    }
}

/// A datacenter a record with `nearest = true` can answer from, decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NearAnswer {
    pub dc: DcId,
    pub at: Coordinates,
    pub bias: i32,
    pub group: Option<u32>,
}

impl NearAnswer {
    /// A client's distance to it in kilometres, biased: `1 − bias/100`
    /// times the great-circle distance.
    #[inline]
    pub fn biased_km(&self, client: Coordinates) -> f64 {
        client.km_to(self.at) * (1.0 - f64::from(self.bias) / 100.0)
    }
}

/// The datacenter that answers a client at `client` by distance: its
/// index among `near` and its group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NearChoice {
    pub index: usize,
    pub group: usize,
    /// The biased distance that chose it.
    pub km: f64,
}

/// Of the datacenters in `near` with a candidate, the one at the least
/// biased distance from `client`; of equal ones, the first. Without a
/// bias, distances are compared by their haversine, and only the chosen
/// one is made kilometres.
#[inline]
pub fn nearest_for(near: &[NearAnswer], client: Coordinates) -> Option<NearChoice> {
    let biased = near.iter().any(|n| n.bias != 0);
    let mut best: Option<NearChoice> = None;
    for (index, n) in near.iter().enumerate() {
        let Some(group) = n.group else {
            continue;
        };
        let score = if biased {
            n.biased_km(client)
        } else {
            client.haversine(n.at)
        };
        if best.is_none_or(|b| score < b.km) {
            best = Some(NearChoice {
                index,
                group: group as usize,
                km: score,
            });
        }
    }
    if !biased && let Some(b) = best.as_mut() {
        b.km = Coordinates::km_of(b.km);
    }
    best
}

/// A topology rule of a record, decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleAnswer {
    /// Its client place (a matcher of the configuration's topology).
    pub matcher: u32,
    pub weight: u32,
    pub group: Option<u32>,
}

/// The rule that answers a client: its index among the record's rules
/// and its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleChoice {
    pub rule: usize,
    pub group: usize,
    pub closeness: Closeness,
}

impl PlaceAnswers {
    /// The group a client in `place` is answered from: its country's, else
    /// its continent's, else the default.
    pub fn lookup(&self, place: &Place) -> usize {
        place_group(self.places(), self.default, place)
    }

    /// The places with an answer of their own, and their groups.
    pub fn places(&self) -> &[(PlaceKey, usize)] {
        self.steer.as_deref().map_or(&[], |s| &s.places)
    }

    /// The topology rules, with their groups.
    pub fn rules(&self) -> &[RuleAnswer] {
        self.steer.as_deref().map_or(&[], |s| &s.rules)
    }

    /// The rule set of its rules.
    pub fn rule_set(&self) -> u32 {
        self.steer.as_deref().map_or(0, |s| s.rule_set)
    }

    /// The datacenters it answers from by distance, with their groups.
    pub fn nearest(&self) -> &[NearAnswer] {
        self.steer.as_deref().map_or(&[], |s| &s.nearest)
    }

    /// Whether clients in different places can get different answers, so
    /// that the answer depends on where the client is (ECS scope).
    pub fn depends_on_place(&self) -> bool {
        self.groups.len() > 1
    }

    pub fn default_answer(&self) -> &Answer {
        &self.groups[self.default]
    }
}

/// The topology rule among `rules` (of rule set `set`) that answers a
/// client of `class` in `place` (docs/topology.md): of the rules that
/// hold the client and have a candidate, the one that holds it most
/// closely, then the higher weight, then the first written. `geo` is set
/// when the choice depended on the client's country or continent: an
/// exclusion of one was looked at, or no network decided and one was.
#[inline]
pub fn rule_for(
    rules: &[RuleAnswer],
    topology: &Topology,
    set: u32,
    class: u32,
    place: &Place,
    geo: &mut bool,
) -> Option<RuleChoice> {
    let mut best: Option<(Closeness, u32, RuleChoice)> = None;
    let mut consulted = Consulted::default();
    for (i, r) in rules.iter().enumerate() {
        let Some(group) = r.group else {
            continue;
        };
        let Some(closeness) = topology.closeness(r.matcher, set, class, place, &mut consulted)
        else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|(c, w, _)| (closeness, r.weight) > (*c, *w))
        {
            best = Some((
                closeness,
                r.weight,
                RuleChoice {
                    rule: i,
                    group: group as usize,
                    closeness,
                },
            ));
        }
    }
    let by_network = matches!(best, Some((Closeness::Network(_), _, _)));
    *geo |= consulted.by_exclusion || (consulted.by_place && !by_network);
    best.map(|(_, _, choice)| choice)
}

/// The group of `place` in a table of places: its country's, else its
/// continent's, else `default`.
#[inline]
pub fn place_group(places: &[(PlaceKey, usize)], default: usize, place: &Place) -> usize {
    place_entry(places, place).map_or(default, |(_, g)| g)
}

/// The entry of a table of places that answers a client in `place`: its
/// country's, else its continent's; `None` for the default.
#[inline]
pub fn place_entry(places: &[(PlaceKey, usize)], place: &Place) -> Option<(PlaceKey, usize)> {
    let find = |key: PlaceKey| places.iter().find(|(k, _)| *k == key).copied();
    place
        .country
        .and_then(|c| find(PlaceKey::Country(c)))
        .or_else(|| place.continent.and_then(|c| find(PlaceKey::Continent(c))))
}

/// `mode_for_place` gives the mode's candidates for a client in a place,
/// with the datacenters it chose nearest first when it chose by place.
/// `trace` (only `explain`'s) gets each place's steps.
pub(super) fn answers(
    steering: &Steering,
    dcs: &[DcSpec],
    candidates: &[usize],
    mode_for_place: impl Fn(Option<&Place>) -> (Vec<usize>, Option<Vec<DcId>>),
    mut trace: Option<&mut Vec<PlaceStep>>,
) -> PlaceAnswers {
    let finish = |list: Vec<usize>| -> Answer {
        if list.is_empty() {
            no_candidate_answer(steering)
        } else {
            Answer::Addresses(balance_filter(steering, list))
        }
    };
    if !steering.topology || candidates.is_empty() {
        let answer = match trace {
            None => finish(candidates.to_vec()),
            Some(t) => {
                let answer = finish(candidates.to_vec());
                t.push(PlaceStep {
                    key: None,
                    place: None,
                    nearest: None,
                    from: candidates.to_vec(),
                    by: Narrowed::NoTopology,
                    narrowed: candidates.to_vec(),
                    answer: answer.clone(),
                });
                answer
            }
        };
        let mut groups = vec![answer];
        let rules = rule_answers(steering, candidates, &finish, &mut groups);
        let nearest = near_answers(steering, dcs, candidates, &finish, &mut groups);
        return PlaceAnswers {
            groups: groups.into_boxed_slice(),
            default: 0,
            steer: Steer::of(Box::default(), rules, steering.rule_set(), nearest),
        };
    }
    // One place's answer: the mode's candidates there, narrowed to the
    // place, through the balance (or the fail-safe when none is left); and
    // whether those candidates had one for the place's country.
    let mut decide = |key: Option<PlaceKey>, place: Option<&Place>| -> (Answer, bool) {
        let (list, nearest) = mode_for_place(place);
        let own = place.and_then(|p| p.country).is_some_and(|c| {
            list.iter()
                .any(|&i| steering.addresses[i].countries().contains(&c))
        });
        let Some(t) = trace.as_deref_mut() else {
            return (finish(narrow(steering, list, place).0), own);
        };
        let from = list.clone();
        let (narrowed, by) = narrow(steering, list, place);
        let answer = finish(narrowed.clone());
        t.push(PlaceStep {
            key,
            place: place.copied(),
            nearest,
            from,
            by,
            narrowed,
            answer: answer.clone(),
        });
        (answer, own)
    };
    // The default answer is group 0.
    let mut groups = vec![decide(None, None).0];
    let mut places = Vec::new();

    let dc_mode = matches!(steering.mode, ModeSpec::Datacenter { .. });
    let mut countries: Vec<Country> = steering
        .addresses
        .iter()
        .flat_map(|a| a.countries().iter().copied())
        .collect();
    let mut continents: Vec<Continent> = steering
        .addresses
        .iter()
        .flat_map(|a| a.continents().iter().copied())
        .collect();
    if dc_mode {
        countries.extend(dcs.iter().filter_map(|d| d.country));
        continents.extend(dcs.iter().filter_map(|d| d.continent));
    }
    countries.sort();
    countries.dedup();
    continents.sort();
    continents.dedup();

    // Continents first: a country keeps an entry of its own only where it
    // answers differently from what its clients would get without one.
    for k in continents {
        let place = Place {
            continent: Some(k),
            ..Place::default()
        };
        let (answer, _) = decide(Some(PlaceKey::Continent(k)), Some(&place));
        let index = intern(&mut groups, answer);
        if index != 0 {
            places.push((PlaceKey::Continent(k), index));
        }
    }
    for c in countries {
        // A country's continent is known here only from a datacenter in it.
        let continent = dcs
            .iter()
            .find(|d| d.country == Some(c))
            .and_then(|d| d.continent);
        let place = Place {
            country: Some(c),
            continent,
            ..Place::default()
        };
        // Records for the country come before any continent's, even when
        // they equal the default answer (seed 002 step 2).
        let (answer, own) = decide(Some(PlaceKey::Country(c)), Some(&place));
        let index = intern(&mut groups, answer);
        let fallback = continent
            .and_then(|k| {
                places
                    .iter()
                    .find(|(key, _)| *key == PlaceKey::Continent(k))
            })
            .map_or(0, |(_, g)| *g);
        if own || index != fallback {
            places.push((PlaceKey::Country(c), index));
        }
    }
    let rules = rule_answers(steering, candidates, &finish, &mut groups);
    let nearest = near_answers(steering, dcs, candidates, &finish, &mut groups);
    PlaceAnswers {
        groups: groups.into_boxed_slice(),
        default: 0,
        steer: Steer::of(
            places.into_boxed_slice(),
            rules,
            steering.rule_set(),
            nearest,
        ),
    }
}

/// With `nearest = true`, each datacenter of the record's addresses that
/// has a location, in configuration order, with the answer of its
/// candidates through the balance (`None` when it has none now).
fn near_answers(
    steering: &Steering,
    dcs: &[DcSpec],
    candidates: &[usize],
    finish: &impl Fn(Vec<usize>) -> Answer,
    groups: &mut Vec<Answer>,
) -> Box<[NearAnswer]> {
    if !steering.nearest {
        return Box::default();
    }
    dcs.iter()
        .enumerate()
        .filter(|(dc, _)| steering.addresses.iter().any(|a| a.dc() == Some(*dc)))
        .filter_map(|(dc, spec)| {
            let at = spec.location?;
            let here: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| steering.addresses.get(i).and_then(|a| a.dc()) == Some(dc))
                .collect();
            let group = (!here.is_empty()).then(|| intern(groups, finish(here)) as u32);
            Some(NearAnswer {
                dc,
                at,
                bias: spec.bias,
                group,
            })
        })
        .collect()
}

/// Each topology rule's answer: the candidates in its target, through the
/// balance; `None` when none is (the rule is skipped).
fn rule_answers(
    steering: &Steering,
    candidates: &[usize],
    finish: &impl Fn(Vec<usize>) -> Answer,
    groups: &mut Vec<Answer>,
) -> Box<[RuleAnswer]> {
    steering
        .rules()
        .iter()
        .map(|r| {
            let narrowed: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| match r.target {
                    RuleTarget::Address(a) => i == a as usize,
                    RuleTarget::Group(first) => {
                        let group = |at: usize| steering.addresses.get(at).and_then(|a| a.group());
                        group(i).is_some() && group(i) == group(first as usize)
                    }
                    RuleTarget::Datacenter(dc) => {
                        steering.addresses.get(i).and_then(|a| a.dc()) == Some(dc)
                    }
                })
                .collect();
            let group = (!narrowed.is_empty()).then(|| intern(groups, finish(narrowed)) as u32);
            RuleAnswer {
                matcher: r.matcher,
                weight: r.weight,
                group,
            }
        })
        .collect()
}

/// The index of `answer` in `groups`, added if new.
fn intern(groups: &mut Vec<Answer>, answer: Answer) -> usize {
    match groups.iter().position(|g| *g == answer) {
        Some(i) => i,
        None => {
            groups.push(answer);
            groups.len() - 1
        }
    }
}

/// Seed 002 step 2: the candidates for the client's country, else its
/// continent, else those for no place in particular, else all of them.
fn narrow(
    steering: &Steering,
    candidates: Vec<usize>,
    place: Option<&Place>,
) -> (Vec<usize>, Narrowed) {
    let a = &steering.addresses;
    let pick = |f: &dyn Fn(usize) -> bool| -> Vec<usize> {
        candidates.iter().copied().filter(|&i| f(i)).collect()
    };
    if let Some(place) = place {
        if let Some(c) = place.country {
            let by_country = pick(&|i| a[i].countries().contains(&c));
            if !by_country.is_empty() {
                return (by_country, Narrowed::Country(c));
            }
        }
        if let Some(k) = place.continent {
            let by_continent = pick(&|i| a[i].continents().contains(&k));
            if !by_continent.is_empty() {
                return (by_continent, Narrowed::Continent(k));
            }
        }
    }
    let no_place = pick(&|i| a[i].countries().is_empty() && a[i].continents().is_empty());
    if no_place.is_empty() {
        (candidates, Narrowed::All)
    } else {
        (no_place, Narrowed::NoPlace)
    }
}
