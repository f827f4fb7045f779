/// The decimal digits of `n`.
pub fn digits(n: u64) -> String {
    itoa::Buffer::new().format(n).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats() {
        assert_eq!(super::digits(1234), "1234");
    }
}
