pub struct Thing;

pub fn base() -> super::Base {
    super::Base
}
