//! The pull side of the OCI distribution protocol, spoken with the credentials of whoever asks
//! and nobody else's, every body read under a bound and every request under a deadline.
//!
//! Guarantees:
//! - A request carries only the credentials it is given. Tokens and basic credentials are kept
//!   by registry, repository and a digest of the credentials that obtained them, so what one
//!   caller's credentials obtained is never sent for another's, and changed credentials (a
//!   rotated Secret) obtain their own at once.
//! - No body is read past its bound, whatever `Content-Length` says: manifests
//!   [`MAX_MANIFEST_BYTES`], configs [`MAX_CONFIG_BYTES`], token answers and error bodies
//!   [`MAX_SMALL_BYTES`], layers the bound the caller gives.
//! - Every request ends, its body read, within its deadline: a registry that drips bytes holds
//!   up only the fetch that asked it (and the loads sharing it: the same module, repository and
//!   credentials), never for longer than [`DEADLINE`] (a layer: longer by a second per MiB).
//! - A redirect never carries credentials to another host (the HTTP client drops them), never
//!   goes from HTTPS to plain HTTP, and at most [`MAX_REDIRECTS`] are followed.
//!
//! **Warning:** as every registry client does, the host asks the token service the registry
//! names in its challenge, with the caller's credentials. A registry is trusted with the
//! credentials meant for it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use oci_client::Reference;
use oci_client::secrets::RegistryAuth;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};
use sha2::Digest as _;

use crate::wasm::module_bytes::sha256_hex;
use crate::wasm::registry_error::OciError;

/// The largest manifest read: real ones are a few hundred bytes.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The largest config blob read: real ones are a few hundred bytes.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// The largest token answer or error body read.
pub const MAX_SMALL_BYTES: u64 = 64 << 10;
/// How long one request may take, its body read.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// What a module's layer is called where its bound is passed.
pub const MODULE: &str = "the module";
/// How many redirects one request follows.
pub const MAX_REDIRECTS: usize = 5;
/// How many authorizations are kept; the oldest go first.
const MAX_AUTHORIZATIONS: usize = 4096;
/// How long a token without `expires_in` is used, as the distribution spec defaults.
const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(60);
/// The media types a manifest is asked for in.
const MANIFEST_TYPES: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, \
     application/vnd.oci.image.index.v1+json";

/// What obtained an authorization: the registry, the repository (tokens are scoped to it) and
/// the SHA-256 of the credentials.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Grantee {
    registry: String,
    repository: String,
    credentials: [u8; 32],
}

impl Grantee {
    fn new(reference: &Reference, auth: &RegistryAuth) -> Self {
        Self {
            registry: reference.resolve_registry().to_owned(),
            repository: reference.repository().to_owned(),
            credentials: fingerprint(auth),
        }
    }
}

/// The SHA-256 of `auth`, told apart by kind: what the host keeps of credentials in memory.
pub fn fingerprint(auth: &RegistryAuth) -> [u8; 32] {
    let mut hash = sha2::Sha256::new();
    match auth {
        RegistryAuth::Anonymous => hash.update(b"anonymous"),
        RegistryAuth::Basic(user, password) => {
            hash.update(b"basic\0");
            hash.update(user.as_bytes());
            hash.update(b"\0");
            hash.update(password.as_bytes());
        }
        RegistryAuth::Bearer(token) => {
            hash.update(b"bearer\0");
            hash.update(token.as_bytes());
        }
    }
    hash.finalize().into()
}

/// An `Authorization` header a grantee obtained, and until when it may be sent.
#[derive(Clone)]
struct Authorization {
    header: HeaderValue,
    until: Option<Instant>,
}

/// A registry's answer, its body read under a bound.
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body (empty for a HEAD).
    pub body: Vec<u8>,
}

/// A pull client shared by every caller; see the module doc for what it guarantees.
pub struct Puller {
    http: reqwest::Client,
    /// Registries spoken to in plain HTTP besides loopback ones.
    insecure: Vec<String>,
    authorizations: Mutex<HashMap<Grantee, Authorization>>,
}

