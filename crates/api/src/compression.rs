//! gzip for the console's pages and the API's answers, when the client
//! asks for it (`Accept-Encoding`): a Records page of a thousand records is
//! a tenth of its size on the wire. Streams are left alone, so that each
//! event leaves as it happens: the console's live stream (SSE) and the
//! event log followed as NDJSON; so are bodies too small to gain.

use tower_http::compression::{
    CompressionLayer,
    predicate::{And, DefaultPredicate, NotForContentType, Predicate},
};

/// The layer the device puts around the API and console router.
pub fn layer() -> CompressionLayer<And<DefaultPredicate, NotForContentType>> {
    CompressionLayer::new().compress_when(
        DefaultPredicate::new().and(NotForContentType::const_new("application/x-ndjson")),
    )
}
