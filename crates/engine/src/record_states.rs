//! Record states in a compact list: a page of a device's states as it
//! sends it to a peer, and a peer's states as this device holds them
//! between its reports.
//!
//! A report carries `RecordStatus`es in JSON; made and parsed as such, a
//! page of 10,000 was 40,000 small strings on each side, and a million of
//! them held took about 250 bytes each (a heap object per string, a
//! decision text per record that most records share, a list grown page by
//! page). Here a record is a small entry (its status, its decision as a
//! number, where its texts start) and its texts (its name and active
//! answers) lie one after another in one buffer; each decision text is
//! held once. The engine writes a page into one from its records, it is
//! sent as the same JSON (`Serialize`), and the peer reads the JSON
//! straight into one (`Deserialize`); [`RecordStates::statuses`] gives the
//! `RecordStatus`es back, which the engine types for the API
//! (`Engine::typed`). The status goes as its label and the answers as
//! texts, the form devices of every version read.
//!
//! The buffer is cut in chunks of about [`CHUNK`] bytes: a changed state's
//! texts are added at the last chunk's end, never moving the others (one
//! buffer of a million records' texts, sized to fit once the list was
//! whole, was copied by the first change after it, tens of megabytes
//! inside a write's time on both devices of a pair). Once the texts no
//! entry points at outweigh the rest, the chunks are written again.
//!
//! A full chunk is kept deflated: names and answers of a zone's records
//! repeat most of their bytes, and a pair holds each other's whole list
//! (at 100,000 records 3.5 MiB of texts, 0.5 deflated). It is read by
//! inflating it ([`Reader`]): once per chunk for a whole list shown or
//! compacted; a changed state is written to the last chunk, which is
//! never deflated until it is full, and its entry keeps its texts' length
//! so that replacing it reads nothing.

use std::cell::OnceCell;
use std::io::Write;
use std::{borrow::Cow, collections::HashMap, fmt, sync::Arc};

use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser::SerializeSeq};

use super::RecordStatus;
use gtm_resolve::Status;

/// The size of a chunk of texts: records are added to the last chunk
/// until it holds this much.
const CHUNK: usize = 1 << 20;

/// The least room a page's list is made with, for its entries and for its
/// texts ([`RecordStates::for_page`]). A page lives for one report; made
/// this large, each of its two buffers is above mimalloc's largest size
/// class (512 KiB), an allocation of its own that goes back to the system
/// when the page is dropped. Grown step by step instead, or made at its
/// size (160 KiB of entries, 480 KiB of texts for 10,000 records), its
/// blocks lay in the allocator's 4 MiB pages, which a long-lived
/// neighbour keeps resident: about 3 MiB more on each device of a pair
/// at 100,000 records (docs/performance.md).
const PAGE_ROOM: usize = 1 << 20;

/// Where a record's texts are: a chunk of [`RecordStates::texts`] and the
/// offset in it (a record's texts never span two chunks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct At {
    chunk: u32,
    offset: u32,
}

/// A full chunk, deflated, and the length of its texts.
#[derive(Debug, Clone)]
struct Packed {
    len: usize,
    deflated: Box<[u8]>,
}

impl Packed {
    fn new(texts: &[u8]) -> Self {
        let mut out = flate2::write::DeflateEncoder::new(
            Vec::with_capacity(texts.len() / 4),
            flate2::Compression::fast(),
        );
        // Writing to a `Vec` does not fail.
        let deflated = out
            .write_all(texts)
            .and_then(|()| out.finish())
            .unwrap_or_default();
        Self {
            len: texts.len(),
            deflated: deflated.into_boxed_slice(),
        }
    }

    /// The texts again; empty if they do not inflate (never so for a
    /// chunk this list deflated).
    fn texts(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        let mut inflate = flate2::write::DeflateDecoder::new(&mut out);
        match inflate
            .write_all(&self.deflated)
            .and_then(|()| inflate.finish())
        {
            Ok(_) => out,
            Err(_) => Vec::new(),
        }
    }
}

