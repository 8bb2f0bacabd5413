//! Noticing module changes: the folders holding the module files are watched, and bursts of
//! file events are collapsed into one rescan once the folder has been quiet for [`QUIET`].
//!
//! Folders are watched rather than files, so every way a module can change is seen: a file
//! written in place, a file replaced by a rename, and the layout kubelet gives a ConfigMap or
//! Secret volume, where `podset.wasm` is a link to `..data/podset.wasm` and an update swaps the
//! `..data` link to a new timestamped folder in one rename.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

/// How long a folder must stay quiet before a burst of events triggers a rescan.
pub const QUIET: Duration = Duration::from_millis(250);

/// Watches the folders of the modules at `paths`. Each file event sends `()` on the returned
/// channel; the channel closes when the watcher is dropped.
pub fn watch<'a>(
    paths: impl IntoIterator<Item = &'a Path>,
) -> notify::Result<(mpsc::UnboundedReceiver<()>, RecommendedWatcher)> {
    let (sender, receiver) = mpsc::unbounded_channel();
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event) if event.kind.is_access() => {}
            Ok(_) => {
                let _ = sender.send(());
            }
            Err(error) => {
                tracing::warn!(%error, "watching module files failed; rescanning");
                let _ = sender.send(());
            }
        })?;
    for folder in module_folders(paths) {
        watcher.watch(&folder, RecursiveMode::NonRecursive)?;
        tracing::debug!(folder = %folder.display(), "watching for module changes");
    }
    Ok((receiver, watcher))
}

/// Calls `rescan` once after each burst of events on `changes`, when no event has arrived for
/// [`QUIET`]; returns when the channel closes.
pub async fn debounced<F, Fut>(mut changes: mpsc::UnboundedReceiver<()>, mut rescan: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    while changes.recv().await.is_some() {
        loop {
            match tokio::time::timeout(QUIET, changes.recv()).await {
                Ok(Some(())) => continue,
                Ok(None) => return,
                Err(_) => break,
            }
        }
        rescan().await;
    }
}

/// The folders to watch for the modules at `paths`: each module's parent folder.
pub fn module_folders<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = paths
        .into_iter()
        .map(|p| {
            p.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf()
        })
        .collect();
    folders.sort();
    folders.dedup();
    folders
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_events_is_one_rescan() {
        let (sender, receiver) = mpsc::unbounded_channel();
        let rescans = Arc::new(AtomicUsize::new(0));
        let counted = rescans.clone();
        let task = tokio::spawn(debounced(receiver, move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        }));
        for _ in 0..10 {
            sender.send(()).unwrap();
            tokio::time::sleep(QUIET / 4).await;
        }
        tokio::time::sleep(QUIET * 2).await;
        assert_eq!(rescans.load(Ordering::SeqCst), 1);
        sender.send(()).unwrap();
        tokio::time::sleep(QUIET * 2).await;
        assert_eq!(rescans.load(Ordering::SeqCst), 2);
        drop(sender);
        task.await.unwrap();
    }

    #[test]
    fn each_module_folder_is_watched_once() {
        let folders = module_folders(
            ["/m/a.wasm", "/m/b.wasm", "c.wasm", "/n/d.wasm"]
                .iter()
                .map(Path::new),
        );
        // Paths order by component: a root before the current folder.
        assert_eq!(folders, [Path::new("/m"), Path::new("/n"), Path::new(".")]);
    }
}
