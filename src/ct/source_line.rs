//! Whether a finding's source line branches on data: memcheck reports a conditional jump or
//! move at a line; when that line has no branch in the source, the compiler introduced the
//! branch (it turned arithmetic into a compare and jump, say), and the finding is labelled
//! so, with the object's flags, since another compiler or other flags may not do it.
//!
//! **The rule** ([`has_branch`]), read on the one line, with comments and string and
//! character literals removed: the line branches when it holds `if`, `while`, `switch`,
//! `?` (a conditional expression), `&&` or `||`, or a `for` whose condition is anything but
//! a counter compared with a constant (`i < 64`, `k < PK_NROWS`, `i < (1 << GFBITS)`:
//! numbers, upper-case names, `sizeof` and casts to integer types). A loop with a fixed
//! trip count tests only its counter, never secret data, so a secret-dependent conditional
//! on that line is the compiler's.
//!
//! What the rule cannot see: a macro that expands to a branch (an upper-case call counts
//! as no branch), a condition continued from the previous line, and a loop counter changed
//! inside the body. Findings that are only memory indexes (`UninitValue`) are not labelled:
//! an index needs no branch.

/// The line with comments, string and character literals blanked out (a `/*` comment left
/// open runs to the end of the line).
fn code_of(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for d in chars.by_ref() {
                    if prev == '*' && d == '/' {
                        break;
                    }
                    prev = d;
                }
                out.push(' ');
            }
            '"' | '\'' => {
                let mut escaped = false;
                for d in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == c {
                        break;
                    }
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

/// The identifiers of a piece of code with their byte offsets.
fn words(code: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in code.char_indices().chain([(code.len(), ' ')]) {
        let part = c.is_ascii_alphanumeric() || c == '_';
        match (start, part) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                out.push((s, &code[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// `expr` with every `sizeof(...)` replaced by `0` (its argument may be any type or name).
fn without_sizeof(expr: &str) -> String {
    let mut s = expr.to_string();
    while let Some(at) = words(&s)
        .into_iter()
        .find(|(_, w)| *w == "sizeof")
        .map(|(at, _)| at)
    {
        let rest = &s[at + "sizeof".len()..];
        let Some(open) = rest.find('(').filter(|o| rest[..*o].trim().is_empty()) else {
            break;
        };
        let mut depth = 0;
        let close = rest[open..].char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(open + i)
        });
        let Some(close) = close else { break };
        s = format!("{}0{}", &s[..at], &rest[close + 1..]);
    }
    s
}

/// A word of a cast to an integer type: `(unsigned int)`, `(size_t)`, `(uint16_t)`.
fn cast_word(w: &str) -> bool {
    matches!(
        w,
        "unsigned" | "signed" | "int" | "long" | "short" | "char" | "size_t"
    ) || w
        .strip_prefix('u')
        .unwrap_or(w)
        .strip_prefix("int")
        .and_then(|r| r.strip_suffix("_t"))
        .is_some_and(|bits| bits.parse::<u8>().is_ok())
}

/// Whether `expr` is a constant: numbers, upper-case names, casts to integer types,
/// `sizeof(...)` and arithmetic.
fn constant(expr: &str) -> bool {
    let expr = without_sizeof(expr);
    let expr = expr.trim();
    !expr.is_empty()
        && expr
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_ ()+-*/<>%".contains(c))
        && words(expr).iter().all(|(_, w)| {
            w.starts_with(|c: char| c.is_ascii_digit())
                || cast_word(w)
                || w.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
}

/// Whether a `for` condition compares a counter with a constant (or is empty: `for (;;)`).
fn fixed_bound(cond: &str) -> bool {
    let cond = cond.trim();
    if cond.is_empty() {
        return true;
    }
    for op in ["<=", ">=", "!=", "<", ">"] {
        if let Some((lhs, rhs)) = cond.split_once(op) {
            let lhs = lhs.trim();
            let counter = !lhs.is_empty()
                && lhs.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && lhs.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            // `a << b` is not a comparison: `<` must not be part of a shift.
            let shift = rhs.starts_with(['<', '>']);
            return counter && !shift && constant(rhs);
        }
    }
    false
}

/// The condition of a `for` starting at byte `at` of `code` (the text between the header's
/// two top-level `;`), or `None` when the header does not end on this line.
fn for_condition(code: &str, at: usize) -> Option<&str> {
    let open = at + code[at..].find('(')?;
    let mut depth = 0;
    let mut semis = Vec::new();
    for (i, c) in code[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return match semis[..] {
                        [a, b] => Some(&code[a + 1..b]),
                        _ => None,
                    };
                }
            }
            ';' if depth == 1 => semis.push(open + i),
            _ => {}
        }
    }
    None
}

/// Whether a C source line holds a branch that may depend on data (the rule in the module
/// documentation).
pub fn has_branch(line: &str) -> bool {
    let code = code_of(line);
    if code.contains('?') || code.contains("&&") || code.contains("||") {
        return true;
    }
    words(&code).iter().any(|&(at, w)| match w {
        "if" | "while" | "switch" => true,
        "for" => for_condition(&code, at).is_none_or(|c| !fixed_bound(c)),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branches_in_the_source() {
        for line in [
            "        if (val0 < KYBER_Q) {",
            "    while (ctr0 < KYBER_N || ctr1 < KYBER_N) {",
            "            if ( uint64_is_zero_declassify((mat.w[ row ][ i ] >> j) & 1) ) { // return if not systematic",
            "    x = s ? a : b;",
            "    ok = a && b;",
            "    switch (k) {",
            "    } while (t != 0);",
            "    for (i = 0; i < n; ++i) {",
            "        for (i = 0; i < SYS_T * 2 && count < SYS_T; i++) {",
            "    for (size_t i = (weight - 1); i-- > 0;) {",
            "    for (i = 0;",
        ] {
            assert!(has_branch(line), "{line}");
        }
    }

    #[test]
    fn no_branch_in_the_source() {
        for line in [
            // HQC's single_bit_mask (vector.c:33): a fixed trip count.
            "    for (size_t i = 0; i < 64; ++i) {",
            "        for (k = row + 1; k < PK_NROWS; k++) {",
            "    for (i = 1; i < (1 << GFBITS); i++) {",
            "    for (;;) {",
            "        y[i] = t[i] & 0xFFFF;",
            "        tmp = 0 - (1 - ((uint64_t)(tmp | (0 - tmp)) >> 63));",
            "    r = x; // if this were a branch",
            "    r = x; /* while */ s = y;",
            "    puts(\"a ? b\"); c = '?';",
            "    *__P = __B;",
        ] {
            assert!(!has_branch(line), "{line}");
        }
    }

    #[test]
    fn shifts_and_comparisons() {
        assert!(fixed_bound("i < KYBER_N / 8"));
        assert!(fixed_bound("j <= sizeof(buf)"));
        assert!(fixed_bound("j < 2 * sizeof (uint64_t)"));
        assert!(!fixed_bound("j < sizeof(buf) + n"));
        // FrodoKEM's noise.c.
        assert!(fixed_bound("j < (unsigned int)(CDF_TABLE_LEN - 1)"));
        assert!(fixed_bound("i < (uint32_t)PARAM_N"));
        assert!(!fixed_bound("i < (uint32_t)n"));
        assert!(!fixed_bound("i < len"));
        assert!(!fixed_bound("i << 2"));
        assert!(!fixed_bound("x[i] < 3"));
        assert_eq!(code_of("a /* b */ c // d"), "a   c ");
    }
}
