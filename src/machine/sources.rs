//! Rules for disk and CD-ROM sources (CDI DataVolume sources) and for CD-ROMs: on a spec, and
//! between the old and new spec of an update.

use std::cmp::Ordering;
use std::collections::HashSet;

use crate::api::machine::Disk;
use crate::api::names::CLOUD_INIT_VOLUME;
use crate::api::source::{
    Cdrom, DiskSource, HttpSource, LocalRef, MAX_URL_LEN, ObjectRef, PULL_METHODS, RegistrySource,
    SOURCE_KINDS,
};

use super::field_error::{FieldError, FieldPath};
use super::names::{dns1123_label, dns1123_subdomain};
use super::sizes::claim_size_problem;

const HTTP_SCHEMES: &[&str] = &["http://", "https://"];
const REGISTRY_SCHEMES: &[&str] = &["docker://", "oci-archive://"];

/// Why a source may not change; said on every refusal so users know to make a new disk.
const NEVER_REIMPORTS: &str = "CDI imports or clones a source once and never re-imports, so a \
     changed source would not reach the disk; add a new disk or CD-ROM (or recreate the Machine) instead";

/// Problems with one source: exactly one kind, URL schemes, names and namespaces.
pub fn check_source(path: &FieldPath, source: &DiskSource) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let kinds = source.kinds();
    match kinds.as_slice() {
        [] => errors.push(FieldError::required(
            path,
            format!("exactly one of {} must be set", SOURCE_KINDS.join(", ")),
        )),
        [_] => {}
        many => errors.push(FieldError::forbidden(
            path,
            format!(
                "exactly one of {} may be set, found {}",
                SOURCE_KINDS.join(", "),
                many.join(" and ")
            ),
        )),
    }
    if let Some(http) = &source.http {
        check_http(&mut errors, &path.child("http"), http);
    }
    if let Some(registry) = &source.registry {
        check_registry(&mut errors, &path.child("registry"), registry);
    }
    if let Some(pvc) = &source.pvc {
        check_object_ref(
            &mut errors,
            &path.child("pvc"),
            pvc,
            "the name of the PersistentVolumeClaim to clone",
        );
    }
    if let Some(ds) = &source.data_source {
        check_object_ref(
            &mut errors,
            &path.child("dataSource"),
            ds,
            "the name of the CDI DataSource to clone",
        );
    }
    if let Some(snap) = &source.snapshot {
        check_object_ref(
            &mut errors,
            &path.child("snapshot"),
            snap,
            "the name of the VolumeSnapshot to clone",
        );
    }
    errors
}

fn check_http(errors: &mut Vec<FieldError>, path: &FieldPath, http: &HttpSource) {
    check_url(errors, &path.child("url"), &http.url, HTTP_SCHEMES);
    if let Some(r) = &http.secret_ref {
        check_local_ref(errors, &path.child("secretRef"), r, "Secret");
    }
    if let Some(cm) = &http.cert_config_map {
        let p = path.child("certConfigMap");
        errors.extend(
            dns1123_subdomain(cm)
                .into_iter()
                .map(|m| FieldError::invalid(&p, cm.as_str(), m)),
        );
    }
}

fn check_registry(errors: &mut Vec<FieldError>, path: &FieldPath, registry: &RegistrySource) {
    check_url(errors, &path.child("url"), &registry.url, REGISTRY_SCHEMES);
    if let Some(r) = &registry.secret_ref {
        check_local_ref(errors, &path.child("secretRef"), r, "Secret");
    }
    if let Some(m) = &registry.pull_method
        && !PULL_METHODS.contains(&m.as_str())
    {
        errors.push(FieldError::not_supported(
            &path.child("pullMethod"),
            m.as_str(),
            PULL_METHODS,
        ));
    }
}

fn check_url(errors: &mut Vec<FieldError>, path: &FieldPath, url: &str, schemes: &[&str]) {
    if url.is_empty() {
        errors.push(FieldError::required(
            path,
            format!("a URL starting with {}", schemes.join(" or ")),
        ));
        return;
    }
    if url.len() > MAX_URL_LEN {
        errors.push(FieldError::too_long(path, MAX_URL_LEN));
        return;
    }
    let rest = schemes.iter().find_map(|s| {
        url.get(..s.len())
            .filter(|head| head.eq_ignore_ascii_case(s))
            .map(|_| &url[s.len()..])
    });
    match rest {
        None => errors.push(FieldError::invalid(
            path,
            url,
            format!("must start with {}", schemes.join(" or ")),
        )),
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            errors.push(FieldError::invalid(path, url, "must name a host"));
        }
        Some(_) if url.chars().any(|c| c.is_whitespace() || c.is_control()) => {
            errors.push(FieldError::invalid(
                path,
                url,
                "must not contain whitespace or control characters",
            ));
        }
        Some(_) => {}
    }
}

