//! Where the package lies inside what was given. An archive often holds the package's
//! folder beside loose files (a checksum list, a README, a LICENSE), and a folder may hold
//! the package one or two levels down (`Kyber-round3/Kyber/...`): the package is the folder
//! that holds `<Kind>_Implementation/` (or `Additional_Implementations/`), found at the top
//! or one or two levels below it, or the one `--root` names.

use std::path::{Component, Path};

use super::read::{join, Package};

/// Whether folder `rel` of `pkg` holds implementation folders.
fn is_package(pkg: &Package, rel: &str) -> bool {
    pkg.list(rel)
        .folders
        .iter()
        .any(|f| f.ends_with("_Implementation") || f.starts_with("Additional_Implementation"))
}

/// The package's folder, relative to what was given (`""` for its top): `given` (a
/// relative path inside it), else the top when it is the package, else the only package
/// one or two levels down. Several, or a `given` that is not a folder inside, is an error.
pub fn find(pkg: &Package, given: Option<&Path>) -> Result<String, String> {
    if let Some(g) = given {
        let shown = crate::text::clean_line(&g.display().to_string());
        let inside = g
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        let rel = g.to_str().filter(|_| inside).ok_or_else(|| {
            format!("--root {shown}: give a relative path inside the package, without `..`")
        })?;
        let rel = rel.trim_end_matches('/');
        if !pkg.is_dir(rel) {
            return Err(format!("--root {shown}: no such folder in the package"));
        }
        return Ok(rel.to_string());
    }
    if is_package(pkg, "") {
        return Ok(String::new());
    }
    let mut level: Vec<String> = vec![String::new()];
    for _ in 0..2 {
        let next: Vec<String> = level
            .iter()
            .flat_map(|d| {
                pkg.list(d)
                    .folders
                    .into_iter()
                    .map(move |f| join(d, &f))
                    .collect::<Vec<_>>()
            })
            .collect();
        let found: Vec<&String> = next.iter().filter(|d| is_package(pkg, d)).collect();
        match found.as_slice() {
            [] => level = next,
            [one] => return Ok((*one).clone()),
            many => {
                return Err(format!(
                    "several packages in it: {}; import each with --root",
                    many.iter()
                        .map(|d| format!("`{}`", crate::text::clean_line(d)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        }
    }
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_package_below_loose_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("round3/Kyber/Reference_Implementation/crypto_kem"))
            .unwrap();
        std::fs::write(p.join("SHA256SUMS"), "x\n").unwrap();
        std::fs::write(p.join("round3/README"), "x\n").unwrap();
        let pkg = Package::new(p).unwrap();
        assert_eq!(find(&pkg, None).unwrap(), "round3/Kyber");
        assert_eq!(
            find(&pkg, Some(Path::new("round3/Kyber/"))).unwrap(),
            "round3/Kyber"
        );
        assert!(find(&pkg, Some(Path::new("../x"))).is_err());
        assert!(find(&pkg, Some(Path::new("nope"))).is_err());
        std::fs::create_dir_all(p.join("round3/Saber/Optimized_Implementation")).unwrap();
        let pkg = Package::new(p).unwrap();
        let e = find(&pkg, None).unwrap_err();
        assert!(e.contains("`round3/Kyber`, `round3/Saber`"), "{e}");
    }
}
