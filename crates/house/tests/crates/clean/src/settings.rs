pub struct Settings {
    pub limit: u32,
}

#[derive(Debug)]
pub struct Error;
