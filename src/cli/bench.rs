//! `ngcc-pipe bench`: benchmarks of ngcc-pipe itself (the work is in [`crate::bench`]).

use std::path::Path;

use super::FidelityArgs;
use crate::error::Error;
use crate::run::ctx::Purpose;
use crate::run::Ctx;

/// `bench plan`: parse + expand + plan a generated campaign.
pub(super) fn plan(instances: usize, repeats: usize) -> Result<(), Error> {
    super::print(&crate::bench::plan(instances, repeats)?)
}

/// `bench fidelity`: kem-runner against a static reference on one built instance.
pub(super) fn fidelity(args: FidelityArgs, outputs: Option<&Path>) -> Result<(), Error> {
    let FidelityArgs {
        pipeline,
        instance,
        rounds,
        batch,
        no_wait,
    } = args;
    let c = super::load(&pipeline, outputs)?;
    let ctx = Ctx::new(c, Purpose::Run)?;
    let rows = crate::bench::fidelity(&ctx, &instance, rounds, batch, no_wait)?;
    super::print(&crate::bench::fidelity_table(&instance, &rows))
}
