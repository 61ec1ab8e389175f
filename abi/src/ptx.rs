//! Reading PTX as its module-scope statements: the header's directives, kernel entries,
//! functions and variables, each with the symbol it defines or declares, and the symbols a
//! statement names. The builder joins the kernels' separately compiled modules into the
//! crate's with it; the builder and the runtime cut a kernel's own module out of the crate's
//! with [`split`] (the same cut on both sides: the builder assembles the piece into the
//! kernel's SASS and names the piece's constant strings beside it, the runtime loads the
//! piece where no SASS runs), and [`byte_globals`] finds the constant strings (for the
//! messages of faults).
//!
//! ```
//! use berth_abi::ptx::{Kind, statements};
//! let ptx = ".version 8.7\n.target sm_90\n\
//!            .global .align 1 .b8 msg[2] = {104, 105};\n\
//!            .visible .entry k(.param .u64 p) { ret; }\n";
//! let read: Vec<_> = statements(ptx).map(|s| s.unwrap()).collect();
//! let kinds: Vec<_> = read.iter().map(|s| (s.kind, s.name)).collect();
//! assert_eq!(
//!     kinds,
//!     [(Kind::Header, ""), (Kind::Header, ""), (Kind::Variable, "msg"), (Kind::Entry, "k")]
//! );
//! assert!(read[3].visible && read[3].defines);
//! ```

#[cfg(feature = "alloc")]
pub mod split;

/// Why PTX cannot be read as statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError<'a> {
    /// A module-scope statement of a form this does not know (its first line): a reader
    /// would not know what it names, or whether a kernel needs it.
    Unknown(&'a str),
    /// A brace, parenthesis or comment is never closed.
    Unbalanced,
}

impl core::fmt::Display for ReadError<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReadError::Unknown(s) => {
                write!(f, "a module-scope PTX statement not understood: `{s}`")
            }
            ReadError::Unbalanced => write!(f, "an unbalanced brace, parenthesis or comment"),
        }
    }
}

/// What a module-scope statement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `.version`, `.target`, `.address_size`, `.file`: every module has them.
    Header,
    /// A kernel entry (`.entry`).
    Entry,
    /// A function, defined or declared (`.func`).
    Func,
    /// A variable (`.global`, `.const`, `.shared`).
    Variable,
}

/// One module-scope statement of a PTX module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statement<'a> {
    /// Its text, from its first directive to its `;` or closing `}` (a header directive: to
    /// its line's end), without trailing white space.
    pub text: &'a str,
    /// Where `text` starts in the module.
    pub start: usize,
    /// What it is.
    pub kind: Kind,
    /// The symbol it defines or declares; empty for the header's directives.
    pub name: &'a str,
    /// Whether it has a body or an initialiser (or is a variable that is not `.extern`),
    /// rather than only declaring its symbol.
    pub defines: bool,
    /// Whether its symbol is seen outside the module (`.visible`, `.extern`, `.weak`,
    /// `.common`).
    pub visible: bool,
}

/// The module-scope statements of `ptx`, in order (comments and white space between them
/// skipped). An item is an error where the text cannot be read on; none follow it.
pub fn statements(ptx: &str) -> impl Iterator<Item = Result<Statement<'_>, ReadError<'_>>> {
    let bytes = ptx.as_bytes();
    let mut at = 0;
    let mut failed = false;
    core::iter::from_fn(move || {
        while !failed && at < bytes.len() {
            match bytes[at] {
                b if b.is_ascii_whitespace() => at += 1,
                b'/' if bytes.get(at + 1) == Some(&b'/') => at = line_end(bytes, at),
                b'/' if bytes.get(at + 1) == Some(&b'*') => match block_comment_end(bytes, at) {
                    Some(end) => at = end,
                    None => {
                        failed = true;
                        return Some(Err(ReadError::Unbalanced));
                    }
                },
                _ => {
                    let read = statement_end(bytes, at)
                        .and_then(|end| classify(&ptx[at..end], at).map(|s| (s, end)));
                    return Some(match read {
                        Ok((s, end)) => {
                            at = end;
                            Ok(s)
                        }
                        Err(e) => {
                            failed = true;
                            Err(e)
                        }
                    });
                }
            }
        }
        None
    })
}

