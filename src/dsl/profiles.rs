//! The flag-profile matrix: a build step naming several profiles
//! (`step "build" flags="guide harness-default"`) builds every instance once per profile.
//!
//! Each such instance becomes one instance per profile, `<id>@<profile>`, with the profile
//! as its matrix variable [`PROFILE_VAR`]; everything downstream (graph node ids, record
//! paths, cache keys, objects, KAT/time/profile/count/ct steps, reports) then treats
//! instance x profile as its unit without knowing about profiles. With one profile nothing
//! changes: ids, paths and keys stay as they were.

use crate::model::{Instance, StepKind, StepSpec, Submission, PROFILE_VAR};

/// Expands every submission's instances over the build step's profiles when it names more
/// than one, instance-major (`X@guide`, `X@harness-default`, `Y@guide`, ...).
pub(super) fn expand_profiles(steps: &[StepSpec], submissions: &mut [Submission]) {
    let Some(build) = steps.iter().find(|s| s.kind == StepKind::Build) else {
        return;
    };
    let profiles = build.params.flag_profiles();
    if profiles.len() < 2 {
        return;
    }
    for sub in submissions {
        sub.instances = sub
            .instances
            .iter()
            .flat_map(|inst| profiles.iter().map(move |p| with_profile(inst, p)))
            .collect();
    }
}

fn with_profile(inst: &Instance, profile: &str) -> Instance {
    let mut i = inst.clone();
    i.id = format!("{}@{profile}", inst.id);
    i.vars.insert(PROFILE_VAR.to_string(), profile.to_string());
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
        expand_profiles(&c.steps, &mut c.submissions);
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
        expand_profiles(&c.steps, &mut c.submissions);
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
}
