//! Webhooks: the message's JSON body posted to the URL, signed when the
//! notifier has a `secret_file`:
//!
//! - `X-Gtm-Timestamp`: the Unix time of the post (seconds);
//! - `X-Gtm-Signature`: `sha256=` and the hex HMAC-SHA256, keyed with the
//!   file's bytes (a final newline left out), of the timestamp, a `.` and
//!   the body; a receiver recomputes it and refuses an old timestamp;
//! - `X-Gtm-Delivery`: the message's id, the same on every retry.
//!
//! A 2xx answer delivers the message; anything else is a failure retried.

use std::{path::Path, time::Duration};

use super::message::Message;

/// The key a secret file holds: its bytes, without a final newline.
pub fn secret(path: &Path) -> Result<Vec<u8>, String> {
    let mut key =
        std::fs::read(path).map_err(|e| format!("secret_file {}: {e}", path.display()))?;
    while key.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        key.pop();
    }
    if key.is_empty() {
        return Err(format!("secret_file {} is empty", path.display()));
    }
    Ok(key)
}

/// `sha256=<hex>` of `timestamp.body`.
pub fn signature(key: &[u8], timestamp: u64, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    let tag = ctx.sign();
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

pub fn client(ca_file: Option<&Path>) -> Result<reqwest::Client, String> {
    let tls = super::tls::client(ca_file)?;
    reqwest::Client::builder()
        .tls_backend_preconfigured((*tls).clone())
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())
}

/// Posts `message`.
pub async fn send(
    url: &str,
    secret_file: Option<&Path>,
    ca_file: Option<&Path>,
    message: &Message,
) -> Result<(), String> {
    let body = serde_json::to_vec(message).map_err(|e| e.to_string())?;
    let timestamp = gtm_model::clock::now_ms() / 1000;
    let http = client(ca_file)?;
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("user-agent", "gtm-alerts")
        .header("x-gtm-delivery", &message.id)
        .header("x-gtm-timestamp", timestamp.to_string());
    if let Some(path) = secret_file {
        request = request.header(
            "x-gtm-signature",
            signature(&secret(path)?, timestamp, &body),
        );
    }
    let response = request
        .body(body)
        .send()
        .await
        .map_err(|e| error_text(&e))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("{url} answered status {}", status.as_u16()))
    }
}

/// A request error with its causes (`connection refused`, ...).
fn error_text(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_of_timestamp_dot_body() {
        let key = b"Jefe";
        let sig = signature(key, 1_700_000_000, b"{}");
        let expected = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key),
            b"1700000000.{}",
        );
        let hex: String = expected
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sig, format!("sha256={hex}"));
        assert_eq!(sig.len(), 7 + 64);
    }
}
