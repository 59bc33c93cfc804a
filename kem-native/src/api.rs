//! Parse an instance's `api.h` for the NIST KEM sizes and algorithm name.
//!
//! Only `#define` lines matter; everything else (includes, prototypes, comments,
//! guards) is skipped. A namespaced define (`<NS>CRYPTO_PUBLICKEYBYTES`) wins over
//! the plain `CRYPTO_PUBLICKEYBYTES`, which is accepted as a fallback.

use crate::error::ApiError;
use crate::output::ApiSizes;
use nom::{
    branch::alt,
    bytes::complete::{is_not, tag, take_while1},
    character::complete::{char, digit1, space0, space1},
    combinator::{map, map_res, opt, recognize},
    sequence::{delimited, pair, preceded, tuple},
    IResult,
};
use std::collections::HashMap;

/// Value of one `#define NAME VALUE` line we care about.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DefineValue {
    Number(u64),
    Text(String),
    Other,
}

fn identifier(i: &str) -> IResult<&str, &str> {
    take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_')(i)
}

/// A decimal number, optionally with an integer suffix (`2400u`) or in parentheses.
fn number(i: &str) -> IResult<&str, u64> {
    alt((
        delimited(
            pair(char('('), space0),
            number_inner,
            pair(space0, char(')')),
        ),
        number_inner,
    ))(i)
}

fn number_inner(i: &str) -> IResult<&str, u64> {
    map_res(
        pair(digit1, opt(take_while1(|c: char| "uUlL".contains(c)))),
        |(d, _): (&str, Option<&str>)| d.parse::<u64>(),
    )(i)
}

fn string_literal(i: &str) -> IResult<&str, String> {
    map(
        delimited(char('"'), opt(is_not("\"")), char('"')),
        |s: Option<&str>| s.unwrap_or("").to_string(),
    )(i)
}

/// `# define NAME VALUE`, value parsed when it is a number or a string literal.
fn define_line(i: &str) -> IResult<&str, (&str, DefineValue)> {
    let (i, (_, _, _, _, name)) = tuple((
        space0,
        char('#'),
        space0,
        tag("define"),
        preceded(space1, identifier),
    ))(i)?;
    let (i, _) = space0(i)?;
    let (i, value) = alt((
        map(number, DefineValue::Number),
        map(string_literal, DefineValue::Text),
        map(recognize(opt(is_not("\n"))), |_| DefineValue::Other),
    ))(i)?;
    Ok((i, (name, value)))
}

/// Remove `/* ... */` and `// ...` comments, keeping line structure.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('*')) => {
                chars.next();
                let mut prev = ' ';
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                    }
                    if prev == '*' && n == '/' {
                        break;
                    }
                    prev = n;
                }
                out.push(' ');
            }
            ('/', Some('/')) => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn collect_defines(text: &str) -> HashMap<String, DefineValue> {
    let clean = strip_comments(text);
    let mut defines = HashMap::new();
    for line in clean.lines() {
        if let Ok((_, (name, value))) = define_line(line) {
            defines.insert(name.to_string(), value);
        }
    }
    defines
}

fn lookup<'a>(
    defines: &'a HashMap<String, DefineValue>,
    namespace: &str,
    name: &str,
) -> Option<(String, &'a DefineValue)> {
    let namespaced = format!("{namespace}{name}");
    defines
        .get(&namespaced)
        .map(|v| (namespaced, v))
        .or_else(|| defines.get(name).map(|v| (name.to_string(), v)))
}

fn size(
    defines: &HashMap<String, DefineValue>,
    namespace: &str,
    name: &'static str,
) -> Result<u64, ApiError> {
    match lookup(defines, namespace, name) {
        Some((_, DefineValue::Number(n))) => Ok(*n),
        Some((full, _)) => Err(ApiError::NotANumber(full)),
        None => Err(ApiError::Missing {
            namespace: namespace.to_string(),
            name,
        }),
    }
}

/// Read `CRYPTO_{SECRETKEY,PUBLICKEY,CIPHERTEXT,}BYTES` and `CRYPTO_ALGNAME` from api.h text.
///
/// `namespace` is the symbol prefix including its trailing underscore
/// (`PQCLEAN_MLKEM768_CLEAN_`); it may be empty.
pub fn parse_api_h(text: &str, namespace: &str) -> Result<ApiSizes, ApiError> {
    let defines = collect_defines(text);
    let sk = size(&defines, namespace, "CRYPTO_SECRETKEYBYTES")?;
    let pk = size(&defines, namespace, "CRYPTO_PUBLICKEYBYTES")?;
    let ct = size(&defines, namespace, "CRYPTO_CIPHERTEXTBYTES")?;
    let ss = size(&defines, namespace, "CRYPTO_BYTES")?;
    let algname = match lookup(&defines, namespace, "CRYPTO_ALGNAME") {
        Some((_, DefineValue::Text(s))) => Some(s.clone()),
        _ => None,
    };
    Ok(ApiSizes {
        algname,
        pk,
        sk,
        ct,
        ss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_namespaced_defines_with_comments() {
        let text = r#"
#ifndef X_API_H
#define X_API_H
/* a block
   comment #define PQ_CRYPTO_BYTES 99 */
#define PQ_CRYPTO_SECRETKEYBYTES  19888     // sizeof(s) + ...
#  define   PQ_CRYPTO_PUBLICKEYBYTES	9616
#define PQ_CRYPTO_BYTES 16
#define PQ_CRYPTO_CIPHERTEXTBYTES (9720)
#define PQ_CRYPTO_ALGNAME "FrodoKEM-640-AES"
int PQ_crypto_kem_keypair(uint8_t *pk, uint8_t *sk);
#endif
"#;
        let s = parse_api_h(text, "PQ_").unwrap();
        assert_eq!(
            s,
            ApiSizes {
                algname: Some("FrodoKEM-640-AES".into()),
                pk: 9616,
                sk: 19888,
                ct: 9720,
                ss: 16
            }
        );
    }

    #[test]
    fn falls_back_to_plain_names() {
        let text = "#define CRYPTO_SECRETKEYBYTES 1\n#define CRYPTO_PUBLICKEYBYTES 2\n\
                    #define CRYPTO_CIPHERTEXTBYTES 3\n#define CRYPTO_BYTES 4\n";
        let s = parse_api_h(text, "NS_").unwrap();
        assert_eq!((s.sk, s.pk, s.ct, s.ss, s.algname), (1, 2, 3, 4, None));
    }

    #[test]
    fn missing_define_is_named() {
        let text = "#define NS_CRYPTO_SECRETKEYBYTES 1\n#define NS_CRYPTO_PUBLICKEYBYTES 2\n\
                    #define NS_CRYPTO_BYTES 4\n";
        let e = parse_api_h(text, "NS_").unwrap_err().to_string();
        assert!(e.contains("NS_CRYPTO_CIPHERTEXTBYTES"), "{e}");
    }

    #[test]
    fn non_numeric_define_is_explained() {
        let text = "#define NS_CRYPTO_SECRETKEYBYTES (A + B)\n";
        let e = parse_api_h(text, "NS_").unwrap_err().to_string();
        assert!(e.contains("not a plain decimal number"), "{e}");
    }
}