/// Texts in chunks: the full ones, deflated, and the last, which records
/// are added to until it holds [`CHUNK`] bytes.
#[derive(Debug, Default, Clone)]
struct Chunks {
    full: Vec<Packed>,
    last: Vec<u8>,
}

impl Chunks {
    /// The chunk to add a record's texts to, and its number.
    fn last(&mut self) -> (u32, &mut Vec<u8>) {
        if self.last.len() >= CHUNK {
            let full = std::mem::replace(&mut self.last, Vec::with_capacity(CHUNK + CHUNK / 16));
            self.full.push(Packed::new(&full));
        }
        let chunk = u32::try_from(self.full.len()).unwrap_or(u32::MAX);
        (chunk, &mut self.last)
    }

    /// The bytes the texts take, used or not (before deflating).
    fn bytes(&self) -> usize {
        self.full.iter().map(|p| p.len).sum::<usize>() + self.last.len()
    }

    fn shrink(&mut self) {
        self.full.shrink_to_fit();
        self.last.shrink_to_fit();
    }
}

/// Reads a list's texts, inflating each full chunk once, when a record
/// in it is first read.
struct Reader<'a> {
    list: &'a RecordStates,
    inflated: Vec<OnceCell<Vec<u8>>>,
}

impl<'a> Reader<'a> {
    fn new(list: &'a RecordStates) -> Self {
        Self {
            list,
            inflated: (0..list.texts.full.len())
                .map(|_| OnceCell::new())
                .collect(),
        }
    }

    /// The bytes of the chunk `at` names, from its offset.
    fn at(&self, at: At) -> &[u8] {
        let chunk: &[u8] = match self.list.texts.full.get(at.chunk as usize) {
            Some(packed) => match self.inflated.get(at.chunk as usize) {
                Some(cell) => cell.get_or_init(|| packed.texts()),
                None => &[],
            },
            None if at.chunk as usize == self.list.texts.full.len() => &self.list.texts.last,
            None => &[],
        };
        chunk.get(at.offset as usize..).unwrap_or_default()
    }

    fn view(&self, i: usize) -> Option<View<'_>> {
        let entry = self.list.entries.get(i)?;
        let texts = self.at(entry.at);
        let mut at = 0;
        let record = take_str(texts, &mut at)?;
        let count = take_len(texts, &mut at)?;
        let active = (0..count)
            .map(|_| take_str(texts, &mut at))
            .collect::<Option<_>>()?;
        Some(View {
            record,
            active,
            decision: self
                .list
                .decisions
                .get(entry.decision as usize)
                .map_or("", |d| &**d),
            status: entry.status,
            held: entry.held,
        })
    }

    /// Every state, in order.
    fn views(&self) -> impl Iterator<Item = View<'_>> {
        (0..self.list.len()).filter_map(|i| self.view(i))
    }
}

/// One record's state: its texts are at `at` in [`RecordStates::texts`].
#[derive(Debug, Clone, Copy)]
struct Entry {
    at: At,
    decision: u32,
    status: Option<Status>,
    held: bool,
    /// The length of its texts, at most `u16::MAX`: what replacing it
    /// leaves unused, read without inflating its chunk.
    len: u16,
}

/// Record states, in a device's order.
#[derive(Debug, Default, Clone)]
pub struct RecordStates {
    entries: Vec<Entry>,
    /// Per record: its name, how many answers it has, then each answer;
    /// each text as its length (LEB128) and its bytes.
    texts: Chunks,
    /// Bytes of `texts` no entry points at any more.
    unused: usize,
    /// The decision texts, each once, and where each is in `decisions`.
    decisions: Vec<Arc<str>>,
    decision_of: HashMap<Arc<str>, u32>,
}

/// One record's state, read from the list.
#[derive(Debug, PartialEq, Eq)]
struct View<'a> {
    record: &'a str,
    active: Vec<&'a str>,
    decision: &'a str,
    status: Option<Status>,
    held: bool,
}

/// The same states in the same order.
impl PartialEq for RecordStates {
    fn eq(&self, other: &Self) -> bool {
        let (mine, theirs) = (Reader::new(self), Reader::new(other));
        self.len() == other.len() && (0..self.len()).all(|i| mine.view(i) == theirs.view(i))
    }
}

