//! The kernel program's LLVM IR (text form), parsed once into what the rewrites work on:
//! globals, functions with their bodies, and everything else kept as it was.
//!
//! The parse is by line, as `llvm-dis` writes modules: a global is one line (`@name = …`), a
//! function is its `define` line, its body lines and a closing `}` line. The rewrites change
//! lines in place; [`Module`]'s `Display` writes the module back.

use std::fmt;

/// A module: its items in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Module {
    /// Globals, functions and other lines, in the order of the text.
    pub items: Vec<Item>,
}

/// One item of a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A global variable: `@name = …`, one line.
    Global(Global),
    /// A function definition.
    Function(Function),
    /// Any other line (declarations, attribute groups, metadata, the target lines).
    Other(String),
}

/// A global variable's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Global {
    /// Its name, without `@` (or quotes).
    pub name: String,
    /// The whole line.
    pub line: String,
}

/// A function definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its name, without `@` (or quotes).
    pub name: String,
    /// The `define …{` line.
    pub header: String,
    /// The lines between the header and the closing `}`.
    pub body: Vec<String>,
}

impl Module {
    /// Parse a module's text.
    pub fn parse(text: &str) -> Module {
        let mut items = Vec::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if line.starts_with("define ") {
                let name = defined_name(line).unwrap_or_default().to_owned();
                let mut body = Vec::new();
                // A one-line definition (`define … { }`) has no body lines.
                if !line.trim_end().ends_with('}') {
                    for l in lines.by_ref() {
                        if l == "}" {
                            break;
                        }
                        body.push(l.to_owned());
                    }
                }
                items.push(Item::Function(Function {
                    name,
                    header: line.to_owned(),
                    body,
                }));
            } else if let Some(name) = global_name(line) {
                items.push(Item::Global(Global {
                    name: name.to_owned(),
                    line: line.to_owned(),
                }));
            } else {
                items.push(Item::Other(line.to_owned()));
            }
        }
        Module { items }
    }

    /// The functions defined in the module.
    pub fn functions(&self) -> impl Iterator<Item = &Function> {
        self.items.iter().filter_map(|i| match i {
            Item::Function(f) => Some(f),
            _ => None,
        })
    }

    /// The functions defined in the module, to change.
    pub fn functions_mut(&mut self) -> impl Iterator<Item = &mut Function> {
        self.items.iter_mut().filter_map(|i| match i {
            Item::Function(f) => Some(f),
            _ => None,
        })
    }

    /// The module's globals.
    pub fn globals(&self) -> impl Iterator<Item = &Global> {
        self.items.iter().filter_map(|i| match i {
            Item::Global(g) => Some(g),
            _ => None,
        })
    }

    /// The module's globals, to change.
    pub fn globals_mut(&mut self) -> impl Iterator<Item = &mut Global> {
        self.items.iter_mut().filter_map(|i| match i {
            Item::Global(g) => Some(g),
            _ => None,
        })
    }

    /// Every line of the module, to change: globals, headers, bodies and the others.
    pub fn lines_mut(&mut self) -> impl Iterator<Item = &mut String> {
        self.items
            .iter_mut()
            .flat_map(|i| -> Box<dyn Iterator<Item = &mut String>> {
                match i {
                    Item::Global(g) => Box::new(std::iter::once(&mut g.line)),
                    Item::Function(f) => {
                        Box::new(std::iter::once(&mut f.header).chain(f.body.iter_mut()))
                    }
                    Item::Other(l) => Box::new(std::iter::once(l)),
                }
            })
    }

    /// Names of functions the module declares but does not define (`declare … @name(`).
    pub fn declared_functions(&self) -> Vec<String> {
        self.items
            .iter()
            .filter_map(|i| match i {
                Item::Other(l) if l.starts_with("declare ") => defined_name(l).map(str::to_owned),
                _ => None,
            })
            .collect()
    }

    /// Drop the globals `keep` says no to.
    pub fn retain_globals(&mut self, mut keep: impl FnMut(&Global) -> bool) {
        self.items.retain(|i| match i {
            Item::Global(g) => keep(g),
            _ => true,
        });
    }
}

impl Function {
    /// Whether the function is a kernel entry (`define ptx_kernel …`).
    pub fn is_kernel(&self) -> bool {
        self.header
            .split_once('@')
            .is_some_and(|(head, _)| head.split_whitespace().any(|w| w == "ptx_kernel"))
    }
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for item in &self.items {
            match item {
                Item::Global(g) => writeln!(f, "{}", g.line)?,
                Item::Other(l) => writeln!(f, "{l}")?,
                Item::Function(func) => {
                    writeln!(f, "{}", func.header)?;
                    for l in &func.body {
                        writeln!(f, "{l}")?;
                    }
                    if !func.header.trim_end().ends_with('}') {
                        writeln!(f, "}}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The section a global or function line places its item in (`section "name"`), if any.
pub fn section(line: &str) -> Option<&str> {
    let at = line.find(" section \"")? + " section \"".len();
    let len = line[at..].find('"')?;
    Some(&line[at..at + len])
}

/// The line without its ` section "…"` (and the comma before it, on a global).
pub fn without_section(line: &str) -> String {
    let Some(start) = line.find(" section \"") else {
        return line.to_owned();
    };
    let after = start + " section \"".len();
    let Some(len) = line[after..].find('"') else {
        return line.to_owned();
    };
    let end = after + len + 1;
    let start = if line[..start].ends_with(',') {
        start - 1
    } else {
        start
    };
    format!("{}{}", &line[..start], &line[end..])
}

/// The name of the global a line defines or declares (`@name = ...`), if it does.
fn global_name(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('@')?;
    let end = rest.find(" = ")?;
    let name = rest[..end].trim_matches('"');
    (!name.is_empty() && name.bytes().all(is_ident_byte)).then_some(name)
}

/// The name a `define` or `declare` line gives its function (`@name(` or `@"name"(`).
fn defined_name(line: &str) -> Option<&str> {
    let at = line.find('@')?;
    let rest = &line[at + 1..];
    let end = rest.find('(')?;
    Some(rest[..end].trim_matches('"'))
}

/// A byte of an unquoted LLVM identifier.
pub fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_writes_back_the_same_text() {
        let text = "target datalayout = \"e-i64:64\"\n\
                    @g = internal global [4 x i8] zeroinitializer, section \"berth:shared\", align 4\n\
                    \n\
                    define ptx_kernel void @k(ptr %0) unnamed_addr #0 section \"berth:nocontract\" {\n\
                    start:\n  ret void\n}\n\
                    define void @empty() { }\n\
                    declare float @__nv_expf(float)\n\
                    attributes #0 = { nounwind }\n";
        let m = Module::parse(text);
        assert_eq!(m.to_string(), text);
        let f: Vec<_> = m
            .functions()
            .map(|f| (f.name.as_str(), f.is_kernel()))
            .collect();
        assert_eq!(f, [("k", true), ("empty", false)]);
        assert_eq!(m.globals().next().unwrap().name, "g");
        assert_eq!(m.declared_functions(), ["__nv_expf"]);
        let g = &m.globals().next().unwrap().line;
        assert_eq!(section(g), Some("berth:shared"));
        assert_eq!(
            without_section(g),
            "@g = internal global [4 x i8] zeroinitializer, align 4"
        );
        let k = &m.functions().next().unwrap().header;
        assert_eq!(
            without_section(k),
            "define ptx_kernel void @k(ptr %0) unnamed_addr #0 {"
        );
    }
}
