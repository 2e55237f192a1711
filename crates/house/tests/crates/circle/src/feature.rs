use crate::config::Config;

pub struct Settings;

pub fn start(config: &Config) -> Result<(), String> {
    let _ = config;
    Ok(())
}
