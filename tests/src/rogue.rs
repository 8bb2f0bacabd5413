//! A hostile registry on loopback: it speaks just enough of the distribution protocol to be
//! pulled from, and answers with bodies that never end or that arrive a byte at a time, as a
//! tenant's registry might to exhaust the host that pulls from it.
//!
//! Under repository `rogue` it serves these tags:
//! - `endless`: a manifest whose body never ends (chunked, as fast as the reader takes it);
//! - `endless-config`: a valid manifest whose config blob never ends;
//! - `drip`: a manifest whose body arrives one byte a second, forever.
//!
//! Every request is counted by its first line.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// The digest the `endless-config` manifest names as its config.
const CONFIG_DIGEST: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000001";
/// The digest it names as its layer.
const LAYER_DIGEST: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000002";

/// A running rogue registry; dropping it stops it.
pub struct Rogue {
    address: String,
    requests: Arc<Mutex<BTreeMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Rogue {
    /// Starts one on a free loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        let requests: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
        let counted = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, counted.clone()));
            }
        });
        Ok(Self {
            address,
            requests,
            task,
        })
    }

    /// `127.0.0.1:PORT/rogue:<tag>`.
    pub fn reference(&self, tag: &str) -> String {
        format!("{}/rogue:{tag}", self.address)
    }

    /// How many requests had `line` (such as `GET /v2/rogue/manifests/endless`) as their first
    /// line, without the protocol.
    pub fn requests(&self, line: &str) -> usize {
        let requests = self.requests.lock().expect("requests lock");
        requests.get(line).copied().unwrap_or(0)
    }
}

impl Drop for Rogue {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers the requests of one connection.
async fn serve(stream: TcpStream, requests: Arc<Mutex<BTreeMap<String, usize>>>) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut first = String::new();
        if reader.read_line(&mut first).await.unwrap_or(0) == 0 {
            return;
        }
        loop {
            let mut header = String::new();
            match reader.read_line(&mut header).await {
                Ok(0) | Err(_) => return,
                Ok(_) if header == "\r\n" => break,
                Ok(_) => {}
            }
        }
        let line = first
            .trim_end()
            .rsplit_once(' ')
            .map_or(first.trim_end(), |(l, _)| l)
            .to_owned();
        *requests
            .lock()
            .expect("requests lock")
            .entry(line.clone())
            .or_default() += 1;
        let stream = reader.get_mut();
        let (method, path) = line.split_once(' ').unwrap_or(("", ""));
        let keep_going = match path {
            "/v2/" => answer(stream, "application/json", b"{}").await,
            "/v2/rogue/manifests/endless" | "/v2/rogue/manifests/drip" if method == "HEAD" => {
                answer(stream, "application/vnd.oci.image.manifest.v1+json", b"").await
            }
            "/v2/rogue/manifests/endless" => endless(stream, None).await,
            "/v2/rogue/manifests/drip" => endless(stream, Some(Duration::from_secs(1))).await,
            "/v2/rogue/manifests/endless-config" => {
                answer(
                    stream,
                    "application/vnd.oci.image.manifest.v1+json",
                    manifest().as_bytes(),
                )
                .await
            }
            p if p == format!("/v2/rogue/blobs/{CONFIG_DIGEST}") => endless(stream, None).await,
            _ => not_found(stream).await,
        };
        if !keep_going {
            return;
        }
    }
}

/// A manifest of the CNCF layout whose config is [`CONFIG_DIGEST`].
fn manifest() -> String {
    serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.wasm.config.v0+json",
            "digest": CONFIG_DIGEST, "size": 200,
        },
        "layers": [{
            "mediaType": "application/wasm", "digest": LAYER_DIGEST, "size": 1000,
        }],
    })
    .to_string()
}

async fn answer(stream: &mut TcpStream, media_type: &str, body: &[u8]) -> bool {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {media_type}\r\nContent-Length: {}\r\n\
         Docker-Distribution-API-Version: registry/2.0\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.is_ok() && stream.write_all(body).await.is_ok()
}

async fn not_found(stream: &mut TcpStream) -> bool {
    let body = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#;
    let head = format!(
        "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.is_ok() && stream.write_all(body).await.is_ok()
}

/// A chunked body that never ends: 64 KiB chunks as fast as they are read, or one byte each
/// `pause`. Ends the connection when the reader goes.
async fn endless(stream: &mut TcpStream, pause: Option<Duration>) -> bool {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\n\
                Transfer-Encoding: chunked\r\n\r\n";
    if stream.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    let chunk = match pause {
        Some(_) => b"1\r\n{\r\n".to_vec(),
        None => {
            let mut chunk = b"10000\r\n".to_vec();
            chunk.extend(std::iter::repeat_n(b' ', 0x10000));
            chunk.extend(b"\r\n");
            chunk
        }
    };
    loop {
        if stream.write_all(&chunk).await.is_err() {
            return false;
        }
        if let Some(pause) = pause {
            tokio::time::sleep(pause).await;
        }
    }
}
