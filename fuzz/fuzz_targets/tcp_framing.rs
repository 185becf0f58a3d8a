//! A TCP stream of length-prefixed DNS messages, answered by gtm's request
//! handler as a device's TCP listener does.
//!
//! The TCP listener and its framing are hickory-server's (`Server`); gtm's
//! code on that path is the [`Handler`](gtm::dns::handler::Handler). This
//! target cuts the input into frames the way the stream does (two bytes of
//! length, then the message; several messages per connection; an
//! incomplete last frame ends it), decodes each as hickory does, hands it
//! to the handler and encodes the response with TCP's 65,535-byte limit.
//!
//! Input: one selector byte (the client address), then the stream.
//! Asserts: at most one response per message, each decodes strictly,
//! answers the message's id and fits TCP; encoding never fails.
#![no_main]

use std::sync::{Arc, LazyLock, Mutex};

use gtm::dns::handler::Handler;
use gtm_fuzz::{device, hex, source, strict_decode};
use hickory_server::{
    net::{NetError, runtime::TokioTime, xfer::Protocol},
    proto::{op::MessageType, rr::Record, serialize::binary::BinEncoder},
    server::{Request, RequestHandler, ResponseHandler, ResponseInfo},
    zone_handler::MessageResponse,
};
use libfuzzer_sys::fuzz_target;

/// Messages read from one stream at most: enough for pipelining.
const MAX_FRAMES: usize = 16;

/// Collects the encoded responses instead of writing them to a socket.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<Result<Vec<u8>, String>>>>);

#[async_trait::async_trait]
impl ResponseHandler for Sink {
    async fn send_response<'a>(
        &mut self,
        response: MessageResponse<
            '_,
            'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
        >,
    ) -> Result<ResponseInfo, NetError> {
        // As hickory's own response handle encodes for TCP.
        let mut bytes = Vec::with_capacity(512);
        let mut encoder = BinEncoder::new(&mut bytes);
        encoder.set_max_size(u16::MAX);
        let result = response.destructive_emit(&mut encoder);
        let mut sent = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(info) => {
                sent.push(Ok(bytes));
                Ok(info)
            }
            Err(e) => {
                sent.push(Err(e.to_string()));
                Err(NetError::from(e.to_string()))
            }
        }
    }
}

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime")
});

fuzz_target!(|data: &[u8]| {
    let Some((&selector, mut stream)) = data.split_first() else {
        return;
    };
    let handler = &device().handler;
    let src = source(selector);
    for _ in 0..MAX_FRAMES {
        let Some((len, rest)) = stream.split_first_chunk::<2>() else {
            return;
        };
        let len = usize::from(u16::from_be_bytes(*len));
        let Some(message) = rest.get(..len) else {
            return;
        };
        stream = &rest[len..];
        serve(handler, src, message);
    }
});

fn serve(handler: &Handler, src: std::net::SocketAddr, message: &[u8]) {
    // What hickory does before the handler: drop what has no header, answer
    // undecodable messages itself, never answer a response.
    if message.len() < 12 {
        return;
    }
    let Ok(request) = Request::from_bytes(message.to_vec(), src, Protocol::Tcp) else {
        return;
    };
    if request.metadata.message_type == MessageType::Response {
        return;
    }
    let sink = Sink::default();
    RUNTIME.block_on(handler.handle_request::<_, TokioTime>(&request, sink.clone()));
    let sent = std::mem::take(&mut *sink.0.lock().unwrap_or_else(|e| e.into_inner()));
    assert!(sent.len() <= 1, "{} responses to one message", sent.len());
    for response in sent {
        let bytes = response.unwrap_or_else(|e| {
            panic!(
                "the response cannot be encoded: {e}\nmessage {}",
                hex(message)
            )
        });
        strict_decode(&bytes).unwrap_or_else(|e| {
            panic!(
                "response does not decode: {e}\nmessage  {}\nresponse {}",
                hex(message),
                hex(&bytes)
            )
        });
        assert_eq!(bytes.get(..2), message.get(..2), "response id differs");
    }
}
