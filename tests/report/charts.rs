//! Chart geometry, the index's status block and category comparison, the charts' values.

use super::*;

// ---------------------------------------------------------------- chart geometry

/// The value of attribute `name` in one tag.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let i = tag.find(&key)? + key.len();
    Some(&tag[i..i + tag[i..].find('"')?])
}

/// Axis-aligned box of every `<text>` of one `<svg>`: width from the character count and
/// font size (0.6 em a glyph), height one em, anchored and rotated as the attributes say.
fn text_boxes(svg: &str) -> Vec<(String, [f64; 4])> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find("<text ") {
        let tag_end = i + rest[i..].find('>').unwrap();
        let tag = &rest[i..tag_end];
        let close = tag_end + rest[tag_end..].find("</text>").unwrap();
        let text = rest[tag_end + 1..close]
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'");
        rest = &rest[close..];
        let num = |n: &str| attr(tag, n).unwrap_or_else(|| panic!("no {n} in {tag}"));
        let (x, y): (f64, f64) = (num("x").parse().unwrap(), num("y").parse().unwrap());
        let fs: f64 = num("font-size").parse().unwrap();
        let w = text.chars().count() as f64 * fs * 0.6;
        let x0 = match attr(tag, "text-anchor") {
            Some("middle") => x - w / 2.0,
            Some("end") => x - w,
            _ => x,
        };
        let corners = [
            (x0, y - 0.8 * fs),
            (x0 + w, y - 0.8 * fs),
            (x0, y + 0.2 * fs),
            (x0 + w, y + 0.2 * fs),
        ];
        let corners: Vec<(f64, f64)> = match attr(tag, "transform") {
            Some(t) => {
                let v: Vec<f64> = t
                    .trim_start_matches("rotate(")
                    .trim_end_matches(')')
                    .split_whitespace()
                    .map(|n| n.parse().unwrap())
                    .collect();
                let (a, cx, cy) = (v[0].to_radians(), v[1], v[2]);
                corners
                    .iter()
                    .map(|(px, py)| {
                        let (dx, dy) = (px - cx, py - cy);
                        (
                            cx + dx * a.cos() - dy * a.sin(),
                            cy + dx * a.sin() + dy * a.cos(),
                        )
                    })
                    .collect()
            }
            None => corners.to_vec(),
        };
        let xs = corners.iter().map(|c| c.0);
        let ys = corners.iter().map(|c| c.1);
        out.push((
            text,
            [
                xs.clone().fold(f64::INFINITY, f64::min),
                ys.clone().fold(f64::INFINITY, f64::min),
                xs.fold(f64::NEG_INFINITY, f64::max),
                ys.fold(f64::NEG_INFINITY, f64::max),
            ],
        ));
    }
    out
}

#[test]
fn chart_labels_stay_inside_and_do_not_overlap() {
    let view = x86_view();
    let files = report::render_campaign(&view);
    let index = file(&files, "site/index.html");
    let mut charts = 0;
    for part in index.split("<svg ").skip(1) {
        let svg = &part[..part.find("</svg>").unwrap()];
        let vb: Vec<f64> = attr(&format!(" {svg}"), "viewBox")
            .unwrap()
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        let boxes = text_boxes(svg);
        assert!(!boxes.is_empty());
        for (t, b) in &boxes {
            assert!(
                b[0] >= vb[0] && b[1] >= vb[1] && b[2] <= vb[0] + vb[2] && b[3] <= vb[1] + vb[3],
                "`{t}` {b:?} outside the viewBox {vb:?}"
            );
        }
        for (i, (t, a)) in boxes.iter().enumerate() {
            for (u, b) in &boxes[i + 1..] {
                assert!(
                    !report::svg::overlaps(a, b),
                    "`{t}` {a:?} overlaps `{u}` {b:?}"
                );
            }
        }
        charts += 1;
    }
    // this system's two charts and the other system's cycles chart
    assert!(charts >= 2, "{charts} charts");
    assert!(index.contains("NIST category 1") && index.contains("error bars"));
}

// ---------------------------------------------------------------- issue #27 items 3-6

/// Rewrite one record of a copied fixture folder.
fn patch(out: &Path, rel: &str, f: impl FnOnce(&mut StepRecord)) {
    let path = out.join(rel);
    let mut r: StepRecord = record::read_json(&path).unwrap().unwrap();
    f(&mut r);
    record::write_json(&path, &r).unwrap();
}

