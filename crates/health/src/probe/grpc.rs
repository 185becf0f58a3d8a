//! gRPC health probe (grpc.health.v1 Health/Check) over HTTP/2, cleartext
//! (prior knowledge) or TLS with ALPN h2. The two tiny protobuf messages are
//! encoded by hand.

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::HeaderMap;
use hyper::header::{CONTENT_TYPE, USER_AGENT};

use super::http::{authority, hyper_error, send_request};
use super::tcp::{connect_proxied, tls_handshake};
use super::{Alpn, Down, HttpVersion, ProbeResult, Prober, Target, tls_name};

const PATH: &str = "/grpc.health.v1.Health/Check";
/// A health response is a few bytes; anything much larger is not one.
const MAX_RESPONSE: usize = 64 * 1024;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *data.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// `HealthCheckRequest { string service = 1; }` in a gRPC length-prefixed frame.
pub(crate) fn encode_request(service: &str) -> Bytes {
    let mut msg = Vec::new();
    if !service.is_empty() {
        msg.push(0x0a); // field 1, wire type 2
        put_varint(&mut msg, service.len() as u64);
        msg.extend_from_slice(service.as_bytes());
    }
    let mut frame = BytesMut::with_capacity(5 + msg.len());
    frame.extend_from_slice(&[0]);
    frame.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    frame.extend_from_slice(&msg);
    frame.freeze()
}

/// The `status` (field 1) of a `HealthCheckResponse` message; 0 (UNKNOWN)
/// when absent. Unknown fields are skipped.
pub(crate) fn decode_status(msg: &[u8]) -> Result<u64, Down> {
    let bad = || "malformed HealthCheckResponse".to_string();
    let mut pos = 0;
    let mut status = 0;
    while pos < msg.len() {
        let key = get_varint(msg, &mut pos).ok_or_else(bad)?;
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                let v = get_varint(msg, &mut pos).ok_or_else(bad)?;
                if field == 1 {
                    status = v;
                }
            }
            1 => pos += 8,
            2 => {
                let len = get_varint(msg, &mut pos).ok_or_else(bad)?;
                pos = pos
                    .checked_add(usize::try_from(len).map_err(|_| bad())?)
                    .ok_or_else(bad)?;
            }
            5 => pos += 4,
            _ => return Err(bad()),
        }
        if pos > msg.len() {
            return Err(bad());
        }
    }
    Ok(status)
}

fn status_name(status: u64) -> String {
    match status {
        0 => "UNKNOWN".into(),
        1 => "SERVING".into(),
        2 => "NOT_SERVING".into(),
        3 => "SERVICE_UNKNOWN".into(),
        n => format!("health status {n}"),
    }
}

/// Decodes a percent-encoded grpc-message.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| char::from(c).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `Some(Err(reason))` when the headers/trailers carry a non-zero grpc-status,
/// `Some(Ok(()))` for status 0, `None` when there is no grpc-status.
fn grpc_status(map: &HeaderMap) -> Option<Result<(), Down>> {
    let code = map.get("grpc-status")?;
    let code = code.to_str().unwrap_or("?").trim().to_string();
    if code == "0" {
        return Some(Ok(()));
    }
    let message = map
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .map(percent_decode)
        .unwrap_or_default();
    let mut message = message.trim().to_string();
    message.truncate(200);
    Some(Err(if message.is_empty() {
        format!("grpc-status {code}")
    } else {
        format!("grpc-status {code}: {message}")
    }))
}

pub(crate) async fn probe(
    prober: &Prober,
    target: &Target,
    service: &str,
    tls: bool,
    tls_verify: bool,
) -> ProbeResult {
    let scheme = if tls { "https" } else { "http" };
    let uri = format!("{scheme}://{}{PATH}", authority(&tls_name(target)));
    let req = hyper::Request::post(uri)
        .header(CONTENT_TYPE, "application/grpc")
        .header("te", "trailers")
        .header(USER_AGENT, "gtm-health")
        .body(Full::new(encode_request(service)))
        .map_err(|e| format!("invalid request: {e}"))?;

    let stream = connect_proxied(target, false).await?;
    let (resp, _conn) = if tls {
        let tls = tls_handshake(prober, target, stream, tls_verify, Alpn::H2).await?;
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err("server did not negotiate HTTP/2 (ALPN h2)".to_string());
        }
        send_request(tls, HttpVersion::Http2, req).await?
    } else {
        send_request(stream, HttpVersion::Http2, req).await?
    };

    if resp.status() != hyper::StatusCode::OK {
        return Err(format!("HTTP status {}", resp.status().as_u16()));
    }
    // Trailers-Only response: the status is in the headers.
    let header_status = grpc_status(resp.headers());
    if let Some(Err(reason)) = header_status {
        return Err(reason);
    }

    let mut body = resp.into_body();
    let mut data = BytesMut::new();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| hyper_error(&e))?;
        match frame.into_data() {
            Ok(chunk) => {
                if data.len() + chunk.len() > MAX_RESPONSE {
                    return Err("response too large for a health check".to_string());
                }
                data.extend_from_slice(&chunk);
            }
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(t);
                }
            }
        }
    }
    match trailers.as_ref().and_then(grpc_status).or(header_status) {
        Some(Err(reason)) => return Err(reason),
        Some(Ok(())) => {}
        None => return Err("no grpc-status in response".to_string()),
    }

    if data.len() < 5 {
        return Err("empty gRPC response".to_string());
    }
    if data[0] != 0 {
        return Err("compressed gRPC response not supported".to_string());
    }
    let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
    let msg = data
        .get(5..5 + len)
        .ok_or_else(|| "truncated gRPC response".to_string())?;
    let status = decode_status(msg)?;
    let name = status_name(status);
    if status == 1 { Ok(name) } else { Err(name) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode() {
        assert_eq!(&encode_request("")[..], &[0, 0, 0, 0, 0]);
        assert_eq!(
            &encode_request("ab")[..],
            &[0, 0, 0, 0, 4, 0x0a, 2, b'a', b'b']
        );
        assert_eq!(decode_status(&[0x08, 0x01]), Ok(1));
        assert_eq!(decode_status(&[]), Ok(0));
        assert_eq!(decode_status(&[0x12, 0x01, b'x', 0x08, 0x02]), Ok(2));
        assert!(decode_status(&[0x08]).is_err());
        assert_eq!(percent_decode("a%20b%"), "a b%");
    }
}
