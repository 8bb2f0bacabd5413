//! The host's HTTP endpoints: `/metrics` and `/status` on the metrics address, `/healthz` and
//! `/readyz` on the health probe address (one listener serves all four when both are the same).
//!
//! Guarantees: the listeners are bound before the modules load, so a taken address fails the
//! start-up and probes are answered while modules compile; `/healthz` answers 200 while the
//! process runs; `/readyz` answers 200 once every module is loaded and every informer has
//! listed, else 503 with the reason, on a standby waiting for leadership as on the leader (a
//! standby is warm: it loads and lists before it leads); any other path or method gets 404 or 405. Listeners stop
//! accepting when the host's shutdown token is cancelled, and open connections end after their
//! current response.

use std::convert::Infallible;
use std::fmt::{self, Display, Formatter};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::cluster::gate::Gate;
use crate::cluster::selection::Selection;
use crate::manage::host::Observer;
use crate::serve::metrics::{self, Snapshot};

/// A listener that could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {address} for {serves}: {source}")]
pub struct BindError {
    /// The address.
    pub address: SocketAddr,
    /// What it was to serve.
    pub serves: Endpoints,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// Which endpoints one listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    /// `/metrics` and `/status`.
    pub metrics: bool,
    /// `/healthz` and `/readyz`.
    pub probes: bool,
}

impl Display for Endpoints {
    /// The paths served, e.g. `/healthz, /readyz`.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let metrics = ["/metrics", "/status"].iter().filter(|_| self.metrics);
        let probes = ["/healthz", "/readyz"].iter().filter(|_| self.probes);
        let paths: Vec<_> = metrics.chain(probes).copied().collect();
        f.write_str(&paths.join(", "))
    }
}

/// The host the endpoints report on, set once it has loaded its modules; cheap to clone.
#[derive(Clone, Default)]
pub struct Started(Arc<State>);

#[derive(Default)]
struct State {
    host: OnceLock<Observer>,
    /// The Lease's name and the gate that opens once this process leads, under election.
    election: OnceLock<(String, Gate)>,
}

impl Started {
    /// Marks the host as started; later calls are ignored.
    pub fn set(&self, observer: Observer) {
        let _ = self.0.host.set(observer);
    }

    /// Reports leadership of the Lease `name`: held once `gate` is open. Later calls are
    /// ignored.
    pub fn set_election(&self, name: &str, gate: Gate) {
        let _ = self.0.election.set((name.to_owned(), gate));
    }

    /// The Lease's name and whether this process holds it, under election.
    fn leader(&self) -> Option<(String, bool)> {
        let (name, gate) = self.0.election.get()?;
        Some((name.clone(), gate.is_open()))
    }
}

/// A bound listener, not yet serving.
pub struct Server {
    listener: TcpListener,
    endpoints: Endpoints,
}

/// Binds the metrics and health probe listeners (`None` disables one); one listener serves
/// both when the addresses are equal.
pub async fn bind(
    metrics: Option<SocketAddr>,
    probes: Option<SocketAddr>,
) -> Result<Vec<Server>, BindError> {
    let mut wanted: Vec<(SocketAddr, Endpoints)> = Vec::new();
    if let Some(address) = metrics {
        wanted.push((
            address,
            Endpoints {
                metrics: true,
                probes: false,
            },
        ));
    }
    if let Some(address) = probes {
        match wanted.iter_mut().find(|(a, _)| *a == address) {
            Some((_, endpoints)) => endpoints.probes = true,
            None => wanted.push((
                address,
                Endpoints {
                    metrics: false,
                    probes: true,
                },
            )),
        }
    }
    let mut servers = Vec::new();
    for (address, endpoints) in wanted {
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| BindError {
                address,
                serves: endpoints,
                source,
            })?;
        servers.push(Server {
            listener,
            endpoints,
        });
    }
    Ok(servers)
}

impl Server {
    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// What it serves.
    pub fn endpoints(&self) -> Endpoints {
        self.endpoints
    }

    /// Serves HTTP/1.1 until `shutdown` is cancelled.
    pub async fn run(self, host: Started, shutdown: CancellationToken) {
        loop {
            let stream = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        tracing::warn!(%error, "accepting a connection failed");
                        continue;
                    }
                },
                () = shutdown.cancelled() => return,
            };
            let endpoints = self.endpoints;
            let host = host.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let host = host.clone();
                    async move { Ok::<_, Infallible>(respond(&request, endpoints, &host).await) }
                });
                let connection = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .serve_connection(TokioIo::new(stream), service);
                let mut connection = std::pin::pin!(connection);
                let served = tokio::select! {
                    served = connection.as_mut() => served,
                    () = shutdown.cancelled() => {
                        connection.as_mut().graceful_shutdown();
                        connection.await
                    }
                };
                if let Err(error) = served {
                    tracing::debug!(%error, "HTTP connection ended with an error");
                }
            });
        }
    }
}

type Reply = Response<Full<Bytes>>;