/// The identifiers `text` names, with where each starts: its symbols (registers, `%r1`, and
/// directives, `.u32`, are not). With `comments`, names inside comments count too.
pub fn symbol_spans(text: &str, comments: bool) -> impl Iterator<Item = (usize, &str)> {
    let bytes = text.as_bytes();
    let mut at = 0;
    core::iter::from_fn(move || {
        while at < bytes.len() {
            let b = bytes[at];
            if !comments && b == b'/' && bytes.get(at + 1) == Some(&b'/') {
                at = line_end(bytes, at);
            } else if !comments && b == b'/' && bytes.get(at + 1) == Some(&b'*') {
                at = block_comment_end(bytes, at).unwrap_or(bytes.len());
            } else if is_symbol_byte(b) {
                let start = at;
                while at < bytes.len() && is_symbol_byte(bytes[at]) {
                    at += 1;
                }
                let prefixed = start > 0 && matches!(bytes[start - 1], b'%' | b'.');
                if !prefixed && !b.is_ascii_digit() {
                    return Some((start, &text[start..at]));
                }
            } else {
                at += 1;
            }
        }
        None
    })
}

/// The symbols `text` names outside its comments ([`symbol_spans`]).
pub fn symbols(text: &str) -> impl Iterator<Item = &str> {
    symbol_spans(text, false).map(|(_, s)| s)
}

/// Whether `b` can be part of a PTX symbol.
pub fn is_symbol_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// A byte-array global with an initialiser, as one line of PTX declares it (`.global .align 1
/// .b8 NAME[N] = {..};`): where constant strings (the file names of panic locations) live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteGlobal<'a> {
    /// The global's name.
    pub name: &'a str,
    /// Its declared length in bytes.
    pub len: usize,
    /// The initialiser's text between the braces: decimal bytes separated by commas.
    pub init: &'a str,
}

impl<'a> ByteGlobal<'a> {
    /// `line` (one line of PTX) as a byte-array global with an initialiser, if it is one.
    ///
    /// ```
    /// use berth_abi::ptx::ByteGlobal;
    /// let g = ByteGlobal::parse(".global .align 1 .b8 msg[3] = {104, 105};").unwrap();
    /// assert_eq!((g.name, g.len), ("msg", 3));
    /// assert_eq!(g.bytes().collect::<Vec<u8>>(), [104, 105]);
    /// assert!(ByteGlobal::parse(".global .align 8 .u64 p[1] = {0};").is_none());
    /// ```
    pub fn parse(line: &'a str) -> Option<ByteGlobal<'a>> {
        let line = line.trim();
        if !(line.starts_with(".global")
            || line.starts_with(".visible .global")
            || line.starts_with(".const"))
        {
            return None;
        }
        let (decl, init) = line.split_once(" = {")?;
        let pos = decl.find(".b8 ")?;
        let (name, count) = decl[pos + 4..].trim().split_once('[')?;
        let len = count.trim_end_matches(']').parse::<usize>().ok()?;
        Some(ByteGlobal {
            name,
            len,
            init: init.trim_end().trim_end_matches("};"),
        })
    }

    /// The initialiser's bytes (the declared bytes past them are zero).
    pub fn bytes(&self) -> impl Iterator<Item = u8> + 'a {
        self.init.split(',').filter_map(|b| b.trim().parse().ok())
    }
}

