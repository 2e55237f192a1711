pub fn work() {
    let _ = super::Shared;
}
