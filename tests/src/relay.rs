//! A TCP relay in front of the test API server that can partition its clients from it.
//!
//! A client given [`Relay::kubeconfig`] reaches the real API server through the relay; TLS runs
//! end to end, so the relay sees only bytes. [`Relay::partition_at_next_request`] models an API
//! server that crashes just after a request arrived: the request reaches the API server and
//! takes effect, but neither its answer nor any other byte from the server (watch events
//! included) reaches a client. Then every connection is cut, and for a while every new one is
//! closed at once, as if nothing listened. The client sees its request fail with no answer.
//! [`Relay::disconnect`] cuts every connection at once and refuses new ones until
//! [`Relay::reconnect`]: a client cut off for as long as the test needs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use kube::config::Kubeconfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The partition's state: none, armed, answers lost, or down.
const IDLE: u8 = 0;
const ARMED: u8 = 1;
const PARTITIONED: u8 = 2;
const DOWN: u8 = 3;

struct Shared {
    state: AtomicU8,
    /// How long answers are lost, then how long the API server is down.
    lengths: std::sync::Mutex<(Duration, Duration)>,
    /// Bumped when answers stop being lost: every connection open until then is cut.
    cuts: watch::Sender<u64>,
    /// Set once the partition has started and ended.
    healed: AtomicBool,
}

/// A relay listening on loopback; stops when dropped.
pub struct Relay {
    kubeconfig: PathBuf,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Relay {
    /// A relay to the API server of `kubeconfig`, with a kubeconfig of its own that names the
    /// relay instead.
    pub async fn start(kubeconfig: &Path) -> Result<Self> {
        let mut config = Kubeconfig::read_from(kubeconfig)?;
        let cluster = config
            .clusters
            .first_mut()
            .and_then(|c| c.cluster.as_mut())
            .context("the kubeconfig has no cluster")?;
        let server: http::Uri = cluster
            .server
            .as_deref()
            .context("the cluster has no server")?
            .parse()?;
        let upstream = server
            .authority()
            .context("the server has no address")?
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        cluster.server = Some(format!("https://{address}"));
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, serde_yaml::to_string(&config)?)?;
        let shared = Arc::new(Shared {
            state: AtomicU8::new(IDLE),
            lengths: std::sync::Mutex::new((Duration::ZERO, Duration::ZERO)),
            cuts: watch::channel(0).0,
            healed: AtomicBool::new(false),
        });
        let accept = tokio::spawn(accept(listener, upstream, shared.clone()));
        Ok(Self {
            kubeconfig: path,
            shared,
            accept,
            _dir: dir,
        })
    }

    /// A kubeconfig that reaches the API server through the relay.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// When a client next sends a byte, loses every answer for `lost` (that byte and the rest of
    /// the request still reach the API server), then cuts every connection and refuses new ones
    /// for `down`.
    pub fn partition_at_next_request(&self, lost: Duration, down: Duration) {
        *self.shared.lengths.lock().expect("lengths lock") = (lost, down);
        self.shared.healed.store(false, Ordering::SeqCst);
        self.shared.state.store(ARMED, Ordering::SeqCst);
    }

    /// Whether the last partition asked for has started and ended.
    pub fn healed(&self) -> bool {
        self.shared.healed.load(Ordering::SeqCst)
    }

    /// Cuts every connection now and refuses new ones until [`Relay::reconnect`].
    pub fn disconnect(&self) {
        self.shared.healed.store(false, Ordering::SeqCst);
        self.shared.state.store(DOWN, Ordering::SeqCst);
        self.shared.cuts.send_modify(|cut| *cut += 1);
    }

    /// Accepts and relays connections again after [`Relay::disconnect`].
    pub fn reconnect(&self) {
        self.shared.state.store(IDLE, Ordering::SeqCst);
        self.shared.healed.store(true, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        self.shared.cuts.send_modify(|cut| *cut += 1);
    }
}

/// Accepts connections until the relay is dropped. A failed accept (a connection reset before it
/// was accepted, no file descriptor left for a moment) loses that connection, not the relay; it
/// and a failed connection upstream are printed, for the test's output.
async fn accept(listener: TcpListener, upstream: String, shared: Arc<Shared>) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(error) => {
                eprintln!("relay: accepting a connection: {error}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // Subscribed before the state is read: a cut from then on, also while it connects,
        // ends it.
        let cut = shared.cuts.subscribe();
        if shared.state.load(Ordering::SeqCst) == DOWN {
            continue;
        }
        let upstream = upstream.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            match TcpStream::connect(&upstream).await {
                Ok(server) => relay(client, server, shared, cut).await,
                Err(error) => eprintln!("relay: connecting to {upstream}: {error}"),
            }
        });
    }
}

/// Copies bytes both ways until either side closes or a partition ends.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    shared: Arc<Shared>,
    mut cut: watch::Receiver<u64>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let requests = {
        let shared = shared.clone();
        async move {
            let mut buffer = vec![0; 64 * 1024];
            loop {
                let n = client_read.read(&mut buffer).await?;
                if n == 0 {
                    return Ok::<_, std::io::Error>(());
                }
                if shared
                    .state
                    .compare_exchange(ARMED, PARTITIONED, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    tokio::spawn(heal(shared.clone()));
                }
                server_write.write_all(&buffer[..n]).await?;
            }
        }
    };
    let answers = async move {
        let mut buffer = vec![0; 64 * 1024];
        loop {
            let n = server_read.read(&mut buffer).await?;
            if n == 0 {
                return Ok::<_, std::io::Error>(());
            }
            if matches!(shared.state.load(Ordering::SeqCst), IDLE | ARMED) {
                client_write.write_all(&buffer[..n]).await?;
            }
        }
    };
    tokio::select! {
        _ = requests => {}
        _ = answers => {}
        _ = cut.changed() => {}
    }
}

/// Ends a partition: cuts every connection after `lost`, then refuses new ones for `down`.
async fn heal(shared: Arc<Shared>) {
    let (lost, down) = *shared.lengths.lock().expect("lengths lock");
    tokio::time::sleep(lost).await;
    shared.state.store(DOWN, Ordering::SeqCst);
    shared.cuts.send_modify(|cut| *cut += 1);
    tokio::time::sleep(down).await;
    shared.state.store(IDLE, Ordering::SeqCst);
    shared.healed.store(true, Ordering::SeqCst);
}