/// The byte-array globals with initialisers of a module ([`ByteGlobal`]), in order. Only the
/// lines holding ` = {` (which nothing else in PTX has) are read.
///
/// ```
/// use berth_abi::ptx::byte_globals;
/// let ptx = ".version 8.7\n.global .align 1 .b8 a[2] = {104, 105};\n\
///            .global .align 1 .b8 b[1] = {33};\n.global .align 8 .u64 p[1] = {0};\n";
/// let names: Vec<&str> = byte_globals(ptx).map(|g| g.name).collect();
/// assert_eq!(names, ["a", "b"]);
/// ```
pub fn byte_globals(ptx: &str) -> impl Iterator<Item = ByteGlobal<'_>> {
    let mut done = 0;
    ptx.match_indices(" = {").filter_map(move |(pos, _)| {
        if pos < done {
            return None;
        }
        let start = ptx[..pos].rfind('\n').map_or(0, |n| n + 1);
        let end = ptx[pos..].find('\n').map_or(ptx.len(), |n| pos + n);
        done = end;
        ByteGlobal::parse(&ptx[start..end])
    })
}

/// The directives of a module's header: each is one line, without `;`.
const HEADER: [&str; 4] = [".version", ".target", ".address_size", ".file"];

/// Where the line holding `at` ends (past its newline).
fn line_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |n| at + n + 1)
}

fn block_comment_end(bytes: &[u8], at: usize) -> Option<usize> {
    bytes[at + 2..]
        .windows(2)
        .position(|w| w == b"*/")
        .map(|n| at + 2 + n + 2)
}

/// The end of the module-scope statement that begins at `start`: its `;`, the `}` closing
/// a function's body, or, for the header's directives, which have neither, its line's end.
fn statement_end(bytes: &[u8], start: usize) -> Result<usize, ReadError<'static>> {
    if HEADER
        .iter()
        .any(|d| bytes[start..].starts_with(d.as_bytes()))
    {
        return Ok(bytes[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |n| start + n));
    }
    let (mut depth, mut parens, mut initialiser) = (0usize, 0usize, false);
    let mut at = start;
    while at < bytes.len() {
        match bytes[at] {
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at = line_end(bytes, at);
                continue;
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                at = block_comment_end(bytes, at).ok_or(ReadError::Unbalanced)?;
                continue;
            }
            b'(' => parens += 1,
            b')' => parens = parens.checked_sub(1).ok_or(ReadError::Unbalanced)?,
            b'=' if depth == 0 => initialiser = true,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1).ok_or(ReadError::Unbalanced)?;
                // A body ends the statement; an initialiser's braces end at its `;`.
                if depth == 0 && !initialiser {
                    return Ok(at + 1);
                }
            }
            b';' if depth == 0 && parens == 0 => return Ok(at + 1),
            _ => {}
        }
        at += 1;
    }
    Err(ReadError::Unbalanced)
}

