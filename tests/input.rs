//! What a device does with input it must bound: a configuration with an
//! error on every line is answered with its first errors and a count.

use std::time::Duration;

use crate::support::{TestDevice, ZONE};

/// A domain, then `n` lines that are each a syntax error.
fn bad_lines(n: usize) -> String {
    let mut text = String::from("[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n");
    for i in 0..n {
        text.push_str(&format!("k{i} = = {i}\n"));
    }
    text
}

/// A configuration with an error on each of its 200,000 lines is answered
/// with the first errors of the file and how many there are in all, well
/// within the deadline (lines counted again from the start of the section
/// for each error made this size take minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_on_every_line_is_answered_with_the_first_errors_and_a_count() {
    let d = TestDevice::start(ZONE).await;
    let lines = 200_000;
    let listed = gtm::model::ERRORS_LISTED;
    let http = gtm::tls::http_client(None, Duration::from_secs(120)).unwrap();
    let answer = http
        .post(format!(
            "http://{}/api/v1/config/validate",
            d.device.api_addr
        ))
        .bearer_auth(&d.device.token)
        .body(bad_lines(lines))
        .send()
        .await
        .expect("an answer within 120 s");
    assert_eq!(answer.status(), 422);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["error"], "invalid-config");
    assert_eq!(
        body["message"],
        format!("the configuration has {lines} error(s); nothing was applied")
    );
    let errors: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), listed + 1);
    assert_eq!(
        errors[0],
        "line 4: domain a.test: extra `=`, expected nothing"
    );
    assert_eq!(
        errors[listed - 1],
        format!(
            "line {}: domain a.test: extra `=`, expected nothing",
            3 + listed
        )
    );
    assert_eq!(
        errors[listed],
        format!("… and {} more errors ({lines} in all)", lines - listed)
    );
}
