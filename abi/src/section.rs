//! The section names that carry what rustc cannot say in LLVM IR to berth's builder.
//!
//! A Rust item can be placed in a section of any name (`#[link_section = ".."]`), and the name
//! survives into the LLVM IR the builder rewrites. berth uses three kinds of name, all under
//! the prefix `berth:`:
//!
//! | section | on | written by | the builder |
//! |---|---|---|---|
//! | `berth:shared` | a static of `shared_array!` | the device API | moves it to `.shared` |
//! | `berth:palign:<entry>` | a static of bytes in each entry | `#[gpu_kernel]` | declares each pointer parameter's alignment, drops the static |
//! | `berth:<attr>;<attr>…` | a kernel entry | `#[gpu_kernel(..)]` | turns the attributes into LLVM's (`"nvvm.reqntid"`, `"nvvm.minctasm"`) or into no contraction |

use core::fmt;

/// The prefix of every section berth's builder reads.
const PREFIX: &str = "berth:";
/// What follows [`PREFIX`] in the shared section's name.
const SHARED: &str = "shared";
/// What follows [`PREFIX`] in a parameter-alignment section's name, before the entry's.
const PARAM_ALIGN: &str = "palign:";
/// The kernel attributes' keys.
const REQNTID: &str = "reqntid=";
const MINCTASM: &str = "minctasm=";
const NOCONTRACT: &str = "nocontract";

/// A section name berth's builder reads. (The variants' names are unlike any type of
/// berth's, which rustc then keeps printing by their bare names in messages.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section<'a> {
    /// `berth:shared`: the static is block-shared memory ([`crate::SHARED_SECTION`]).
    SharedArray,
    /// `berth:palign:<entry>`: the static's bytes are the alignment of what each parameter of
    /// the entry points to, one byte per PTX parameter ([`crate::param_align`] for a pointer,
    /// 0 for any other parameter).
    ParamAlign(&'a str),
    /// The section of a kernel entry: its attributes.
    Attributes(KernelAttrs),
}

/// What a kernel entry's section says about it (`#[gpu_kernel(..)]`'s options the builder
/// carries out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelAttrs {
    /// `block = (x, y, z)`: launches use exactly this block shape. The builder gives the
    /// entry `"nvvm.reqntid"` (PTX `.reqntid`) and the thread-index reads their exact ranges.
    pub block: Option<[u32; 3]>,
    /// `min_blocks_per_sm = n`: blocks one SM must hold at once; the builder gives the entry
    /// `"nvvm.minctasm"` (PTX `.minnctapersm`), which bounds ptxas's registers per thread.
    pub min_blocks: Option<u32>,
    /// `fp_contract = false`: the entry's float multiplies and adds are never fused.
    pub exact_fp: bool,
}

/// A kernel attribute this crate does not know, or one whose value does not parse: the text
/// between its semicolons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnknownAttribute<'a>(pub &'a str);

impl fmt::Display for UnknownAttribute<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown kernel attribute `{}`", self.0)
    }
}

impl KernelAttrs {
    /// Whether there is nothing to say (the entry then gets no section).
    pub fn is_empty(&self) -> bool {
        *self == KernelAttrs::default()
    }

    /// The attributes of `spec`, the part of a kernel section's name after `berth:`.
    fn parse(spec: &str) -> Result<KernelAttrs, UnknownAttribute<'_>> {
        let mut attrs = KernelAttrs::default();
        for part in spec.split(';').filter(|p| !p.is_empty()) {
            let unknown = UnknownAttribute(part);
            if let Some(dims) = part.strip_prefix(REQNTID) {
                let mut it = dims.split(',').map(|d| d.parse::<u32>());
                let (Some(Ok(x)), Some(Ok(y)), Some(Ok(z)), None) =
                    (it.next(), it.next(), it.next(), it.next())
                else {
                    return Err(unknown);
                };
                attrs.block = Some([x, y, z]);
            } else if let Some(n) = part.strip_prefix(MINCTASM) {
                attrs.min_blocks = Some(n.parse().map_err(|_| unknown)?);
            } else if part == NOCONTRACT {
                attrs.exact_fp = true;
            } else {
                return Err(unknown);
            }
        }
        Ok(attrs)
    }
}

impl<'a> Section<'a> {
    /// The berth section `name` names: `None` for a name without the `berth:` prefix (not
    /// berth's), an error for a kernel attribute this crate does not know.
    pub fn parse(name: &'a str) -> Option<Result<Section<'a>, UnknownAttribute<'a>>> {
        let rest = name.strip_prefix(PREFIX)?;
        Some(if rest == SHARED {
            Ok(Section::SharedArray)
        } else if let Some(entry) = rest.strip_prefix(PARAM_ALIGN) {
            Ok(Section::ParamAlign(entry))
        } else {
            KernelAttrs::parse(rest).map(Section::Attributes)
        })
    }
}

impl fmt::Display for Section<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(PREFIX)?;
        match self {
            Section::SharedArray => f.write_str(SHARED),
            Section::ParamAlign(entry) => write!(f, "{PARAM_ALIGN}{entry}"),
            Section::Attributes(a) => {
                let mut sep = "";
                if let Some([x, y, z]) = a.block {
                    write!(f, "{REQNTID}{x},{y},{z}")?;
                    sep = ";";
                }
                if let Some(n) = a.min_blocks {
                    write!(f, "{sep}{MINCTASM}{n}")?;
                    sep = ";";
                }
                if a.exact_fp {
                    write!(f, "{sep}{NOCONTRACT}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    /// Every section the macro and the device API can write reads back as itself.
    #[test]
    fn every_section_round_trips() {
        let blocks = [None, Some([1, 1, 1]), Some([256, 1, 1]), Some([16, 16, 4])];
        let mins = [None, Some(1), Some(8), Some(u32::MAX)];
        for block in blocks {
            for min_blocks in mins {
                for exact_fp in [false, true] {
                    let a = KernelAttrs {
                        block,
                        min_blocks,
                        exact_fp,
                    };
                    let name = Section::Attributes(a).to_string();
                    assert!(!name.contains(";;") && !name.ends_with(';'), "{name}");
                    assert_eq!(
                        Section::parse(&name),
                        Some(Ok(Section::Attributes(a))),
                        "{name}"
                    );
                }
            }
        }
        for s in [
            Section::SharedArray,
            Section::ParamAlign("nbody"),
            Section::ParamAlign("scale_f32__berth_1d"),
        ] {
            assert_eq!(Section::parse(&s.to_string()), Some(Ok(s)));
        }
    }

    #[test]
    fn what_is_not_berths_is_left_alone_and_unknown_attributes_are_errors() {
        assert_eq!(Section::parse(".text"), None);
        assert_eq!(Section::parse("llvm.metadata"), None);
        for bad in [
            "warp=3",
            "minctasm=two",
            "reqntid=1,2",
            "reqntid=1,2,3,4",
            "reqntid=-1,1,1",
        ] {
            let name = std::format!("berth:{bad}");
            assert_eq!(
                Section::parse(&name),
                Some(Err(UnknownAttribute(bad))),
                "{name}"
            );
        }
    }
}