async fn respond(request: &Request<Incoming>, endpoints: Endpoints, host: &Started) -> Reply {
    let path = request.uri().path();
    let known = match path {
        "/metrics" | "/status" => endpoints.metrics,
        "/healthz" | "/readyz" => endpoints.probes,
        _ => false,
    };
    if !known {
        return reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".into());
    }
    if request.method() != Method::GET {
        let mut response = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".into(),
        );
        response
            .headers_mut()
            .insert(ALLOW, hyper::header::HeaderValue::from_static("GET"));
        return response;
    }
    let observer = host.0.host.get();
    match path {
        "/healthz" => reply(StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" => match not_ready(observer) {
            None => reply(StatusCode::OK, "text/plain", "ok\n".into()),
            Some(reason) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("{reason}\n"),
            ),
        },
        _ => {
            let mut snapshot = match observer {
                Some(observer) => Snapshot::collect(observer),
                None => Snapshot::default(),
            };
            snapshot.leader = host.leader();
            if path == "/metrics" {
                reply(StatusCode::OK, metrics::CONTENT_TYPE, snapshot.render())
            } else {
                let mut body = status(&snapshot).to_string();
                body.push('\n');
                reply(StatusCode::OK, "application/json", body)
            }
        }
    }
}

fn reply(status: StatusCode, content_type: &'static str, body: String) -> Reply {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

/// Why the host is not ready, if it is not.
fn not_ready(observer: Option<&Observer>) -> Option<String> {
    let Some(observer) = observer else {
        return Some("modules are loading".into());
    };
    let waiting: Vec<_> = observer
        .informers()
        .iter()
        .filter(|i| !i.is_synced())
        .map(|i| describe(i.selection()))
        .collect();
    (!waiting.is_empty()).then(|| format!("informers not synced: {}", waiting.join(", ")))
}

fn describe(selection: &Selection) -> String {
    let kind = &selection.kind;
    let mut text = match kind.group.as_str() {
        "" => format!("{}/{}", kind.version, kind.kind),
        group => format!("{group}/{}/{}", kind.version, kind.kind),
    };
    if let Some(namespace) = &selection.namespace {
        text.push_str(&format!(" in {namespace}"));
    }
    if let Some(selector) = &selection.selector {
        text.push_str(&format!(" ({selector})"));
    }
    text
}

/// The `/status` document: each guest's module, reconcile counters and failures.
fn status(snapshot: &Snapshot) -> serde_json::Value {
    let guests: Vec<_> = snapshot
        .guests
        .iter()
        .map(|guest| {
            let h = &guest.tally;
            let shard = guest.shard.as_ref().map(
                |s| json!({ "member": s.member, "objects": s.objects, "handovers": s.handovers }),
            );
            json!({
                "name": guest.name,
                "module": guest.module,
                "digest": h.digest,
                "loadedAt": Timestamp::try_from(h.loaded_at).ok().map(|t| t.to_string()),
                "counters": {
                    "succeeded": h.succeeded,
                    "requeued": h.requeued,
                    "failed": h.failed,
                    "traps": h.traps,
                    "timeouts": h.timeouts,
                    "outOfMemory": h.out_of_memory,
                    "denied": h.denied,
                    "logLinesDropped": h.output_dropped,
                    "writesElided": guest.writes_elided,
                    "eventsDropped": guest.events_dropped,
                },
                "finalizing": {
                    "objects": guest.finalizing.objects,
                    "oldestSeconds": guest.finalizing.oldest_seconds,
                },
                "consecutiveFailures": h.consecutive_failures,
                "failing": h.failing,
                "lastError": h.last_error,
                "shard": shard,
            })
        })
        .collect();
    let mut status = json!({ "guests": guests });
    if let Some((lease, leading)) = &snapshot.leader {
        status["leaderElection"] = json!({ "lease": lease, "leading": leading });
    }
    status
}

#[cfg(test)]
mod tests {
    use kube::api::GroupVersionKind;

    use super::*;

    #[tokio::test]
    async fn equal_addresses_share_one_listener() {
        let address: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let servers = bind(Some(address), Some(address)).await.unwrap();
        assert_eq!(servers.len(), 1);
        assert_eq!(
            servers[0].endpoints(),
            Endpoints {
                metrics: true,
                probes: true
            }
        );
        assert_eq!(
            servers[0].endpoints().to_string(),
            "/metrics, /status, /healthz, /readyz"
        );
        assert!(bind(None, None).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_taken_address_is_an_error_naming_it() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = taken.local_addr().unwrap();
        let error = bind(None, Some(address)).await.err().unwrap();
        assert!(
            error.to_string().starts_with(&format!(
                "cannot listen on {address} for /healthz, /readyz: "
            )),
            "{error}"
        );
    }

    #[test]
    fn a_host_not_started_is_not_ready() {
        assert_eq!(not_ready(None).as_deref(), Some("modules are loading"));
    }

    #[test]
    fn informers_are_described_by_kind_namespace_and_selector() {
        let selection = Selection {
            kind: GroupVersionKind::gvk("apps", "v1", "Deployment"),
            namespace: Some("team-a".into()),
            selector: Some("app=web".parse().unwrap()),
        };
        assert_eq!(
            describe(&selection),
            "apps/v1/Deployment in team-a (app=web)"
        );
    }
}