impl RecordStates {
    pub fn new(statuses: Vec<RecordStatus>) -> Self {
        let mut list = Self::default();
        list.extend(statuses);
        list.shrink();
        list
    }

    /// An empty list with room for `records` states and their texts
    /// (about `text_bytes`), so that filling it does not grow it step by
    /// step.
    pub fn with_capacity(records: usize, text_bytes: usize) -> Self {
        Self {
            entries: Vec::with_capacity(records),
            texts: Chunks {
                full: Vec::new(),
                last: Vec::with_capacity(text_bytes.min(CHUNK + CHUNK / 16)),
            },
            ..Self::default()
        }
    }

    /// An empty list for a page of `records` states, sent or taken in:
    /// with room for at least [`PAGE_ROOM`] bytes of entries and of texts.
    pub fn for_page(records: usize) -> Self {
        let entries = records.max(PAGE_ROOM / std::mem::size_of::<Entry>());
        Self::with_capacity(entries, PAGE_ROOM)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn extend(&mut self, statuses: Vec<RecordStatus>) {
        self.entries.reserve(statuses.len());
        for status in statuses {
            let entry = self.add(status);
            self.entries.push(entry);
        }
    }

    /// Gives back the room kept for more (a list once it is whole).
    pub fn shrink(&mut self) {
        self.entries.shrink_to_fit();
        self.texts.shrink();
    }

    /// Replaces the state at `i`; `false` when there is none there.
    pub fn set(&mut self, i: usize, status: RecordStatus) -> bool {
        let Some(before) = self.entries.get(i).map(|e| e.len) else {
            return false;
        };
        let entry = self.add(status);
        self.unused += usize::from(before);
        if let Some(slot) = self.entries.get_mut(i) {
            *slot = entry;
        }
        if self.unused > self.texts.bytes() / 2 {
            self.compact();
        }
        true
    }

    pub fn statuses(&self) -> Vec<RecordStatus> {
        Reader::new(self)
            .views()
            .map(|v| RecordStatus {
                record: v.record.to_string(),
                status: v.status,
                active: v.active.iter().map(|a| a.to_string()).collect(),
                decision: v.decision.to_string(),
                held: v.held,
            })
            .collect()
    }

    /// Adds a state at the end.
    pub fn push<A: AsRef<str>>(
        &mut self,
        record: &str,
        status: Option<Status>,
        active: &[A],
        decision: &str,
        held: bool,
    ) {
        let entry = self.add_parts(record, status, active, decision, held);
        self.entries.push(entry);
    }

    /// Adds the states of `other` at the end (a page of a list being
    /// taken in).
    pub fn append(&mut self, other: &RecordStates) {
        self.entries.reserve(other.len());
        for view in Reader::new(other).views() {
            self.push(
                view.record,
                view.status,
                &view.active,
                view.decision,
                view.held,
            );
        }
    }

    /// Writes the texts of `status` at the end, and gives its entry.
    fn add(&mut self, status: RecordStatus) -> Entry {
        self.add_parts(
            &status.record,
            status.status,
            &status.active,
            &status.decision,
            status.held,
        )
    }

    /// Writes the texts of a state at the end, and gives its entry.
    fn add_parts<A: AsRef<str>>(
        &mut self,
        record: &str,
        status: Option<Status>,
        active: &[A],
        decision: &str,
        held: bool,
    ) -> Entry {
        let (chunk, texts) = self.texts.last();
        let at = At {
            chunk,
            offset: u32::try_from(texts.len()).unwrap_or(u32::MAX),
        };
        let start = texts.len();
        put_text(texts, record.as_bytes());
        put_len(texts, active.len());
        for a in active {
            put_text(texts, a.as_ref().as_bytes());
        }
        let len = u16::try_from(texts.len() - start).unwrap_or(u16::MAX);
        let decision = match self.decision_of.get(decision) {
            Some(&n) => n,
            None => {
                let n = u32::try_from(self.decisions.len()).unwrap_or(u32::MAX);
                let text: Arc<str> = decision.into();
                self.decisions.push(text.clone());
                self.decision_of.insert(text, n);
                n
            }
        };
        Entry {
            at,
            decision,
            status,
            held,
            len,
        }
    }

    /// Writes the texts again in the entries' order, without the unused,
    /// and keeps only the decision texts an entry names.
    fn compact(&mut self) {
        let mut texts = Chunks::default();
        let mut decisions = Vec::new();
        let mut decision_of = HashMap::new();
        let mut entries = std::mem::take(&mut self.entries);
        let reader = Reader::new(self);
        for entry in &mut entries {
            let old = reader.at(entry.at);
            let old = &old[..texts_len(old)];
            let (chunk, to) = texts.last();
            entry.at = At {
                chunk,
                offset: u32::try_from(to.len()).unwrap_or(u32::MAX),
            };
            to.extend_from_slice(old);
            if let Some(text) = self.decisions.get(entry.decision as usize) {
                entry.decision = *decision_of.entry(text.clone()).or_insert_with(|| {
                    decisions.push(text.clone());
                    u32::try_from(decisions.len() - 1).unwrap_or(u32::MAX)
                });
            }
        }
        drop(reader);
        self.entries = entries;
        self.texts = texts;
        self.unused = 0;
        self.decisions = decisions;
        self.decision_of = decision_of;
    }
}

/// A state as JSON carries it: the fields of a `RecordStatus`, its texts
/// borrowed from the list or from the JSON.
#[derive(Serialize, Deserialize)]
struct Fields<'a> {
    #[serde(borrow)]
    record: Cow<'a, str>,
    #[serde(with = "gtm_resolve::status_label")]
    status: Option<Status>,
    #[serde(borrow)]
    active: Vec<Cow<'a, str>>,
    #[serde(borrow)]
    decision: Cow<'a, str>,
    #[serde(default)]
    held: bool,
}

