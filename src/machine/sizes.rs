//! The size rules shared by Machines and classes: guest memory, and disks and CD-ROMs (both
//! become claims).

use crate::api::quantity::Amount;

/// The least guest memory a Machine (or a class) may have.
pub const MIN_MEMORY: Amount = Amount::from_bytes(64 * 1024 * 1024);
/// The smallest disk a PVC can sensibly hold.
pub const MIN_DISK: Amount = Amount::from_bytes(1024 * 1024);

/// Why `amount` cannot be a claim's size, if it cannot.
pub fn claim_size_problem(amount: Amount) -> Option<&'static str> {
    if amount < MIN_DISK {
        Some("must be at least 1Mi")
    } else if !amount.is_whole() {
        Some("must be a whole number of bytes")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::quantity::parse;

    #[test]
    fn a_claim_is_at_least_1mi_and_whole_bytes() {
        let problem = |s: &str| claim_size_problem(parse(s).unwrap());
        assert_eq!(problem("1Mi"), None);
        assert_eq!(problem("1.5Mi"), None, "1572864 bytes");
        assert_eq!(problem("1023Ki"), Some("must be at least 1Mi"));
        assert_eq!(
            problem("2097152500m"),
            Some("must be a whole number of bytes")
        );
    }
}
