mod part;

pub use part::Thing;

pub struct Base;

pub fn make() -> Thing {
    Thing
}
