//! Sections 5 and 6: resource consumption (memory) and transmission/storage sizes.

use super::*;

pub(super) fn resources(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "5. Resource consumption");
    executable_stacks(doc, sub);
    if let Some(why) = emulated(sub) {
        doc.p(format!("Not measured: {why}."));
        return;
    }
    let any = sub
        .instances
        .iter()
        .any(|i| i.ops(StepKind::Time).any(|(op, _)| i.time_ok(op).is_some()));
    if let Some(line) = did_not_run(view, StepKind::Time, any, "no memory figures") {
        doc.p(line);
        return;
    }
    if !any {
        doc.p("No operation was run successfully: no memory figures.");
        return;
    }
    doc.p(
        "Static memory is approximated by the library's loadable ELF segments (sum of PT_LOAD \
         sizes); baseline RSS is the process's VmRSS after loading the object and allocating \
         buffers, peak RSS its high-water mark (VmHWM) after the operation loop, both including \
         the runner and libc, so they are upper-bound proxies rather than isolated algorithm \
         memory. Stack is the bytes of a painted thread stack that one call touched.",
    );
    let mut t = Table::new(&[
        "instance",
        "operation",
        "static: ELF image (bytes)",
        "baseline RSS",
        "peak RSS",
        "stack (bytes)",
    ]);
    for inst in listed(sub) {
        let stat = results::static_bytes(inst);
        for (op, _) in inst.ops(StepKind::Time) {
            let Some(td) = inst.time_ok(op) else {
                continue;
            };
            let m = &td.output.memory;
            t.row(vec![
                code(&inst.id),
                op.name().to_string(),
                fmt::opt_int(td.static_bytes.or(stat)),
                fmt::kib(m.baseline_rss_kib),
                fmt::kib(m.peak_rss_kib),
                fmt::opt_int(m.stack_bytes),
            ]);
        }
    }
    doc.table(t);
}

/// The libraries that ask for an executable stack (the linker's warning, otherwise only in
/// the build log), with the sources that cause it.
fn executable_stacks(doc: &mut Doc, sub: &SubmissionView) {
    let mut items = Vec::new();
    for inst in listed(sub) {
        let Some(files) = inst
            .record(StepKind::Build)
            .and_then(view::build_data)
            .and_then(|b| b.executable_stack.as_ref())
        else {
            continue;
        };
        let files: Vec<String> = files
            .iter()
            .map(|f| code(&f.display().to_string()))
            .collect();
        items.push(format!(
            "{}: {}",
            code(&inst.id),
            if files.is_empty() {
                "no compiled source lacks the note (a linked library asks for it)".to_string()
            } else {
                format!("{} without `.note.GNU-stack`", files.join(", "))
            }
        ));
    }
    if items.is_empty() {
        return;
    }
    doc.p(
        "⚠ These libraries ask for an executable stack: an object linked into them (an \
         assembly file, as a rule) carries no `.note.GNU-stack` section, so the linker marks \
         the stack executable (its warning is in the build log) and so does any process that \
         loads the library. The figures are not affected; C libraries from glibc 2.41 on \
         refuse to load such a library with `dlopen`. The fix is one line in each assembly \
         file: `.section .note.GNU-stack,\"\",@progbits`.",
    );
    doc.list(items);
}

pub(super) fn sizes(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "6. Transmission and storage overhead");
    let any_sizes = sub
        .instances
        .iter()
        .any(|i| i.record(StepKind::Sizes).is_some());
    let any_build = sub.instances.iter().any(|i| {
        i.record(StepKind::Build)
            .and_then(view::build_data)
            .is_some()
    });
    if let Some(line) = did_not_run(view, StepKind::Sizes, any_sizes || any_build, "no sizes") {
        doc.p(line);
        return;
    }
    if any_sizes {
        doc.p(
            "Public-key and ciphertext sizes follow the submission's size catalog where it \
             gives them; secret-key and shared-secret lengths are the api.h figures. See the \
             size audit for disagreements.",
        );
    } else {
        doc.p("No `sizes` record: the figures below are the api.h sizes recorded by the build.");
    }
    let mut t = Table::new(&[
        "instance",
        "public key",
        "secret key",
        "ciphertext",
        "shared secret",
    ]);
    for inst in listed(sub) {
        let [pk, sk, ct, ss] = results::shown_sizes(inst);
        if [pk, sk, ct, ss].iter().all(Option::is_none) {
            continue;
        }
        t.row(vec![
            code(&inst.id),
            fmt::opt_int(pk),
            fmt::opt_int(sk),
            fmt::opt_int(ct),
            fmt::opt_int(ss),
        ]);
    }
    doc.table(t);
    if any_sizes {
        let audit: Vec<String> = sub
            .instances
            .iter()
            .filter_map(|i| {
                i.record(StepKind::Sizes)
                    .and_then(view::sizes_data)
                    .map(|d| (i, d))
            })
            .flat_map(|(i, d)| d.audit.iter().map(move |a| format!("{}: {a}", code(&i.id))))
            .collect();
        if audit.is_empty() {
            doc.p("Size audit: catalog, api.h and KAT lengths agree for every instance.");
        } else {
            doc.p("Size audit:");
            doc.list(audit);
        }
    }
}
