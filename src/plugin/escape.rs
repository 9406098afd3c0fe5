//! The console's escape key (pure): `Ctrl+]` (0x1d) ends the session, as in virtctl and telnet.
//! On a raw terminal Ctrl+C is a byte for the guest like any other, so this is the way out.

/// `Ctrl+]`, the byte a terminal sends for it.
pub const ESCAPE: u8 = 0x1d;

/// How `^]` is shown to the user.
pub const ESCAPE_SHOWN: &str = "^]";

/// The bytes of `chunk` to send before any escape key, and whether one was typed. What follows
/// the key is not sent: the session ends there.
pub fn until_escape(chunk: &[u8]) -> (&[u8], bool) {
    match chunk.iter().position(|&b| b == ESCAPE) {
        Some(at) => (&chunk[..at], true),
        None => (chunk, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_escape_key_ends_what_is_sent() {
        let cases: [(&[u8], &[u8], bool); 7] = [
            (b"ls -l\r", b"ls -l\r", false),
            (b"", b"", false),
            (b"\x1d", b"", true),
            (b"abc\x1d", b"abc", true),
            (b"abc\x1ddef", b"abc", true),
            (b"\x1d\x1d", b"", true),
            // Ctrl+C and the other control bytes are the guest's.
            (b"\x03\x04\x1b[A", b"\x03\x04\x1b[A", false),
        ];
        for (chunk, sent, escaped) in cases {
            assert_eq!(until_escape(chunk), (sent, escaped), "{chunk:?}");
        }
    }
}
