//! The build matrix: a system naming several compilers (`compilers "gcc" "clang-16"`) and a
//! build step naming several flag profiles (`step "build" flags="guide harness-default"`)
//! build every instance once per (compiler x profile) cell.
//!
//! Each cell of an instance becomes one instance of the same submission, `<id>@<compiler>`,
//! `<id>@<profile>` or `<id>@<compiler>@<profile>` (the compiler by its file name), with the
//! compiler's command as its matrix variable [`COMPILER_VAR`] and the profile as
//! [`PROFILE_VAR`]; everything downstream (graph node ids, record paths, cache keys, objects,
//! KAT/time/profile/count/ct steps) then treats a cell as its unit, and the reports group
//! the cells of one implementation by [`crate::model::Instance::manifest_id`]. With one
//! compiler and one profile nothing changes: ids, paths and keys stay as they were.

use crate::model::{
    compiler_label, Instance, StepKind, StepSpec, Submission, System, COMPILER_VAR, PROFILE_VAR,
};

/// Expands every submission's instances over the cells when there is more than one,
/// instance-major, then compiler, then profile (`X@gcc@guide`, `X@gcc@O2`, `X@clang-16@guide`,
/// ...).
pub(super) fn expand_cells(system: &System, steps: &[StepSpec], submissions: &mut [Submission]) {
    let Some(build) = steps.iter().find(|s| s.kind == StepKind::Build) else {
        return;
    };
    let profiles = build.params.flag_profiles();
    let compilers = system.compilers();
    let many_profiles = profiles.len() > 1;
    let many_compilers = compilers.len() > 1;
    if !many_profiles && !many_compilers {
        return;
    }
    let cells: Vec<(Option<&str>, Option<&str>)> = compilers
        .iter()
        .flat_map(|c| {
            profiles
                .iter()
                .map(move |p| (many_compilers.then_some(*c), many_profiles.then_some(*p)))
        })
        .collect();
    for sub in submissions {
        sub.instances = sub
            .instances
            .iter()
            .flat_map(|inst| cells.iter().map(move |&(c, p)| with_cell(inst, c, p)))
            .collect();
    }
}

fn with_cell(inst: &Instance, compiler: Option<&str>, profile: Option<&str>) -> Instance {
    let mut i = inst.clone();
    if let Some(c) = compiler {
        i.id = format!("{}@{}", i.id, compiler_label(c));
        i.vars.insert(COMPILER_VAR.to_string(), c.to_string());
    }
    if let Some(p) = profile {
        i.id = format!("{}@{p}", i.id);
        i.vars.insert(PROFILE_VAR.to_string(), p.to_string());
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::campaign;

    #[test]
    fn one_profile_changes_nothing_two_profiles_double_the_instances() {
        let mut c = campaign(2);
        let before: Vec<String> = c.submissions[0]
            .instances
            .iter()
            .map(|i| i.id.clone())
            .collect();
        expand_cells(&c.system, &c.steps, &mut c.submissions);
        let same: Vec<String> = c.submissions[0]
            .instances
            .iter()
            .map(|i| i.id.clone())
            .collect();
        assert_eq!(before, same);
        assert!(c.submissions[0].instances[0].profile().is_none());

        let build = c
            .steps
            .iter_mut()
            .find(|s| s.kind == StepKind::Build)
            .unwrap();
        build.params.flags = Some("guide O2".into());
        expand_cells(&c.system, &c.steps, &mut c.submissions);
        let ids: Vec<&str> = c.submissions[0]
            .instances
            .iter()
            .map(|i| i.id.as_str())
            .collect();
        assert_eq!(ids, ["K-0@guide", "K-0@O2", "K-1@guide", "K-1@O2"]);
        let i = &c.submissions[0].instances[1];
        assert_eq!(i.profile(), Some("O2"));
        assert_eq!(i.manifest_id(), "K-0");
    }

    #[test]
    fn compilers_times_profiles() {
        let mut c = campaign(1);
        c.system.compilers = vec!["gcc".into(), "/usr/bin/clang-16".into()];
        expand_cells(&c.system, &c.steps, &mut c.submissions);
        let ids: Vec<&str> = c.submissions[0]
            .instances
            .iter()
            .map(|i| i.id.as_str())
            .collect();
        assert_eq!(ids, ["K-0@gcc", "K-0@clang-16"]);
        assert_eq!(
            c.submissions[0].instances[1].compiler(),
            Some("/usr/bin/clang-16")
        );

        let mut c = campaign(1);
        c.system.compilers = vec!["gcc".into(), "clang-16".into()];
        c.steps[1].params.flags = Some("guide O2".into());
        expand_cells(&c.system, &c.steps, &mut c.submissions);
        let ids: Vec<&str> = c.submissions[0]
            .instances
            .iter()
            .map(|i| i.id.as_str())
            .collect();
        assert_eq!(
            ids,
            [
                "K-0@gcc@guide",
                "K-0@gcc@O2",
                "K-0@clang-16@guide",
                "K-0@clang-16@O2"
            ]
        );
        let i = &c.submissions[0].instances[3];
        assert_eq!((i.compiler(), i.profile()), (Some("clang-16"), Some("O2")));
        assert_eq!(i.manifest_id(), "K-0");
    }
}
