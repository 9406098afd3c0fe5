//! Extra kube-apiserver flags for a dedicated control plane, with the files they name written
//! into the control plane's own directory before kube-apiserver starts (so they go with it).
//! `{dir}` in a file's contents or in a flag stands for that directory. The shared control
//! planes never have any.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{Context, Result};

/// Flags and files for [`super::ControlPlane::start_with`].
#[derive(Clone, Debug, Default)]
pub struct ApiserverExtras {
    files: Vec<(String, String)>,
    args: Vec<String>,
}

const DIR: &str = "{dir}";

impl ApiserverExtras {
    pub fn new() -> Self {
        Self::default()
    }

    /// A file `name` (a plain file name) in the control plane's directory, owner-only (0600: it
    /// may hold keys), with `contents`.
    pub fn file(mut self, name: &str, contents: &str) -> Self {
        self.files.push((name.to_owned(), contents.to_owned()));
        self
    }

    /// A kube-apiserver flag, e.g. `--admission-control-config-file={dir}/admission.yaml`.
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }

    /// Writes the files into `dir`.
    pub(super) fn write(&self, dir: &Path) -> Result<()> {
        for (name, contents) in &self.files {
            let contents = contents.replace(DIR, &dir.display().to_string());
            super::pki::write_private(dir, name, &contents)
                .with_context(|| format!("writing the extra file {name}"))?;
        }
        Ok(())
    }

    /// The flags, with `{dir}` replaced by `dir`.
    pub(super) fn args(&self, dir: &Path) -> Vec<OsString> {
        let dir = dir.display().to_string();
        self.args
            .iter()
            .map(|a| OsString::from(a.replace(DIR, &dir)))
            .collect()
    }
}
