//! Raw mode for the console on a terminal (crossterm): every key goes to the guest as typed,
//! Ctrl+C included. Restored when the guard drops and, should the plugin panic, before the
//! panic is printed, so the user's shell is never left raw.

use std::sync::Once;

/// Raw mode while alive.
pub struct RawMode(());

impl RawMode {
    /// Raw mode on the controlling terminal.
    pub fn enable() -> std::io::Result<RawMode> {
        restore_on_panic();
        crossterm::terminal::enable_raw_mode()?;
        Ok(RawMode(()))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // Nothing better to do with a failure here than leave the terminal as it is.
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// A panic hook that restores the terminal before the previous hook prints the panic.
fn restore_on_panic() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = crossterm::terminal::disable_raw_mode();
            previous(info);
        }));
    });
}
