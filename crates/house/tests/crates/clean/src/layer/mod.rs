mod service;

pub use service::Layer;