impl Puller {
    /// A client speaking plain HTTP to loopback registries and to `insecure` ones.
    pub fn new(insecure: Vec<String>) -> Self {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let downgrade = attempt
                .previous()
                .last()
                .is_some_and(|p| p.scheme() == "https")
                && attempt.url().scheme() != "https";
            if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error("too many redirects")
            } else if downgrade {
                attempt.error("a redirect from HTTPS to plain HTTP")
            } else {
                attempt.follow()
            }
        });
        let http = reqwest::Client::builder()
            .redirect(policy)
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(DEADLINE)
            .user_agent(concat!("kubewasm/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("the registry client builds");
        Self {
            http,
            insecure,
            authorizations: Mutex::default(),
        }
    }

    /// `scheme://registry/v2/repository`.
    fn base(&self, reference: &Reference) -> String {
        let registry = reference.resolve_registry();
        let plain = is_loopback(registry) || self.insecure.iter().any(|r| r == registry);
        let scheme = if plain { "http" } else { "https" };
        format!("{scheme}://{registry}/v2/{}", reference.repository())
    }

    /// The digest of the manifest `reference` names now, from a HEAD request: `None` when the
    /// registry does not say (no `Docker-Content-Digest`).
    pub async fn manifest_digest(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<Option<String>, OciError> {
        let url = format!(
            "{}/manifests/{}",
            self.base(reference),
            tag_or_digest(reference)
        );
        let answer = self
            .request(
                Method::HEAD,
                &url,
                reference,
                auth,
                MANIFEST_TYPES,
                (0, "an answer"),
            )
            .await?;
        let digest = answer
            .headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .filter(|d| d.starts_with("sha256:"))
            .map(str::to_owned);
        if let (Some(wanted), Some(digest)) = (reference.digest(), &digest)
            && wanted != digest
        {
            return Err(OciError::Digest {
                reference: reference.whole(),
                message: format!("asked for {wanted}, the registry answered {digest}"),
            });
        }
        Ok(digest)
    }

    /// The manifest named `name` (a tag or a digest) in `reference`'s repository, and its
    /// digest, verified against `name` when it is one and against `Docker-Content-Digest`.
    pub async fn manifest(
        &self,
        reference: &Reference,
        name: &str,
        auth: &RegistryAuth,
    ) -> Result<(Vec<u8>, String), OciError> {
        let url = format!("{}/manifests/{name}", self.base(reference));
        let answer = self
            .request(
                Method::GET,
                &url,
                reference,
                auth,
                MANIFEST_TYPES,
                (MAX_MANIFEST_BYTES, "the manifest"),
            )
            .await?;
        let digest = format!("sha256:{}", sha256_hex(&answer.body));
        let said = answer
            .headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .filter(|d| d.starts_with("sha256:"));
        for expected in [Some(name).filter(|n| n.starts_with("sha256:")), said]
            .into_iter()
            .flatten()
        {
            if expected != digest {
                return Err(OciError::Digest {
                    reference: reference.whole(),
                    message: format!("the manifest should be {expected}, its bytes are {digest}"),
                });
            }
        }
        Ok((answer.body, digest))
    }

    /// The blob `digest` of `reference`'s repository, `what` it is (`the config`, `the
    /// module`) of at most `limit` bytes, verified against its digest.
    pub async fn blob(
        &self,
        reference: &Reference,
        digest: &str,
        auth: &RegistryAuth,
        (limit, what): (u64, &'static str),
    ) -> Result<Vec<u8>, OciError> {
        let url = format!("{}/blobs/{digest}", self.base(reference));
        let answer = self
            .request(Method::GET, &url, reference, auth, "*/*", (limit, what))
            .await?;
        let actual = format!("sha256:{}", sha256_hex(&answer.body));
        if actual != digest {
            return Err(OciError::Digest {
                reference: reference.whole(),
                message: format!("the blob should be {digest}, its bytes are {actual}"),
            });
        }
        Ok(answer.body)
    }

    /// Sends a request with what `auth` obtained for `reference`'s repository, obtaining it
    /// when the registry asks (a 401 with a challenge); the answer's body, `what` it is, read
    /// up to `limit` bytes. A status other than success is an error.
    async fn request(
        &self,
        method: Method,
        url: &str,
        reference: &Reference,
        auth: &RegistryAuth,
        accept: &str,
        (limit, what): (u64, &'static str),
    ) -> Result<Answer, OciError> {
        let grantee = Grantee::new(reference, auth);
        let mut authorization = self.authorization(&grantee);
        let deadline = deadline(limit);
        for attempt in 0..2 {
            let mut request = self
                .http
                .request(method.clone(), url)
                .header(ACCEPT, accept);
            if let Some(header) = &authorization {
                request = request.header(AUTHORIZATION, header.clone());
            }
            let answer = self
                .send(request, reference, (limit, what), deadline)
                .await?;
            if answer.status == StatusCode::UNAUTHORIZED && attempt == 0 {
                let challenge = answer
                    .headers
                    .get(WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .map(Challenge::parse);
                if let Some(challenge) = challenge {
                    let obtained = self.authorize(&challenge, reference, auth).await?;
                    authorization = Some(obtained.header.clone());
                    self.keep(grantee.clone(), obtained);
                    continue;
                }
            }
            return if answer.status.is_success() {
                Ok(answer)
            } else {
                Err(status_error(reference, &answer))
            };
        }
        unreachable!("the second attempt returns")
    }

    /// Sends `request` and reads its answer, up to `limit` bytes of body, `what` it is (of an
    /// error: up to [`MAX_SMALL_BYTES`]), all within `deadline`.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        reference: &Reference,
        (limit, what): (u64, &'static str),
        deadline: Duration,
    ) -> Result<Answer, OciError> {
        let unreachable = |message: String| OciError::Unreachable {
            registry: reference.resolve_registry().to_owned(),
            message,
        };
        let exchange = async {
            let mut response = request
                .send()
                .await
                .map_err(|e| unreachable(error_chain(&e)))?;
            let status = response.status();
            let bound = if status.is_success() {
                (limit, what)
            } else {
                (MAX_SMALL_BYTES, "an error answer")
            };
            let body = read_bounded(&mut response, bound, reference).await?;
            Ok(Answer {
                status,
                headers: response.headers().clone(),
                body,
            })
        };
        tokio::time::timeout(deadline, exchange)
            .await
            .map_err(|_| unreachable(format!("no whole answer within {deadline:?}")))?
    }

    /// Obtains what the `challenge` asks for with `auth`: a bearer token from the token
    /// service it names, or basic credentials.
    async fn authorize(
        &self,
        challenge: &Challenge,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<Authorization, OciError> {
        let refused = |message: String| OciError::Unauthorized {
            registry: reference.resolve_registry().to_owned(),
            reference: reference.whole(),
            message,
        };
        match (challenge, auth) {
            (_, RegistryAuth::Bearer(token)) => Ok(Authorization {
                header: header(&format!("Bearer {token}"))?,
                until: None,
            }),
            (Challenge::Basic, RegistryAuth::Basic(user, password)) => Ok(Authorization {
                header: header(&basic(user, password))?,
                until: None,
            }),
            (Challenge::Basic, RegistryAuth::Anonymous) => Err(refused(
                "the registry asks for credentials and none were given".into(),
            )),
            (Challenge::Bearer { realm, service }, _) => {
                self.token(realm, service.as_deref(), reference, auth).await
            }
            (Challenge::Other(scheme), _) => Err(refused(format!(
                "the registry asks for {scheme} authentication, which the host does not speak"
            ))),
        }
    }

    /// A pull token for `reference`'s repository from the token service at `realm`.
    async fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<Authorization, OciError> {
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
            expires_in: Option<u64>,
        }
        let scope = format!("repository:{}:pull", reference.repository());
        let mut query = vec![("scope", scope.as_str())];
        if let Some(service) = service {
            query.push(("service", service));
        }
        let mut request = self.http.get(realm).query(&query);
        if let RegistryAuth::Basic(user, password) = auth {
            request = request.header(AUTHORIZATION, header(&basic(user, password))?);
        }
        let answer = self
            .send(
                request,
                reference,
                (MAX_SMALL_BYTES, "the token service's answer"),
                DEADLINE,
            )
            .await?;
        if !answer.status.is_success() {
            return Err(OciError::Unauthorized {
                registry: reference.resolve_registry().to_owned(),
                reference: reference.whole(),
                message: format!(
                    "the token service answered {}: {}",
                    answer.status,
                    printable(&answer.body)
                ),
            });
        }
        let token: Token = serde_json::from_slice(&answer.body).map_err(|e| OciError::Other {
            reference: reference.whole(),
            message: format!("the token service's answer does not parse: {e}"),
        })?;
        let value = token
            .token
            .or(token.access_token)
            .ok_or_else(|| OciError::Other {
                reference: reference.whole(),
                message: "the token service's answer holds no token".into(),
            })?;
        let lifetime = token
            .expires_in
            .map_or(DEFAULT_TOKEN_LIFETIME, Duration::from_secs);
        Ok(Authorization {
            header: header(&format!("Bearer {value}"))?,
            until: Some(Instant::now() + lifetime.saturating_sub(Duration::from_secs(5))),
        })
    }

    /// What `grantee` obtained before, if it may still be sent.
    fn authorization(&self, grantee: &Grantee) -> Option<HeaderValue> {
        let kept = self.authorizations.lock().expect("authorizations lock");
        kept.get(grantee)
            .filter(|a| a.until.is_none_or(|until| Instant::now() < until))
            .map(|a| a.header.clone())
    }

    /// Keeps what `grantee` obtained, dropping expired ones (and, past the bound, all) first.
    fn keep(&self, grantee: Grantee, authorization: Authorization) {
        let mut kept = self.authorizations.lock().expect("authorizations lock");
        if kept.len() >= MAX_AUTHORIZATIONS {
            let now = Instant::now();
            kept.retain(|_, a| a.until.is_none_or(|until| now < until));
            if kept.len() >= MAX_AUTHORIZATIONS {
                kept.clear();
            }
        }
        kept.insert(grantee, authorization);
    }
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, PartialEq, Eq)]
enum Challenge {
    /// `Basic realm=...`.
    Basic,
    /// `Bearer realm=...,service=...`: a token service.
    Bearer {
        realm: String,
        service: Option<String>,
    },
    /// Any other scheme.
    Other(String),
}

impl Challenge {
    /// Reads `scheme key="value",key=value...`.
    fn parse(text: &str) -> Self {
        let (scheme, rest) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
        let mut params = HashMap::new();
        let mut rest = rest.trim();
        while let Some((key, after)) = rest.split_once('=') {
            let key = key
                .trim()
                .trim_start_matches(',')
                .trim()
                .to_ascii_lowercase();
            let after = after.trim_start();
            let (value, next) = match after.strip_prefix('"') {
                Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
                None => after.split_once(',').unwrap_or((after, "")),
            };
            params.insert(key, value.to_owned());
            rest = next.trim_start().trim_start_matches(',');
        }
        if scheme.eq_ignore_ascii_case("basic") {
            Self::Basic
        } else if scheme.eq_ignore_ascii_case("bearer")
            && let Some(realm) = params.remove("realm")
        {
            Self::Bearer {
                realm,
                service: params.remove("service"),
            }
        } else {
            Self::Other(scheme.to_owned())
        }
    }
}

/// How long a request whose body may be `limit` bytes may take: [`DEADLINE`], and a second
/// more per MiB past 1 MiB.
fn deadline(limit: u64) -> Duration {
    DEADLINE + Duration::from_secs((limit >> 20).saturating_sub(1))
}

/// The body of `response`, `what` it is, refused as soon as it passes `limit` bytes.
async fn read_bounded(
    response: &mut reqwest::Response,
    (limit, what): (u64, &'static str),
    reference: &Reference,
) -> Result<Vec<u8>, OciError> {
    let too_large = |size: u64| {
        if what == MODULE {
            OciError::TooLarge {
                reference: reference.whole(),
                size,
                limit,
            }
        } else {
            OciError::Oversized {
                reference: reference.whole(),
                what,
                limit,
            }
        }
    };
    if let Some(length) = response.content_length()
        && length > limit
    {
        return Err(too_large(length));
    }
    let capacity = response.content_length().unwrap_or(0).min(limit);
    let mut body = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
    while let Some(chunk) = response.chunk().await.map_err(|e| OciError::Unreachable {
        registry: reference.resolve_registry().to_owned(),
        message: format!("reading an answer: {}", error_chain(&e)),
    })? {
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(too_large((body.len() + chunk.len()) as u64));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The error a registry's answer of `status` other than success stands for.
fn status_error(reference: &Reference, answer: &Answer) -> OciError {
    let registry = reference.resolve_registry().to_owned();
    let message = match printable(&answer.body) {
        body if body.is_empty() => answer.status.to_string(),
        body => format!("{}: {body}", answer.status),
    };
    match answer.status.as_u16() {
        401 | 403 => OciError::Unauthorized {
            registry,
            reference: reference.whole(),
            message,
        },
        404 => OciError::NotFound {
            reference: reference.whole(),
            message,
        },
        429 | 500.. => OciError::Unreachable { registry, message },
        _ => OciError::Other {
            reference: reference.whole(),
            message,
        },
    }
}

/// At most 300 characters of `body`, control characters replaced: what of a registry's answer
/// goes into a message.
fn printable(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect::<String>()
        .trim()
        .to_owned()
}

/// `error` and its sources, as one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The tag or digest `reference` names (`latest` when neither).
pub fn tag_or_digest(reference: &Reference) -> &str {
    reference
        .digest()
        .or_else(|| reference.tag())
        .unwrap_or("latest")
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

fn header(value: &str) -> Result<HeaderValue, OciError> {
    let mut header = HeaderValue::from_str(value).map_err(|_| OciError::Other {
        reference: String::new(),
        message: "credentials that cannot be sent in an HTTP header".into(),
    })?;
    header.set_sensitive(true);
    Ok(header)
}

/// Whether `registry` (`host` or `host:port`) is a loopback address.
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => registry,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_read() {
        assert_eq!(
            Challenge::parse(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a:pull""#
            ),
            Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
            }
        );
        assert_eq!(
            Challenge::parse(r#"Basic realm="kubewasm-tests""#),
            Challenge::Basic
        );
        assert_eq!(
            Challenge::parse("bearer realm=https://a/t, service=s"),
            Challenge::Bearer {
                realm: "https://a/t".into(),
                service: Some("s".into()),
            }
        );
        assert_eq!(
            Challenge::parse("Negotiate"),
            Challenge::Other("Negotiate".into())
        );
        assert_eq!(
            Challenge::parse("Bearer service=s"),
            Challenge::Other("Bearer".into())
        );
    }

    #[test]
    fn credentials_are_told_apart() {
        let anonymous = fingerprint(&RegistryAuth::Anonymous);
        let a = fingerprint(&RegistryAuth::Basic("a".into(), "b".into()));
        let rotated = fingerprint(&RegistryAuth::Basic("a".into(), "c".into()));
        let shifted = fingerprint(&RegistryAuth::Basic("a\0b".into(), String::new()));
        let bearer = fingerprint(&RegistryAuth::Bearer("a".into()));
        let all = [anonymous, a, rotated, shifted, bearer];
        for (i, x) in all.iter().enumerate() {
            for y in &all[i + 1..] {
                assert_ne!(x, y);
            }
        }
    }

    #[test]
    fn a_larger_body_has_a_longer_deadline() {
        assert_eq!(deadline(0), DEADLINE);
        assert_eq!(
            deadline(MAX_MANIFEST_BYTES),
            DEADLINE + Duration::from_secs(3)
        );
        assert_eq!(deadline(256 << 20), DEADLINE + Duration::from_secs(255));
    }

    #[test]
    fn what_a_registry_says_is_cut_and_made_printable() {
        let said = printable(b"bad\r\nrequest\x1b[31m");
        assert_eq!(said, "bad  request [31m");
        assert_eq!(printable(&[b'x'; 1000]).len(), 300);
    }

    #[test]
    fn loopback_registries_are_plain_http() {
        for registry in [
            "127.0.0.1:5000",
            "localhost:5000",
            "localhost",
            "[::1]:5000",
            "127.1.2.3",
        ] {
            assert!(is_loopback(registry), "{registry}");
        }
        for registry in ["ghcr.io", "10.0.0.1:5000", "registry.local:5000"] {
            assert!(!is_loopback(registry), "{registry}");
        }
    }
}
