pub struct Config {
    pub feature: crate::feature::Settings,
}