/// What the statement `text` (starting at `start`) is, and the symbol it defines or declares.
fn classify(text: &str, start: usize) -> Result<Statement<'_>, ReadError<'_>> {
    let text = text.trim_end();
    let unknown = || ReadError::Unknown(text.lines().next().unwrap_or_default());
    if HEADER.iter().any(|d| text.starts_with(d)) {
        return Ok(Statement {
            text,
            start,
            kind: Kind::Header,
            name: "",
            defines: false,
            visible: false,
        });
    }
    // Linkage first (`.visible`, `.extern`, `.weak`, `.common`), then what it is.
    let mut rest = text;
    let (mut visible, mut external) = (false, false);
    let what = loop {
        let trimmed = rest.trim_start();
        let end = trimmed
            .find(|c: char| c.is_ascii_whitespace() || c == '(')
            .unwrap_or(trimmed.len());
        let word = &trimmed[..end];
        rest = &trimmed[end..];
        match word {
            ".visible" | ".weak" | ".common" => visible = true,
            ".extern" => (visible, external) = (true, true),
            ".entry" => break Kind::Entry,
            ".func" => break Kind::Func,
            ".global" | ".const" | ".shared" => break Kind::Variable,
            _ => return Err(unknown()),
        }
    };
    let (name, defines) = if what == Kind::Variable {
        // `.global .align 8 .u64 NAME[3] = {…};`, `.shared .align 16 .b8 NAME[4096];`
        let decl = rest.split(['=', ';']).next().unwrap_or_default();
        let last = decl.split_ascii_whitespace().last().unwrap_or_default();
        (last.split('[').next().unwrap_or_default(), !external)
    } else {
        // `.func (.param .b32 func_retval0) name(…)`: past the return value's group.
        let mut r = rest.trim_start();
        if r.starts_with('(') {
            r = r.split_once(')').ok_or_else(unknown)?.1.trim_start();
        }
        let end = r
            .find(|c: char| c.is_ascii_whitespace() || c == '(' || c == ';')
            .unwrap_or(r.len());
        (&r[..end], text.ends_with('}'))
    };
    if name.is_empty() || !name.bytes().all(is_symbol_byte) {
        return Err(unknown());
    }
    Ok(Statement {
        text,
        start,
        kind: what,
        name,
        defines,
        visible,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn statements_with_comments_initialisers_and_return_values() {
        let ptx = "//\n// Generated\n//\n.version 8.7\n.target sm_90\n.address_size 64\n\n\
            .extern .func (.param .b32 func_retval0) vprintf(.param .b64 a, .param .b64 b);\n\
            .global .align 8 .u64 table[2] = {generic(msg), 0}; // a comment with { and ;\n\
            .shared .align 16 .b8 tile[4096];\n\
            /* a block comment } */\n\
            .func helper(.param .b64 p) { // }\n ld.u64 %rd1, [p]; ret; }\n\
            .visible .entry k() { call helper; }\n";
        let read: Vec<Statement<'_>> = statements(ptx).map(|s| s.unwrap()).collect();
        let names: Vec<(Kind, &str, bool, bool)> = read
            .iter()
            .map(|s| (s.kind, s.name, s.defines, s.visible))
            .collect();
        assert_eq!(
            names,
            [
                (Kind::Header, "", false, false),
                (Kind::Header, "", false, false),
                (Kind::Header, "", false, false),
                (Kind::Func, "vprintf", false, true),
                (Kind::Variable, "table", true, false),
                (Kind::Variable, "tile", true, false),
                (Kind::Func, "helper", true, false),
                (Kind::Entry, "k", true, true),
            ]
        );
        assert_eq!(read[0].text, ".version 8.7");
        assert_eq!(&ptx[..read[0].start], "//\n// Generated\n//\n");
        assert!(read[4].text.ends_with("0};"), "{}", read[4].text);
        assert!(read[6].text.ends_with("ret; }"), "{}", read[6].text);
        let called: Vec<&str> = symbols(read[7].text).collect();
        assert_eq!(called, ["k", "call", "helper"]);
        let in_table: Vec<&str> = symbols(read[4].text).collect();
        assert_eq!(in_table, ["table", "generic", "msg"]);
        // Names in comments count only when asked for.
        assert_eq!(
            symbol_spans("a /* b */ c", true)
                .map(|(_, s)| s)
                .collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(symbols("a /* b */ c").collect::<Vec<_>>(), ["a", "c"]);
    }

    #[test]
    fn what_it_cannot_read_is_an_error_and_ends_the_reading() {
        let unknown: Vec<_> = statements(".version 8.7\n.maxnreg 3;\n.global .u32 x;").collect();
        assert_eq!(unknown.len(), 2);
        assert_eq!(unknown[1], Err(ReadError::Unknown(".maxnreg 3;")));
        for bad in [
            ".func f() { ret;",
            ".func f() { ret; }}",
            "/* open",
            ".global .u32 x",
        ] {
            let read: Vec<_> = statements(bad).collect();
            assert!(
                read.contains(&Err(ReadError::Unbalanced)),
                "{bad}: {read:?}"
            );
        }
    }
}
