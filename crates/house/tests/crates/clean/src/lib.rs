//! A crate that keeps the rules: settings are plain data, the feature takes its own settings, a
//! parent re-exports its children, and a macro names a path into the crate.
pub mod layer;
pub mod settings;

pub use layer::Layer;

#[cfg(test)]
mod tests {
    // Tests may reach anywhere: this is not an edge.
    use crate::layer::Layer;
    fn _f(_: Layer) -> Result<(), String> {
        Ok(())
    }
}
