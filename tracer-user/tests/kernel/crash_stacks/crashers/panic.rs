#[inline(never)]
fn parse_header(bytes: &[u8]) -> u8 {
    if bytes.len() < 4 { panic!("header too short: {} bytes", bytes.len()); }
    bytes[3]
}
fn main() {
    let n = std::env::args().count();
    let v = vec![7u8; n];
    println!("{}", parse_header(&v));
}