/// Issue #27 item 3: the status block names what was unsupported (and why), what timed
/// out, which KAT was not checked (apart from the failures), every timing that missed its
/// precision target with the precision reached, and the profile's cross-check warning.
#[test]
fn index_status_block_names_everything_that_is_not_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x86_1");
    copy_tree(&Path::new(FIXTURES).join("x86_1"), &out);
    let lacks = "needs avx2: this CPU lacks it";
    let mut unsupported = 0;
    for dir in ["records/ml-kem", "profile/ml-kem"] {
        for f in walk(&out.join(dir)) {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("ML-KEM-1024-clean__") {
                patch(&out, &format!("{dir}/{name}"), |r| {
                    r.status = Status::Unsupported;
                    r.reason = Some(lacks.into());
                    r.data = None;
                });
                unsupported += 1;
            }
        }
    }
    patch(&out, "records/ml-kem/ML-KEM-768-clean__survey.json", |r| {
        r.status = Status::TimedOut;
        r.reason = Some("killed after 30m".into());
    });
    let warning = "wrapped total per operation differs from the timed cycles by +48.3% (> 10%): \
                   shares may not describe the timed code";
    patch(&out, "profile/ml-kem/ML-KEM-512-clean__keygen.json", |r| {
        r.reason = Some(warning.into());
        if let Some(StepData::Profile(p)) = r.data.as_mut() {
            p.wrapped_over_timed = Some(1.483);
        }
    });
    // dec of ML-KEM-512-clean in rounds that stopped at ±1.9% against a 1% target
    patch(&out, "records/ml-kem/ML-KEM-512-clean__dec.json", |r| {
        let Some(StepData::Time(td)) = r.data.as_mut() else {
            panic!("fixture is not a timing record");
        };
        let est = serde_json::json!({"median": 77_410.0, "ci_low": 76_000.0, "ci_high": 78_942.0});
        td.rounds = Some(
            serde_json::from_value(serde_json::json!({
                "session": "s", "seed": 1, "members": 10, "positions": vec![0; 5],
                "interference": vec![Vec::<String>::new(); 5],
                "clean_only": true, "estimate": est, "precision": 0.01, "reached": false,
                "stopped": "budget", "budget_s": 1.0,
            }))
            .unwrap(),
        );
        td.summary.median_cycles = Some(77_410.0);
        td.summary.ci_low_cycles = Some(76_000.0);
        td.summary.ci_high_cycles = Some(78_942.0);
    });
    let view = CampaignView::load(&x86_campaign(), &out).unwrap();
    let files = report::render_campaign(&view);
    let md = file(&files, "reports/index.md");
    let status = &md[md.find("## Status").unwrap()..md.find("## Per instance").unwrap()];
    assert!(!status.contains("Nothing failed"), "{status}");
    assert!(
        status.contains(&format!(
            "### Unsupported ({unsupported} steps)\n\n- `ml-kem/ML-KEM-1024-clean`: {lacks} ({unsupported} steps)"
        )),
        "{status}"
    );
    assert!(status
        .contains("### Timed out (1)\n\n- `ml-kem/ML-KEM-768-clean/survey`: killed after 30m"));
    assert!(
        status.contains("`ML-KEM-512-clean` dec: ±1.9% (target ±1.0%)"),
        "{status}"
    );
    // the block of trials that missed the 2% CV rule is there too
    assert!(status.contains("`ML-KEM-768-clean` enc: CV "), "{status}");
    // (Markdown escapes the `>` of the reason)
    assert!(
        status.contains(&format!(
            "`ml-kem/ML-KEM-512-clean/profile:keygen`: {}",
            warning.replace('>', "&gt;")
        )),
        "{status}"
    );
    // NOKAT is "not checked", never a failure
    let failed = &status[status.find("### Failed").unwrap()..status.find("### Timed out").unwrap()];
    assert!(!failed.contains("qube-192"), "{failed}");
    assert!(status
        .contains("### KAT not checked: no expected hash (1)\n\n- `qube/qube-192/kat` (single)"));
    // the cell gives the precision reached
    assert!(md.contains("| 77.4 k ±1.9% |"), "{md}");
    assert!(!md.contains("(unstable)"));
    // and the site shows the same block
    let site = file(&files, "site/index.html");
    assert!(site.contains("wrapped total per operation differs from the timed cycles by +48.3%"));
}

/// Issue #27 item 3: "nothing failed" only when nothing is left to say (arm_1: every step
/// succeeded, every KAT passed, every timing within its target).
#[test]
fn index_says_nothing_failed_only_when_all_is_clean() {
    let arm = CampaignView::load(&arm_campaign(), &Path::new(FIXTURES).join("arm_1")).unwrap();
    let md = report::render_campaign(&arm);
    assert!(file(&md, "reports/index.md").contains("## Status\n\nNothing failed: every step"));
    let x86 = report::render_campaign(&x86_view());
    assert!(!file(&x86, "reports/index.md").contains("Nothing failed"));
}

