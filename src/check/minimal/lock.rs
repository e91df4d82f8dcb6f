//! Witnesses of the lock checks' anomalies (two holders, fence order,
//! stale writes, lost updates, duplicates, split brain).

use super::{WitnessHistory, WitnessOptions};
use crate::history::HistoryError;
use std::path::Path;

/// The lock witnesses of the history at `path`.
pub fn find(_path: &Path, _opts: &WitnessOptions) -> Result<Vec<WitnessHistory>, HistoryError> {
    Ok(Vec::new())
}
