//! File mode: serve a PEM pair from disk (e.g. mounted by cert-manager) and reload it when it
//! changes. Polling the contents is deliberate: Secret volumes change through symlink swaps that
//! inotify on the file itself misses, and one small read a second costs nothing.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::keypair::{KeyPairError, certified_key};
use super::resolver::CertSlot;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{cert} / {key}")]
    Parse {
        cert: PathBuf,
        key: PathBuf,
        source: KeyPairError,
    },
}

#[derive(Clone, Debug)]
pub struct PemFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl PemFiles {
    async fn read(&self) -> Result<(Vec<u8>, Vec<u8>), FileError> {
        let read = |path: PathBuf| async move {
            tokio::fs::read(&path)
                .await
                .map_err(|source| FileError::Read { path, source })
        };
        Ok((
            read(self.cert.clone()).await?,
            read(self.key.clone()).await?,
        ))
    }

    /// Loads the pair into `slot` once; start-up fails on an unreadable or mismatched pair.
    pub async fn load_into(&self, slot: &CertSlot) -> Result<(Vec<u8>, Vec<u8>), FileError> {
        let (cert, key) = self.read().await?;
        let certified = certified_key(&cert, &key).map_err(|source| FileError::Parse {
            cert: self.cert.clone(),
            key: self.key.clone(),
            source,
        })?;
        slot.store(certified);
        Ok((cert, key))
    }

    /// Reloads on every change of either file; a broken pair is reported and the last good one
    /// keeps serving. Runs until the task is dropped.
    pub async fn watch(self, slot: Arc<CertSlot>, mut last: (Vec<u8>, Vec<u8>), every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reported: Option<(Vec<u8>, Vec<u8>)> = None;
        loop {
            tick.tick().await;
            let current = match self.read().await {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "serving certificate files unreadable; keeping the current certificate");
                    continue;
                }
            };
            if current == last || reported.as_ref() == Some(&current) {
                continue;
            }
            match certified_key(&current.0, &current.1) {
                Ok(certified) => {
                    slot.store(certified);
                    tracing::info!(cert = %self.cert.display(), "reloaded serving certificate");
                    last = current;
                    reported = None;
                }
                Err(e) => {
                    // Files are often written one after the other: report once, retry next tick.
                    tracing::warn!(error = %e, "serving certificate files changed but do not form a valid pair yet; keeping the current certificate");
                    reported = Some(current);
                }
            }
        }
    }
}
