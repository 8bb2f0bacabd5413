//! Keeps the API server's `Retry-After` header.
//!
//! A request that API Priority and Fairness rejects is answered `429` with a plain-text body and
//! the seconds to wait only in `Retry-After`. The API client turns a body that is not a JSON
//! `Status` into an error without headers, so the wait would be lost. This layer rewrites such an
//! answer (a `429` or `503` with `Retry-After` and a body that is not JSON) into the `Status` the
//! API server sends for its own throttling, with `details.retryAfterSeconds`.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Response, StatusCode};
use kube::client::DynBody;
use serde_json::json;
use tower::util::MapResponseLayer;

/// An answer of the API client's stack.
type Answer = Response<Box<DynBody>>;

/// The layer, to put on the client's stack.
pub fn layer() -> MapResponseLayer<fn(Answer) -> Answer> {
    MapResponseLayer::new(keep_retry_after)
}

/// `answer` with its `Retry-After` carried in a JSON `Status`, if it is a plain-text `429` or
/// `503` that names one in whole seconds; otherwise `answer` unchanged.
pub fn keep_retry_after(answer: Answer) -> Answer {
    let code = answer.status();
    if !matches!(
        code,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        return answer;
    }
    let json = answer
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .is_some_and(|c| c.starts_with("application/json"));
    let seconds = answer
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u32>().ok());
    let Some(seconds) = seconds.filter(|_| !json) else {
        return answer;
    };
    let (reason, message) = if code == StatusCode::TOO_MANY_REQUESTS {
        (
            "TooManyRequests",
            "too many requests, please try again later",
        )
    } else {
        (
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        )
    };
    let status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": { "retryAfterSeconds": seconds },
        "code": code.as_u16(),
    });
    let (mut parts, _) = answer.into_parts();
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(hyper::header::CONTENT_LENGTH);
    Response::from_parts(parts, body(status.to_string()))
}

/// A body holding `text`.
fn body(text: String) -> Box<DynBody> {
    let never = |never: std::convert::Infallible| -> Box<dyn std::error::Error + Send + Sync> {
        match never {}
    };
    Box::new(Full::new(Bytes::from(text)).map_err(never))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: u16, headers: &[(&str, &str)], body: &str) -> Answer {
        let mut builder = Response::builder().status(code);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(super::body(body.to_owned())).unwrap()
    }

    async fn text(answer: Answer) -> String {
        let bytes = answer.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_plain_text_429_keeps_its_retry_after_as_a_status() {
        let rejected = answer(
            429,
            &[
                ("Retry-After", "3"),
                ("Content-Type", "text/plain; charset=utf-8"),
            ],
            "Too many requests, please try again later.\n",
        );
        let kept = keep_retry_after(rejected);
        assert_eq!(kept.status(), 429);
        let status: kube::core::Status = serde_json::from_str(&text(kept).await).unwrap();
        assert_eq!(status.code, 429);
        assert_eq!(status.reason, "TooManyRequests");
        assert_eq!(status.details.unwrap().retry_after_seconds, 3);
    }

    #[tokio::test]
    async fn other_answers_are_left_as_they_are() {
        let json = r#"{"kind":"Status","code":429,"details":{"retryAfterSeconds":7}}"#;
        for (code, headers, body) in [
            (
                429,
                vec![("Retry-After", "1"), ("Content-Type", "application/json")],
                json,
            ),
            (429, vec![("Content-Type", "text/plain")], "slow down"),
            (
                429,
                vec![("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")],
                "slow down",
            ),
            (500, vec![("Retry-After", "1")], "broken"),
        ] {
            let kept = keep_retry_after(answer(code, &headers, body));
            assert_eq!(kept.status(), code);
            assert_eq!(text(kept).await, body, "{code} {headers:?}");
        }
    }
}
