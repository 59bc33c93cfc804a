//! Running a campaign: cache keys, the scheduler, and the steps themselves.

pub mod exec;