fn check_local_ref(errors: &mut Vec<FieldError>, path: &FieldPath, r: &LocalRef, kind: &str) {
    let p = path.child("name");
    if r.name.is_empty() {
        errors.push(FieldError::required(
            &p,
            format!("the name of a {kind} in the Machine's namespace"),
        ));
    } else {
        errors.extend(
            dns1123_subdomain(&r.name)
                .into_iter()
                .map(|m| FieldError::invalid(&p, r.name.as_str(), m)),
        );
    }
}

fn check_object_ref(errors: &mut Vec<FieldError>, path: &FieldPath, r: &ObjectRef, what: &str) {
    let p = path.child("name");
    if r.name.is_empty() {
        errors.push(FieldError::required(&p, what));
    } else {
        errors.extend(
            dns1123_subdomain(&r.name)
                .into_iter()
                .map(|m| FieldError::invalid(&p, r.name.as_str(), m)),
        );
    }
    if let Some(ns) = &r.namespace {
        let p = path.child("namespace");
        errors.extend(
            dns1123_label(ns)
                .into_iter()
                .map(|m| FieldError::invalid(&p, ns.as_str(), m)),
        );
    }
}

/// CD-ROM names (labels, unique, not the cloud-init volume's, and not a disk's name: disks and
/// CD-ROMs both become `<machine>-<name>` claims) and sources.
/// `is_disk` says whether the Machine (with its template) has a disk of that name.
pub fn check_cdroms(
    path: &FieldPath,
    cdroms: &[Cdrom],
    is_disk: &dyn Fn(&str) -> bool,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, cdrom) in cdroms.iter().enumerate() {
        let p = path.index(i);
        let name_path = p.child("name");
        if cdrom.name.is_empty() {
            errors.push(FieldError::required(&name_path, ""));
        } else {
            errors.extend(
                dns1123_label(&cdrom.name)
                    .into_iter()
                    .map(|m| FieldError::invalid(&name_path, cdrom.name.as_str(), m)),
            );
            // Like a disk: the VM would get two volumes of this name, which KubeVirt refuses.
            if cdrom.name == CLOUD_INIT_VOLUME {
                errors.push(FieldError::invalid(
                    &name_path,
                    cdrom.name.as_str(),
                    "is reserved for the cloud-init volume",
                ));
            }
            if !seen.insert(&cdrom.name) {
                errors.push(FieldError::duplicate(&name_path, cdrom.name.as_str()));
            } else if is_disk(&cdrom.name) {
                errors.push(FieldError::invalid(
                    &name_path,
                    cdrom.name.as_str(),
                    format!(
                        "a disk is already named {:?}; disks and CD-ROMs share the claim names <machine>-<name>",
                        cdrom.name
                    ),
                ));
            }
        }
        if let Some(size) = &cdrom.size {
            let size_path = p.child("size");
            match size.parse() {
                Err(e) => errors.push(FieldError::invalid(
                    &size_path,
                    size.as_str(),
                    e.to_string(),
                )),
                // The same rule as a disk's size: a CD-ROM's DataVolume is a claim too.
                Ok(a) => {
                    if let Some(problem) = claim_size_problem(a) {
                        errors.push(FieldError::invalid(&size_path, size.as_str(), problem));
                    }
                }
            }
        }
        errors.extend(check_source(&p.child("source"), &cdrom.source));
    }
    errors
}

/// A disk's source may not be added, changed or removed once the disk exists.
pub fn disk_source_update(path: &FieldPath, old: &Disk, new: &Disk) -> Option<FieldError> {
    (old.source != new.source).then(|| immutable(&path.child("source"), "disk", &old.name))
}

/// CD-ROMs may come and go, but one that stays keeps its source and never shrinks.
pub fn cdrom_updates(path: &FieldPath, old: &[Cdrom], new: &[Cdrom]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, n) in new.iter().enumerate() {
        let Some(o) = old.iter().find(|o| o.name == n.name) else {
            continue;
        };
        let p = path.index(i);
        if o.source != n.source {
            errors.push(immutable(&p.child("source"), "CD-ROM", &n.name));
        }
        let shrinks = match (&o.size, &n.size) {
            (Some(old_size), Some(new_size)) => {
                old_size.compare(new_size) == Some(Ordering::Greater)
            }
            (Some(_), None) => true,
            _ => false,
        };
        if shrinks {
            errors.push(FieldError::forbidden(
                &p.child("size"),
                format!(
                    "CD-ROM {:?} may not shrink from {} to {}; claims can only grow",
                    n.name,
                    o.size.as_ref().map(|q| q.as_str()).unwrap_or_default(),
                    n.size.as_ref().map_or("its default", |q| q.as_str())
                ),
            ));
        }
    }
    errors
}

fn immutable(path: &FieldPath, what: &str, name: &str) -> FieldError {
    FieldError::forbidden(
        path,
        format!("the source of {what} {name:?} is immutable: {NEVER_REIMPORTS}"),
    )
}

#[cfg(test)]
mod tests;
