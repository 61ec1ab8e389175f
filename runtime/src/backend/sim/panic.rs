//! How the simulator catches a panicking thread: a process-wide panic hook that, inside a
//! simulated kernel, records the location and message instead of printing them.

use crate::error::{Error, PanicReport};
use crate::launch::Kernel;
use std::cell::{Cell, RefCell};
use std::panic::AssertUnwindSafe;
use std::sync::Once;

/// Where and why a simulated thread panicked.
pub(crate) struct Captured {
    file: String,
    line: u32,
    column: u32,
    message: String,
}

thread_local! {
    static IN_KERNEL: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<Captured>> = const { RefCell::new(None) };
}

/// Run one simulated thread's body, turning a panic into its location and message.
pub(crate) fn in_kernel(f: impl FnOnce()) -> std::result::Result<(), Captured> {
    IN_KERNEL.with(|c| c.set(true));
    let r = std::panic::catch_unwind(AssertUnwindSafe(f));
    IN_KERNEL.with(|c| c.set(false));
    r.map_err(|payload| {
        LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| Captured {
                file: String::new(),
                line: 0,
                column: 0,
                message: payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default(),
            })
    })
}

/// A panic hook that, inside a simulated kernel, records the panic instead of printing it,
/// and otherwise defers to the hook that was installed before.
pub(crate) fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_KERNEL.with(Cell::get) {
                let loc = info.location();
                let message = info
                    .payload()
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| {
                        info.payload()
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                    })
                    .unwrap_or_default();
                LAST_PANIC.with(|p| {
                    *p.borrow_mut() = Some(Captured {
                        file: loc.map(|l| l.file().to_owned()).unwrap_or_default(),
                        line: loc.map_or(0, |l| l.line()),
                        column: loc.map_or(0, |l| l.column()),
                        message,
                    })
                });
            } else {
                previous(info);
            }
        }));
    });
}

pub(crate) fn panic_error(
    k: &'static Kernel,
    block: [u32; 3],
    thread: [u32; 3],
    c: Captured,
) -> Error {
    Error::KernelPanic {
        kernel: k.name.to_owned(),
        report: PanicReport {
            file: c.file,
            line: c.line,
            column: c.column,
            message: c.message,
            block,
            thread,
        },
        context_lost: true,
    }
}