/// Issue #27 item 4: per NIST category one row per scheme, with enc + dec, pk + ct bytes and
/// the ratio of enc + dec to the category's ML-KEM.
#[test]
fn index_compares_schemes_per_category_against_ml_kem() {
    let view = x86_view();
    let results = report::Results::from_view(&view);
    let files = report::render_campaign(&view);
    let md = file(&files, "reports/index.md");
    let inst = |id: &str| {
        results
            .submissions
            .iter()
            .flat_map(|s| &s.instances)
            .find(|i| i.id == id)
            .unwrap()
    };
    let ed = |id: &str| {
        let i = inst(id);
        i.op(Op::Enc).unwrap().cycles().unwrap() + i.op(Op::Dec).unwrap().cycles().unwrap()
    };
    let cat1 =
        &md[md.find("### NIST category 1").unwrap()..md.find("### NIST category 3").unwrap()];
    assert!(cat1.contains(
        "| scheme | best implementation | keygen cycles | enc cycles | dec cycles | enc + dec cycles | pk + ct bytes | vs ML-KEM |"
    ));
    let q = inst("qube-128");
    assert!(
        cat1.contains(&format!(
            "| [qube](qube.md) | `qube-128` | 616.9 k | 657.8 k | 1.18 M | {} | {} | ×{:.2} |",
            ngcc_pipe::report::format::cycles(ed("qube-128")),
            q.pk.unwrap() + q.ct.unwrap(),
            ed("qube-128") / ed("ML-KEM-512-clean")
        )),
        "{cat1}"
    );
    assert!(cat1.contains("| [ml-kem](ml-kem.md) | `ML-KEM-512-clean` |"));
    assert!(cat1.contains("| 1568 | ×1.00 |"), "{cat1}");
    // a scheme with nothing timed in a category says so, without a ratio
    let cat5 = &md[md.find("### NIST category 5").unwrap()..];
    assert!(
        cat5.contains("| [qube](qube.md) | none timed (`qube-256`) | – | – | – | – | 20869 | – |"),
        "{cat5}"
    );
}

/// Issue #27 item 5: a smoke campaign beside x86_1 appears nowhere in x86_1's reports or
/// site; a measured one (arm_1) does; the site opens on x86_1; a smoke campaign's own
/// reports show no other system.
#[test]
fn a_smoke_campaign_beside_is_no_system() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(Path::new(FIXTURES), tmp.path());
    // `quick`: arm_1's outputs as a smoke run wrote them
    let quick = tmp.path().join("quick");
    copy_tree(&tmp.path().join("arm_1"), &quick);
    let mut c: CampaignRecord = record::read_json(&quick.join("campaign.json"))
        .unwrap()
        .unwrap();
    c.system = "quick".into();
    c.role = ngcc_pipe::model::Role::Smoke;
    record::write_json(&quick.join("campaign.json"), &c).unwrap();
    let rj = quick.join("reports/results.json");
    let mut r: report::Results = record::read_json(&rj).unwrap().unwrap();
    r.system = "quick".into();
    record::write_json(&rj, &r).unwrap();

    let out = tmp.path().join("x86_1");
    let view = CampaignView::load(&x86_campaign(), &out).unwrap();
    assert_eq!(view.system_names(), ["arm_1", "x86_1"]);
    let mut files = report::render_campaign(&view);
    files.extend(report::render_submission(&view, "ml-kem"));
    report::write_all(&out, &files).unwrap();
    for f in walk(&out.join("reports"))
        .into_iter()
        .chain(walk(&out.join("site")))
    {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains("quick"),
            "{} names the smoke campaign",
            f.display()
        );
    }
    let site = file(&files, "site/index.html");
    assert!(site.contains("arm_1"));
    let first = site.find("<section id=\"system-").unwrap();
    assert!(site[first..].starts_with("<section id=\"system-x86_1\">"));

    // the smoke campaign itself stands alone
    let mut smoke = arm_campaign();
    smoke.system.name = "quick".into();
    smoke.system.role = ngcc_pipe::model::Role::Smoke;
    let alone = CampaignView::load(&smoke, &quick).unwrap();
    assert!(alone.other_systems.is_empty());
}

/// Issue #27 item 6: the charts print their figures: every bar's value is written beside
/// it (wide and narrow), the axis says where the bars start, and the scatter names what it
/// plots and each point's category.
#[test]
fn charts_write_their_values() {
    use ngcc_pipe::report::svg::{cycles_chart, size_scatter, Layout, Spread};
    let results = report::Results::from_view(&x86_view());
    let spread = Spread::for_results(&results);
    for layout in [Layout::Wide, Layout::Narrow] {
        let svg = cycles_chart(&results, spread, layout).unwrap();
        // the axis starts at a labelled decade, and the title says the bars start there
        assert!(svg.contains("log scale from 10k"), "{svg}");
        for inst in results.submissions.iter().flat_map(|s| &s.instances) {
            for o in &inst.ops {
                if let Some(c) = o.cycles() {
                    let v = ngcc_pipe::report::format::cycles(c);
                    assert!(svg.contains(&format!(">{v}</text>")), "{} {v}", inst.id);
                }
            }
        }
        let sc = size_scatter(&results, spread, layout).unwrap();
        assert!(sc.contains("ML-KEM-512-clean (cat. 1)"));
        if layout == Layout::Wide {
            assert!(svg.contains("(bars start there)"));
            assert!(sc.contains(
                "pk + ct bytes against decapsulation mean cycles; labels give the NIST category"
            ));
        }
    }
}
