//! A proxy in front of the test API server that holds back chosen requests or answers.
//!
//! `kubectl proxy` carries plain HTTP to the API server with the kubeconfig's credentials; this
//! proxy sits in front of it and reads each request line, so a test can make one kind of
//! traffic late while the rest flows: the answers of a kind's watches (its events reach the
//! client late, in order), or requests of one method (a write reaches the API server late). A
//! client given [`Delays::kubeconfig`] goes through both.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Which requests a rule holds back, and by how much.
#[derive(Debug, Clone, Default)]
pub struct Rule {
    /// The request's method, as sent (`GET`, `PATCH`).
    pub method: &'static str,
    /// Text the request's path and query must contain, each of them.
    pub contains: Vec<String>,
    /// How long each matching request waits before it goes on to the API server.
    pub requests: Duration,
    /// How long each byte of a matching request's answer waits before it goes on to the client.
    pub answers: Duration,
}

impl Rule {
    fn matches(&self, method: &str, target: &str) -> bool {
        method == self.method && self.contains.iter().all(|c| target.contains(c.as_str()))
    }
}

struct Shared {
    rules: Vec<Rule>,
    /// Requests each rule matched.
    matched: Vec<AtomicUsize>,
}

/// The proxies, listening on loopback; they stop when dropped.
pub struct Delays {
    kubeconfig: PathBuf,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
    _kubectl: (
        tokio::process::Child,
        BufReader<tokio::process::ChildStdout>,
    ),
    _dir: tempfile::TempDir,
}

impl Delays {
    /// Proxies to the API server of `kubeconfig` that hold back what `rules` match (the first
    /// rule that matches a request applies), with a kubeconfig that names them.
    pub async fn start(kubeconfig: &Path, rules: Vec<Rule>) -> Result<Self> {
        let mut kubectl = tokio::process::Command::new(crate::kubectl())
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["proxy", "--port=0", "--address=127.0.0.1"])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting kubectl proxy")?;
        let stdout = kubectl.stdout.take().context("kubectl's output")?;
        // Kept open: a kubectl that writes to a closed pipe ends.
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(30), stdout.read_line(&mut line)).await??;
        let upstream = line
            .trim()
            .rsplit_once(' ')
            .map(|(_, address)| address.to_owned())
            .with_context(|| format!("kubectl proxy said {line:?}"))?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, plain_kubeconfig(&listener.local_addr()?.to_string()))?;
        let matched = rules.iter().map(|_| AtomicUsize::new(0)).collect();
        let shared = Arc::new(Shared { rules, matched });
        let accept = tokio::spawn(accept(listener, upstream, shared.clone()));
        Ok(Self {
            kubeconfig: path,
            shared,
            accept,
            _kubectl: (kubectl, stdout),
            _dir: dir,
        })
    }

    /// A kubeconfig that reaches the API server through the proxies.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// How many requests the rule at `index` has matched so far.
    pub fn matched(&self, index: usize) -> usize {
        self.shared.matched[index].load(Ordering::SeqCst)
    }
}

impl Drop for Delays {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// A kubeconfig naming a plain-HTTP server at `address`, with no credentials.
fn plain_kubeconfig(address: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: http://{address}\n\
         users:\n- name: proxy\n  user: {{}}\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: proxy\n\
         current-context: proxy\n"
    )
}

async fn accept(listener: TcpListener, upstream: String, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let upstream = upstream.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            match TcpStream::connect(&upstream).await {
                Ok(server) => relay(client, server, shared).await,
                Err(error) => eprintln!("delays: connecting to {upstream}: {error}"),
            }
        });
    }
}

/// The method and target of the request line that `bytes` starts with, if it starts one.
fn request_line(bytes: &[u8]) -> Option<(&str, &str)> {
    let line = bytes.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let mut words = line.split(' ');
    let (method, target, version) = (words.next()?, words.next()?, words.next()?);
    version.starts_with("HTTP/").then_some((method, target))
}

/// Copies bytes both ways until either side closes, holding back what the rule of the
/// connection's last request asks.
async fn relay(client: TcpStream, server: TcpStream, shared: Arc<Shared>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // The answer delay of the request in progress on this connection.
    let delay = Arc::new(Mutex::new(Duration::ZERO));
    let requests = {
        let delay = delay.clone();
        async move {
            let mut buffer = vec![0; 64 * 1024];
            loop {
                let n = client_read.read(&mut buffer).await?;
                if n == 0 {
                    return Ok::<_, std::io::Error>(());
                }
                if let Some((method, target)) = request_line(&buffer[..n]) {
                    let rule = shared.rules.iter().position(|r| r.matches(method, target));
                    let held = rule.map(|i| {
                        shared.matched[i].fetch_add(1, Ordering::SeqCst);
                        &shared.rules[i]
                    });
                    *delay.lock().expect("delay lock") = held.map_or(Duration::ZERO, |r| r.answers);
                    if let Some(rule) = held {
                        tokio::time::sleep(rule.requests).await;
                    }
                }
                server_write.write_all(&buffer[..n]).await?;
            }
        }
    };
    let (sender, mut due) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let answers = async move {
        let mut buffer = vec![0; 64 * 1024];
        loop {
            let n = server_read.read(&mut buffer).await?;
            if n == 0 {
                return Ok::<_, std::io::Error>(());
            }
            let at = Instant::now() + *delay.lock().expect("delay lock");
            if sender.send((at, buffer[..n].to_vec())).is_err() {
                return Ok(());
            }
        }
    };
    let delivered = async move {
        while let Some((at, bytes)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            client_write.write_all(&bytes).await?;
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::select! {
        _ = requests => {}
        _ = async { tokio::join!(answers, delivered) } => {}
    }
}
