//! Console and VNC sessions (pure): whether one may open ([`admit`]), and whether an open one
//! should end and why ([`should_end`]). One vocabulary of reasons ([`Refusal`], [`End`]) names
//! them in metrics, logs and the WebSocket close frame alike.

use std::time::Duration;

/// The bounds on sessions (settings: [`super::session_args::SessionArgs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Sessions one user (as kube-apiserver names them) may hold open at once.
    pub per_user: usize,
    /// Sessions this replica holds open at once, every user together.
    pub total: usize,
    /// A session with no byte either way for this long ends.
    pub idle: Duration,
    /// A session ends this long after it opened, busy or not.
    pub max_length: Duration,
}

/// The two streams served, KubeVirt's subresources of the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Console,
    Vnc,
}

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::Console, Kind::Vnc];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Console => "console",
            Kind::Vnc => "vnc",
        }
    }

    pub fn parse(subresource: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == subresource)
    }
}

/// Why a session was not opened (answered 429, or 503 while draining).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the operator is shutting down; open the session again (another replica answers)")]
    Draining,
    #[error("this replica holds its maximum of {0} console/VNC sessions")]
    TotalCap(usize),
    #[error("you hold your maximum of {0} console/VNC sessions")]
    UserCap(usize),
}

impl Refusal {
    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Draining => "draining",
            Refusal::TotalCap(_) => "total_cap",
            Refusal::UserCap(_) => "user_cap",
        }
    }
}

/// Whether one more session may open, with `open` held by this replica and `of_user` of them
/// by the user asking.
pub fn admit(limits: &Limits, open: usize, of_user: usize, draining: bool) -> Result<(), Refusal> {
    if draining {
        Err(Refusal::Draining)
    } else if of_user >= limits.per_user {
        Err(Refusal::UserCap(limits.per_user))
    } else if open >= limits.total {
        Err(Refusal::TotalCap(limits.total))
    } else {
        Ok(())
    }
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The user's side closed (or went away).
    ClientClosed,
    /// KubeVirt's side closed (or went away).
    UpstreamClosed,
    /// The VMI is gone, or another took its name.
    VmiGone,
    /// The Machine is gone or being deleted.
    MachineDeleted,
    Idle,
    MaxLength,
    /// The operator is shutting down.
    Draining,
}

impl End {
    pub const ALL: [End; 7] = [
        End::ClientClosed,
        End::UpstreamClosed,
        End::VmiGone,
        End::MachineDeleted,
        End::Idle,
        End::MaxLength,
        End::Draining,
    ];

    /// The `reason` label, and the close frame's reason.
    pub fn as_str(self) -> &'static str {
        match self {
            End::ClientClosed => "client_closed",
            End::UpstreamClosed => "upstream_closed",
            End::VmiGone => "vmi_gone",
            End::MachineDeleted => "machine_deleted",
            End::Idle => "idle_timeout",
            End::MaxLength => "max_length",
            End::Draining => "draining",
        }
    }

    /// The WebSocket close code sent to the user: 1001 (going away) when the operator drains,
    /// else 1000 (normal closure); the reason says which rule ended it.
    pub fn close_code(self) -> u16 {
        match self {
            End::Draining => 1001,
            _ => 1000,
        }
    }
}

/// What was last seen of something a session depends on; `Unknown`: could not be looked at
/// (an API outage does not end a session).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    There,
    /// Gone, being deleted, or replaced by another of the same name.
    Gone,
    Unknown,
}

/// One look at an open session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    /// Since it opened.
    pub age: Duration,
    /// Since the last byte either way.
    pub idle_for: Duration,
    pub machine: Seen,
    pub vmi: Seen,
    pub draining: bool,
}

/// Whether the session should end now, and why (the first rule that holds, in this order).
pub fn should_end(limits: &Limits, seen: &Observed) -> Option<End> {
    if seen.draining {
        Some(End::Draining)
    } else if seen.machine == Seen::Gone {
        Some(End::MachineDeleted)
    } else if seen.vmi == Seen::Gone {
        Some(End::VmiGone)
    } else if seen.age >= limits.max_length {
        Some(End::MaxLength)
    } else if seen.idle_for >= limits.idle {
        Some(End::Idle)
    } else {
        None
    }
}

/// How often an open session's Machine and VMI are looked at (two GETs).
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// How long until the next look: the next check, or sooner when a timeout falls before it.
pub fn next_look(limits: &Limits, age: Duration, idle_for: Duration) -> Duration {
    let to_max = limits.max_length.saturating_sub(age);
    let to_idle = limits.idle.saturating_sub(idle_for);
    CHECK_EVERY.min(to_max).min(to_idle)
}

#[cfg(test)]
mod tests;