/// As a list of `RecordStatus`es.
impl Serialize for RecordStates {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for view in Reader::new(self).views() {
            seq.serialize_element(&Fields {
                record: Cow::Borrowed(view.record),
                status: view.status,
                active: view.active.into_iter().map(Cow::Borrowed).collect(),
                decision: Cow::Borrowed(view.decision),
                held: view.held,
            })?;
        }
        seq.end()
    }
}

/// From a list of `RecordStatus`es, each written into the list as it is
/// read.
impl<'de> Deserialize<'de> for RecordStates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct List;
        impl<'de> de::Visitor<'de> for List {
            type Value = RecordStates;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of record states")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                // Made as a page once it holds a state: most reports
                // carry none.
                let mut list = RecordStates::default();
                while let Some(f) = seq.next_element::<Fields<'de>>()? {
                    if list.entries.capacity() == 0 {
                        list = RecordStates::for_page(0);
                    }
                    list.push(&f.record, f.status, &f.active, &f.decision, f.held);
                }
                Ok(list)
            }
        }
        d.deserialize_seq(List)
    }
}

/// The schema of the list of `RecordStatus`es it is sent as.
impl schemars::JsonSchema for RecordStates {
    fn inline_schema() -> bool {
        <Vec<RecordStatus>>::inline_schema()
    }
    fn schema_name() -> Cow<'static, str> {
        <Vec<RecordStatus>>::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        <Vec<RecordStatus>>::schema_id()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Vec<RecordStatus>>::json_schema(generator)
    }
}

/// How many bytes the texts of the record at the start of `texts` take.
fn texts_len(texts: &[u8]) -> usize {
    let mut end = 0;
    let ok = take_str(texts, &mut end).is_some()
        && take_len(texts, &mut end)
            .is_some_and(|n| (0..n).all(|_| take_str(texts, &mut end).is_some()));
    if ok { end } else { 0 }
}

