//! How a step or a session member ended when it did not succeed: status and reason.

use crate::record::Status;

/// Why a step stopped before producing data: failed or timed out, with the reason.
#[derive(Clone)]
pub struct Stop {
    pub status: Status,
    pub reason: String,
}

impl Stop {
    pub fn failed(reason: impl Into<String>) -> Stop {
        Stop {
            status: Status::Failed,
            reason: reason.into(),
        }
    }

    pub fn timed_out(reason: impl Into<String>) -> Stop {
        Stop {
            status: Status::TimedOut,
            reason: reason.into(),
        }
    }
}
