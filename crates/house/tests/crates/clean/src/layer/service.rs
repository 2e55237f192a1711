pub struct Layer {
    pub settings: crate::settings::Settings,
}

impl Layer {
    pub fn check(&self) -> Result<(), crate::settings::Error> {
        let _ = format!("{}", crate::settings::Settings { limit: 1 }.limit);
        Ok(())
    }
}
