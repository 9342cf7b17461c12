//! The breaker state: the packed [`word::Word`], its pure transitions
//! ([`machine`]) and the one atomic cell that applies them ([`cell`]).

pub mod cell;
pub mod machine;
pub mod word;
