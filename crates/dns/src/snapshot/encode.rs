//! Answers encoded ahead of queries: static and steered record sets, per
//! place group, in every balance variant.

use super::*;

/// The candidates variant `v` of `n` answers: at most `max_answers`, in
/// order from candidate `v` round to the start.
pub(super) fn picked(n: usize, max_answers: usize, v: usize) -> impl Iterator<Item = usize> {
    (0..n.min(max_answers)).map(move |k| (v + k) % n)
}

/// The answer of a static record set (one group, every record), signed by
/// `signer` when its zone is signed.
pub fn static_answer(
    owner: &Name,
    ttl: u32,
    values: Vec<Value>,
    signer: Option<&ZoneSigner>,
) -> Result<RrsetAnswer, BuildError> {
    Ok(RrsetAnswer {
        balance: Balance::Priority,
        steer: None,
        default: 0,
        groups: Box::new([group(
            owner,
            ttl,
            values,
            usize::MAX,
            Balance::Priority,
            &[],
            Vec::new(),
            signer,
        )?]),
    })
}

/// Builds the answer of a steered record from the resolver's decision,
/// signed by `signer` when its zone is signed.
pub fn steered_answer(
    owner: &Name,
    ttl: u32,
    steering: &Steering,
    places: &PlaceAnswers,
    signer: Option<&ZoneSigner>,
) -> Result<RrsetAnswer, BuildError> {
    // Collected with its exact length: a `Result` collect starts at four
    // and keeps the spare room, 450 bytes per record of a large zone.
    let mut groups = Vec::with_capacity(places.groups.len());
    for answer in &places.groups {
        groups.push({
            // Each candidate with its weight and its counter: candidate `i`
            // counts on counter `i`, fail-safe value `j` on the one after
            // every candidate's (see `Snapshot::build`).
            let chosen: Vec<(Value, u32, u32)> = match answer {
                Answer::Addresses(list) => list
                    .iter()
                    .filter_map(|&i| Some((steering.addresses.get(i)?, i)))
                    .map(|(a, i)| (a.value.clone(), a.weight, i as u32))
                    .collect(),
                Answer::FailSafe => (steering.addresses.len()..)
                    .zip(steering.fail_safe())
                    .map(|(i, d)| (Value::from(d.clone()), 1, i as u32))
                    .collect(),
                Answer::Empty => Vec::new(),
            };
            let weights: Vec<u32> = chosen.iter().map(|c| c.1).collect();
            let sources: Vec<u32> = chosen.iter().map(|c| c.2).collect();
            let values = chosen.into_iter().map(|c| c.0).collect();
            let balance = if matches!(answer, Answer::Addresses(_)) {
                steering.balance
            } else {
                Balance::RoundRobin
            };
            let mut made = group(
                owner,
                ttl,
                values,
                steering.max_answers as usize,
                balance,
                &weights,
                sources,
                signer,
            )?;
            if matches!(answer, Answer::FailSafe) && !made.is_empty() {
                made.more.get_or_insert_default().fail_safe = true;
            }
            made
        });
    }
    // The query path picks `groups[default]` and `groups[places[i].1]`.
    if groups.is_empty()
        || places.default >= groups.len()
        || places.places().iter().any(|(_, g)| *g >= groups.len())
        || places
            .rules()
            .iter()
            .any(|r| r.group.is_some_and(|g| g as usize >= groups.len()))
        || places
            .nearest()
            .iter()
            .any(|n| n.group.is_some_and(|g| g as usize >= groups.len()))
    {
        return Err(BuildError::new(
            owner,
            Rt::A,
            "the resolver named an answer group that does not exist",
        ));
    }
    Ok(RrsetAnswer {
        balance: steering.balance,
        steer: places.steer.clone(),
        default: u32::try_from(places.default).unwrap_or(u32::MAX),
        groups: groups.into_boxed_slice(),
    })
}

