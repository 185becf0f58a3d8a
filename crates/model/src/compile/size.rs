//! How many bytes records take in an answer.

use hickory_server::proto::{
    ProtoError,
    rr::{Name, RData, RecordType, rdata::SOA},
    serialize::binary::{BinDecoder, BinEncodable, DecodeError, Restrict},
};

use super::{Content, RecordSpec};

/// The most bytes the records of one name may take in a response (the
/// records a question for ANY answers). A response is at most 65,535 bytes
/// over TCP; the rest is kept for the header, a question of the longest
/// name (259), a chain of nine CNAMEs of the longest names (4,680) and the
/// OPT record with its options (512).
pub const MAX_NAME_BYTES: usize = 60_000;

/// Record data that cannot be sent as it is.
#[derive(Debug, thiserror::Error)]
pub(super) enum SizeError {
    #[error("{kind} data does not encode: {reason}")]
    Encode {
        kind: RecordType,
        reason: ProtoError,
    },
    /// More than the 16-bit length of a record's data counts.
    #[error("{kind} data of {len} bytes is longer than a record can hold (65,535)")]
    TooLong { kind: RecordType, len: usize },
    /// Reads back as other data than was written.
    #[error("{kind} data does not read back as written")]
    ReadsOtherwise { kind: RecordType },
    /// Does not read back at all.
    #[error("{kind} data does not read back: {reason}")]
    Unreadable {
        kind: RecordType,
        reason: DecodeError,
    },
}

/// Bytes one record takes in an answer: its owner compressed to a pointer
/// (the question, or the CNAME that led to it), type, class, TTL, length
/// and its data uncompressed. Fails when the data does not encode.
pub(super) fn record_size(data: &RData) -> Result<usize, SizeError> {
    let kind = data.record_type();
    let bytes = data
        .to_bytes()
        .map_err(|reason| SizeError::Encode { kind, reason })?;
    let Ok(length) = u16::try_from(bytes.len()) else {
        return Err(SizeError::TooLong {
            kind,
            len: bytes.len(),
        });
    };
    // What is sent must read back as it was meant: hickory writes some data
    // its own reader refuses (a CAA tag with a quote in it).
    let mut decoder = BinDecoder::new(&bytes);
    match RData::read(&mut decoder, kind, Restrict::new(length)) {
        Ok(read) if read == *data => {}
        Ok(_) => return Err(SizeError::ReadsOtherwise { kind }),
        Err(reason) => return Err(SizeError::Unreadable { kind, reason }),
    }
    Ok(2 + 10 + bytes.len())
}

/// The most bytes a record's answer can take: all its values, or for a
/// steered record the `max_answers` largest of its addresses (or of its
/// fail-safe values), whichever health leads to.
pub(super) fn answer_size(r: &RecordSpec) -> Result<usize, SizeError> {
    match &r.content {
        Content::Static(data) => data.iter().map(record_size).sum(),
        // Its target's answer, whose size is the target's to fit.
        Content::Alias(_) => Ok(0),
        Content::Steered(s) => {
            let largest = |values: &mut dyn Iterator<Item = RData>| -> Result<usize, SizeError> {
                let mut sizes = values
                    .map(|v| record_size(&v))
                    .collect::<Result<Vec<_>, _>>()?;
                sizes.sort_unstable_by(|a, b| b.cmp(a));
                Ok(sizes.iter().take(s.max_answers as usize).sum())
            };
            let addresses = largest(&mut s.addresses.iter().map(|a| a.value.rdata()))?;
            let fail_safe = largest(&mut s.fail_safe().iter().cloned())?;
            Ok(addresses.max(fail_safe))
        }
    }
}

/// The SOA and NS records at an apex.
pub(super) fn apex_size(soa: &SOA, nameservers: &[Name]) -> usize {
    let soa = record_size(&RData::SOA(soa.clone())).unwrap_or(0);
    let ns: usize = nameservers.iter().map(|n| 2 + 10 + n.len() + 1).sum();
    soa + ns
}