fn put_len(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

fn put_text(out: &mut Vec<u8>, text: &[u8]) {
    put_len(out, text.len());
    out.extend_from_slice(text);
}

fn take_len(texts: &[u8], at: &mut usize) -> Option<usize> {
    let mut n: usize = 0;
    for shift in (0..usize::BITS).step_by(7) {
        let byte = *texts.get(*at)?;
        *at += 1;
        n |= usize::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

fn take_str<'a>(texts: &'a [u8], at: &mut usize) -> Option<&'a str> {
    let len = take_len(texts, at)?;
    let bytes = texts.get(*at..at.checked_add(len)?)?;
    *at += len;
    std::str::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(record: &str, decision: &str, active: &[&str]) -> RecordStatus {
        RecordStatus {
            record: record.to_string(),
            status: Some(Status::Ok),
            active: active.iter().map(|a| a.to_string()).collect(),
            decision: decision.to_string(),
            held: false,
        }
    }

    #[test]
    fn states_come_back_as_they_went_in_with_a_decision_text_held_once() {
        let statuses = vec![
            status(
                "a.test/A",
                "Standalone: every healthy address",
                &["192.0.2.1"],
            ),
            status("b.test/A", "Standalone: every healthy address", &[]),
            status(
                "c.test/A",
                "DR on: condition holds",
                &["192.0.2.3", "192.0.2.4"],
            ),
        ];
        let mut held = RecordStates::new(statuses.clone());
        assert_eq!(held.statuses(), statuses);
        assert_eq!(held.len(), 3);
        assert_eq!(held.decisions.len(), 2);

        let changed = status("b.test/A", "DR on: condition holds", &["192.0.2.9"]);
        assert!(held.set(1, changed.clone()));
        assert_eq!(held.decisions.len(), 2);
        assert_eq!(held.statuses()[1], changed);
        assert_eq!(held.statuses()[2], statuses[2]);
        assert!(!held.set(3, changed), "no state at 3");
        assert_eq!(held.len(), 3);
    }

    #[test]
    fn many_changes_keep_the_texts_bounded_and_a_list_in_pages_equals_the_whole() {
        let long = "x".repeat(300); // a length of two LEB128 bytes
        let statuses: Vec<_> = (0..100)
            .map(|i| {
                status(
                    &format!("r{i}.test/A"),
                    "d",
                    &[&format!("192.0.2.{i}"), &long],
                )
            })
            .collect();
        let mut held = RecordStates::new(statuses.clone());
        let whole = held.texts.bytes();
        for round in 0..10 {
            for i in 0..100 {
                let s = status(&format!("r{i}.test/A"), &format!("d{round}"), &[&long]);
                assert!(held.set(i, s));
            }
        }
        assert!(
            held.texts.bytes() <= 2 * whole,
            "{} > 2 × {whole}",
            held.texts.bytes()
        );
        assert!(held.decisions.len() < 10, "{:?}", held.decisions);
        let now = held.statuses();
        assert!(
            now.iter()
                .all(|s| s.decision == "d9" && s.active == [long.clone()])
        );

        let mut paged = RecordStates::default();
        for page in statuses.chunks(30) {
            paged.append(&RecordStates::new(page.to_vec()));
        }
        assert_eq!(paged, RecordStates::new(statuses));
        assert_ne!(paged, held);
    }

    /// A page's list, made here or read from JSON, has room beyond the
    /// allocator's largest size class for its entries and its texts; a
    /// report's empty list takes none.
    #[test]
    fn a_page_is_made_with_room_of_its_own() {
        let room = |l: &RecordStates| {
            (
                l.entries.capacity() * std::mem::size_of::<Entry>(),
                l.texts.last.capacity(),
            )
        };
        let (entries, texts) = room(&RecordStates::for_page(10));
        assert!(
            entries >= PAGE_ROOM && texts >= PAGE_ROOM,
            "{entries} {texts}"
        );
        let json = serde_json::to_vec(&vec![status("a.test/A", "up", &["192.0.2.1"])]).unwrap();
        let read: RecordStates = serde_json::from_slice(&json).unwrap();
        let (entries, texts) = room(&read);
        assert!(
            entries >= PAGE_ROOM && texts >= PAGE_ROOM,
            "{entries} {texts}"
        );
        let empty: RecordStates = serde_json::from_slice(b"[]").unwrap();
        assert_eq!(room(&empty), (0, 0));
    }

    /// Sent and taken in as the JSON of its `RecordStatus`es, escapes and
    /// all: a device of an earlier version reads and writes that.
    #[test]
    fn the_list_goes_as_the_json_of_its_statuses() {
        let mut statuses = vec![
            status("a.test/A", "up", &["192.0.2.1", "192.0.2.2"]),
            status("b.test/A", "a \"quoted\" why\n", &[]),
            status("c.test/CNAME", "up", &["caf\u{e9}.test."]),
        ];
        statuses[1].status = None;
        statuses[2].held = true;
        let list = RecordStates::new(statuses.clone());
        let json = serde_json::to_vec(&list).unwrap();
        assert_eq!(json, serde_json::to_vec(&statuses).unwrap());
        let back: RecordStates = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.statuses(), statuses);
        // The status goes as its label, which every version reads; a code
        // (the API's form) is read too.
        let text = String::from_utf8(json).unwrap();
        assert!(text.contains(r#""status":"OK""#), "{text}");
        assert!(text.contains(r#""status":null"#), "{text}");
        let coded = br#"[{"record":"a.test/A","status":"partially_ok_record_down","active":[],"decision":"up"}]"#;
        let back: RecordStates = serde_json::from_slice(coded).unwrap();
        assert_eq!(
            back.statuses()[0].status,
            Some(Status::PartiallyOkRecordDown)
        );
        // `held` absent, from a device of an earlier version.
        let earlier = br#"[{"record":"a.test/A","status":"OK","active":[],"decision":"up"}]"#;
        let back: RecordStates = serde_json::from_slice(earlier).unwrap();
        assert!(!back.statuses()[0].held);
        assert!(serde_json::from_slice::<RecordStates>(br#"[{"record":1}]"#).is_err());
    }

    /// A list larger than a chunk is held in chunks, the full ones
    /// deflated, and a change adds to the last one without moving the
    /// others; every state reads back as it went in, before and after
    /// compactions, and goes as JSON as it is.
    #[test]
    fn a_change_to_a_large_list_moves_no_chunk_but_the_last() {
        let name = |i: usize| format!("record-{i:07}.zone-{:03}.test/A", i % 10);
        let statuses: Vec<_> = (0..60_000)
            .map(|i| status(&name(i), "up", &[&format!("192.0.2.{}", i % 250)]))
            .collect();
        let mut held = RecordStates::new(statuses.clone());
        assert!(
            held.texts.full.len() >= 2,
            "{} full chunks",
            held.texts.full.len()
        );
        let deflated: usize = held.texts.full.iter().map(|c| c.deflated.len()).sum();
        let inflated: usize = held.texts.full.iter().map(|c| c.len).sum();
        assert!(deflated * 3 < inflated, "{deflated} of {inflated} bytes");
        assert_eq!(held.statuses(), statuses);
        let first: Vec<*const u8> = held
            .texts
            .full
            .iter()
            .map(|c| c.deflated.as_ptr())
            .collect();
        assert!(held.set(7, status(&name(7), "down", &[])));
        let after: Vec<*const u8> = held.texts.full[..first.len()]
            .iter()
            .map(|c| c.deflated.as_ptr())
            .collect();
        assert_eq!(after, first, "the full chunks stayed where they were");

        // Enough changes to compact, more than once.
        let mut expected = statuses;
        expected[7] = status(&name(7), "down", &[]);
        for round in 0..3 {
            for i in (0..60_000).step_by(2) {
                let s = status(&name(i), &format!("r{round}"), &["198.51.100.1"]);
                expected[i] = s.clone();
                assert!(held.set(i, s));
            }
        }
        assert_eq!(held.statuses(), expected);
        assert!(held.texts.full.iter().all(|c| c.len <= CHUNK + 1024));
        let json = serde_json::to_vec(&held).unwrap();
        assert_eq!(json, serde_json::to_vec(&expected).unwrap());
        let back: RecordStates = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, held);
    }
}