#[expect(clippy::too_many_arguments, reason = "a group's parts, each its own")]
pub(super) fn group(
    owner: &Name,
    ttl: u32,
    values: Vec<Value>,
    max_answers: usize,
    balance: Balance,
    weights: &[u32],
    sources: Vec<u32>,
    signer: Option<&ZoneSigner>,
) -> Result<Group, BuildError> {
    let rtype = values.first().map_or(Rt::A, Value::record_type);
    let fail = |e: ProtoError| BuildError::new(owner, rtype, e);
    let n = values.len();
    // Priority answers the first ones in order; one candidate has one order.
    let variants = if balance == Balance::Priority || n <= 1 {
        1
    } else {
        n
    };
    let all_zero = weights.iter().all(|&w| w == 0);
    let mut total = 0u64;
    let cumulative: Vec<u64> = (0..n)
        .map(|i| {
            total += if all_zero {
                1
            } else {
                u64::from(weights.get(i).copied().unwrap_or(1))
            };
            total
        })
        .collect();
    let keys: Box<[u64]> = values
        .iter()
        .map(|v| hash_bytes(&v.to_bytes().unwrap_or_default()))
        .collect();
    // The candidates of variant `v`: rotated to start at `v`.
    let records = |v: usize| -> Vec<Record> {
        picked(n, max_answers, v)
            .map(|i| values[i].record(owner, ttl))
            .collect()
    };
    let sections: Vec<(Box<[u8]>, u16)> = (0..variants)
        .map(|v| {
            let (body, count, _) = encode_body(owner, &records(v), &[])?;
            Ok((body, count))
        })
        .collect::<Result<_, ProtoError>>()
        .map_err(fail)?;
    let wire = Variants::new(&sections)
        .ok_or_else(|| BuildError::new(owner, rtype, "its answers take over 4 GiB"))?;
    let mut sigs: Vec<Signed> = Vec::new();
    if let Some(signer) = signer
        && n > 0
    {
        // Variants holding the same records in another order share one
        // signature: the signed form is sorted (RFC 4034 §6.3).
        let mut made: HashMap<Vec<u64>, usize> = HashMap::new();
        for v in 0..variants {
            let mut set: Vec<u64> = picked(n, max_answers, v).map(|i| keys[i]).collect();
            set.sort_unstable();
            if let Some(&first) = made.get(&set) {
                let same = Signed {
                    records: sigs[first].records.clone(),
                    wire: sigs[first].wire.clone(),
                };
                sigs.push(same);
                continue;
            }
            let sig = signer.sign(&records(v))?;
            sigs.push(Signed::new(owner, vec![sig]).map_err(fail)?);
            made.insert(set, v);
        }
    }
    // One candidate has one order: its weight and its key are never read
    // (`choose`), and a group per record of a large zone holds neither.
    let more = GroupMore {
        spread: match n > 1 {
            true => cumulative.into_iter().chain(keys).collect(),
            false => Box::default(),
        },
        sources: match sources.iter().enumerate().all(|(i, &s)| s as usize == i) {
            true => Box::default(),
            false => sources.into_boxed_slice(),
        },
        signatures: sigs.into_boxed_slice(),
        fail_safe: false,
    };
    let lacks_more =
        more.spread.is_empty() && more.sources.is_empty() && more.signatures.is_empty();
    Ok(Group {
        values: values.into_boxed_slice(),
        ttl,
        max_answers: u32::try_from(max_answers).unwrap_or(u32::MAX),
        wire,
        more: (!lacks_more).then(|| Box::new(more)),
    })
}

/// Encodes answer and authority records as they follow a question for
/// `qname`, with names compressed against that question. Valid after any
/// question whose name has the same labels in any case. Fails when a
/// record does not encode (a character-string over 255 bytes) or the whole
/// does not fit a DNS message.
pub fn encode_body(
    qname: &Name,
    answers: &[Record],
    authority: &[Record],
) -> Result<(Box<[u8]>, u16, u16), ProtoError> {
    let count = |records: &[Record]| {
        u16::try_from(records.len()).map_err(|_| {
            ProtoError::from(format!("{} records do not fit a message", records.len()))
        })
    };
    let (answer_count, authority_count) = (count(answers)?, count(authority)?);
    let mut buf = Vec::with_capacity(128);
    let mut enc = BinEncoder::new(&mut buf);
    enc.emit_vec(&[0u8; 12])?;
    Query::query(qname.clone(), Rt::A).emit(&mut enc)?;
    let start = enc.offset();
    for r in answers.iter().chain(authority) {
        r.emit(&mut enc)?;
    }
    let body = buf
        .get(start..)
        .unwrap_or_default()
        .to_vec()
        .into_boxed_slice();
    Ok((body, answer_count, authority_count))
}

/// FNV-1a, then a finalizer: stable across runs and builds, so a persist
/// client keeps its answer across restarts too.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
