//! Unit tests of the table, by concern.

use super::alloc::*;
use super::arena::*;
use super::evict::*;
use super::index::*;
use super::key::*;
use super::shard::*;
use super::*;
use crate::metrics::Stats;
use crate::partition::NO_OWNER;
use crate::state::cell::Step;

mod lifecycle;
mod placement;
